// What the config tables (src/config/agent_schema.cc) promise for every key
// at once: each table's keys are exactly the known keys and the documented
// ones, a wrong type is refused with the type's own message, a documented
// default is the default, and docs/config.md's generated parts are rewritten
// from the tables (the ctest config.docs_match_the_tables checks the file).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "config/agent_schema.h"
#include "config/config.h"
#include "resources/agent_config.h"
#include "config/config_doc.h"
#include "testing/test_host.h"

namespace slotd {
namespace {

Result<Config> ParseAgentToml(const std::string& text) { return ParseConfig(text, "agent.toml", TestHost()); }

// The problems of `text`, one per entry; empty when it is accepted.
std::vector<std::string> ProblemsOf(const std::string& text) {
  Result<Config> config = ParseAgentToml(text);
  std::vector<std::string> problems;
  if (config.ok()) return problems;
  std::istringstream lines(config.status().message());
  for (std::string line; std::getline(lines, line);) problems.push_back(line);
  return problems;
}

// Every key table of the schema with its key names, nested ones included.
std::vector<DocTable> AllTables() {
  std::vector<DocTable> tables;
  for (const Section& section : AgentSchema().sections()) {
    tables.insert(tables.end(), section.docs().begin(), section.docs().end());
  }
  return tables;
}

std::vector<std::string> KeysOf(const DocTable& table) {
  std::vector<std::string> keys;
  for (const DocRow& row : table.rows) keys.push_back(row.key);
  return keys;
}

// A valid file with table `name` holding `key_lines` (TOML lines): the
// required keys around it are filled in unless `key_lines` sets them.
std::string FileWith(const std::string& name, const std::string& key_lines, const std::string& key = "") {
  std::string text = name == "agent" ? "" : "[agent]\nid = \"a1\"\n";
  if (name == "agent") {
    return "[agent]\n" + std::string(key == "id" ? "" : "id = \"a1\"\n") + key_lines;
  }
  if (name == "resource.mock") {
    return text + "[resource.mock]\n" +
           (key == "devices" ? "" : "devices = [{ id = \"m0\", memory = \"1g\" }]\n") + key_lines;
  }
  if (name == "resource.mock.devices") {
    return text + "[[resource.mock.devices]]\n" + (key == "id" ? "" : "id = \"m0\"\n") +
           (key == "memory" ? "" : "memory = \"1g\"\n") + key_lines;
  }
  if (name == "etcd") {
    return text + "[etcd]\n" + (key == "endpoints" ? "" : "endpoints = [\"http://127.0.0.1:2379\"]\n") + key_lines;
  }
  if (name == "pool") {
    return text + "[[pool]]\n" + (key == "name" ? "" : "name = \"p\"\n") +
           (key == "image" ? "" : "image = \"slotd-test/busybox:latest\"\n") + key_lines;
  }
  if (name == "container.mount-allow") {
    return text + "[[container.mount-allow]]\n" + (key == "path" ? "" : "path = \"/srv/data\"\n") + key_lines;
  }
  return text + "[" + name + "]\n" + key_lines;
}

// Whether `name` is the key table of a table list's items.
bool IsTableList(const std::string& name) {
  return name == "resource.mock.devices" || name == "container.mount-allow" || name == "pool";
}

// ------------------------------------------------- known keys are the table

TEST(ConfigSchemaTest, TheSectionsAreTheTablesInTheirOrder) {
  std::vector<std::string> names;
  for (const Section& section : AgentSchema().sections()) names.push_back(section.name());
  EXPECT_EQ(names, AgentSchema().SectionNames());
  EXPECT_EQ(JoinList(names),
            "agent, api, node, container, resource, resource.cpu, resource.memory, etcd, pool, resource.cuda, "
            "resource.mock");
  EXPECT_EQ(ProblemsOf("[agent]\nid = \"a1\"\n[gpu]\n"),
            std::vector<std::string>{"agent.toml:3: gpu: unknown section; known sections: " + JoinList(names)});
}

TEST(ConfigSchemaTest, AnUnknownKeyListsExactlyTheKeysOfItsTable) {
  for (const Section& section : AgentSchema().sections()) {
    const std::vector<std::string> keys = KeysOf(section.docs()[0]);
    EXPECT_EQ(section.key_names(), keys) << section.name();
    const std::vector<std::string> problems = ProblemsOf(FileWith(section.name(), "zz-unknown = 1\n"));
    ASSERT_EQ(problems.size(), 1u) << section.name() << ": " << ::testing::PrintToString(problems);
    // A table list's items are reported by their place in the list.
    const std::string at = section.list() ? section.name() + "[0]" : section.name();
    const std::string known_as = section.list() ? "a " + section.Header() + " entry" : section.Header();
    EXPECT_EQ(problems[0].substr(problems[0].find(' ') + 1),
              at + ".zz-unknown: unknown key; known keys of " + known_as + ": " + JoinList(keys));
  }
  const std::vector<std::string> problems = ProblemsOf(FileWith("resource.mock.devices", "zz-unknown = 1\n"));
  ASSERT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
  EXPECT_EQ(problems[0], "agent.toml:6: resource.mock.devices[0].zz-unknown: unknown key; known keys of a mock "
                         "device: id, memory, processing-units, numa-node");
}

TEST(ConfigSchemaTest, EveryDocumentedKeyIsKnown) {
  // Each key, given a value of the wrong type, is reported as that key (a
  // type error), never as an unknown one.
  for (const DocTable& table : AllTables()) {
    for (const std::string& key : KeysOf(table)) {
      for (const std::string& problem : ProblemsOf(FileWith(table.name, key + " = true\n", key))) {
        EXPECT_EQ(problem.find("unknown"), std::string::npos) << table.name << "." << key << ": " << problem;
      }
    }
  }
}

// ------------------------------------------------------------- wrong types

TEST(ConfigSchemaTest, EveryKeyRefusesAWrongTypeAloneWithItsTypesMessage) {
  for (const DocTable& table : AllTables()) {
    for (const DocRow& row : table.rows) {
      const std::string& key = row.key;
      // A boolean is the wrong type for every key but the boolean ones.
      const bool boolean = row.type == "boolean";
      const std::vector<std::string> problems =
          ProblemsOf(FileWith(table.name, key + (boolean ? " = \"yes\"\n" : " = true\n"), key));
      ASSERT_EQ(problems.size(), 1u) << table.name << "." << key << ": " << ::testing::PrintToString(problems);
      const std::string path = IsTableList(table.name) ? table.name + "[0]." + key : table.name + "." + key;
      EXPECT_NE(problems[0].find(": " + path + ": expected "), std::string::npos) << problems[0];
      EXPECT_NE(problems[0].find(boolean ? ", found a string" : ", found a boolean"), std::string::npos) << problems[0];
    }
  }
}

// The type column of `key` in `table`.
std::string TypeOf(const std::string& table_name, const std::string& key) {
  for (const DocTable& table : AllTables()) {
    if (table.name != table_name) continue;
    for (const DocRow& row : table.rows) {
      if (row.key == key) return row.type;
    }
  }
  return "(no such key)";
}

TEST(ConfigSchemaTest, EachTypeSaysWhatItExpects) {
  struct Case {
    std::string table, key, type, expected;
  };
  const std::vector<Case> cases = {
      {"agent", "scaling-group", "string", "expected a string"},
      {"agent", "rpc-listen-addr", "string", "expected a string"},
      {"node", "claims-dir", "path", "expected a string"},
      {"container", "network", "enum", "expected a string"},
      {"api", "max-connections", "integer", "expected an integer"},
      {"api", "max-body-size", "size", "expected a size (a string like \"32g\" or an integer of bytes)"},
      {"api", "request-timeout", "duration", "expected a duration string like \"10s\""},
      {"resource.cpu", "allowed-cores", "core list", "expected a core list string like \"0-7,16\""},
      {"container", "port-range", "array of two integers", "expected an array of two integers [start, end]"},
      {"resource.cuda", "allowed-devices", "array of strings",
       "expected an array of GPU UUIDs or indices like [\"GPU-6f3c1a2b-...\", \"1\"]"},
      {"resource.mock", "allowed-devices", "array of strings", "expected an array of device ids like [\"mock0\"]"},
      {"resource.mock", "devices", "array of device tables",
       "expected an array of device tables like [{ id = \"mock0\", memory = \"16g\" }]"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(TypeOf(c.table, c.key), c.type) << c.table << "." << c.key;
    const std::vector<std::string> problems = ProblemsOf(FileWith(c.table, c.key + " = 1.5\n", c.key));
    ASSERT_EQ(problems.size(), 1u) << c.key;
    EXPECT_EQ(problems[0].substr(problems[0].find(' ') + 1),
              c.table + "." + c.key + ": " + c.expected + ", found a floating-point number");
  }
}

// ---------------------------------------------------------------- defaults

// The TOML for a default as the docs show it, or "" when the docs describe
// it in words (it depends on the host or on other keys) or the key is required.
std::string TomlOfDocumentedDefault(const std::string& shown) {
  if (shown.size() < 3 || shown.front() != '`' || shown.back() != '`') return "";
  const std::string value = shown.substr(1, shown.size() - 2);
  if (value.find_first_of("<$`") != std::string::npos) return "";
  return value.front() == '/' ? "\"" + value + "\"" : value;
}

TEST(ConfigSchemaTest, WritingADocumentedDefaultChangesNothing) {
  int checked = 0;
  for (const DocTable& table : AllTables()) {
    for (const DocRow& row : table.rows) {
      EXPECT_FALSE(row.default_.empty()) << table.name << "." << row.key;
      EXPECT_FALSE(row.doc.empty()) << table.name << "." << row.key;
      const std::string value = TomlOfDocumentedDefault(row.default_);
      if (value.empty()) continue;
      Result<Config> without = ParseAgentToml(FileWith(table.name, "", row.key));
      Result<Config> with = ParseAgentToml(FileWith(table.name, row.key + " = " + value + "\n", row.key));
      ASSERT_TRUE(without.ok()) << without.status().message();
      ASSERT_TRUE(with.ok()) << table.name << "." << row.key << " = " << value << ": " << with.status().message();
      EXPECT_TRUE(*with == *without) << table.name << "." << row.key << " = " << value;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 55);  // every key whose default is a plain value
}

TEST(ConfigSchemaTest, RequiredKeysAreTheOnesTheDocsMarkRequired) {
  std::vector<std::string> required;
  for (const DocTable& table : AllTables()) {
    for (const DocRow& row : table.rows) {
      if (row.default_ == "**required**") required.push_back(table.name + "." + row.key);
    }
  }
  EXPECT_EQ(required, (std::vector<std::string>{"agent.id", "container.mount-allow.path", "etcd.endpoints",
                                                 "pool.name", "pool.image", "resource.mock.devices",
                                                 "resource.mock.devices.id",
                                                 "resource.mock.devices.memory"}));
}

TEST(ConfigSchemaTest, DefaultsSharedWithOtherProgramsAreTheConfigsDefaults) {
  Result<Config> config = ParseAgentToml("[agent]\nid = \"a1\"\n");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(DefaultApiUrl(), "http://" + config->agent.rpc_host + ":" + std::to_string(config->agent.rpc_port));
  EXPECT_EQ(config->node.claims_dir, kDefaultClaimsDir);
  EXPECT_EQ(config->agent.ipc_base_path, DefaultIpcBasePath("a1"));
  EXPECT_EQ(config->agent.var_base_path, DefaultVarBasePath("a1"));
  EXPECT_EQ(config->container.docker_host, kDefaultDockerHost);
}

// ------------------------------------------------------ a registered section

struct ExtraConfig {
  int64_t level = 3;
  std::string mode = "fast";
};

TEST(ConfigSchemaTest, ASectionRegisteredFromElsewhereIsReadCheckedAndDocumented) {
  // As a plugin would declare its own [resource.<name>] table: here it reads
  // into a struct of the test's own through the bind function.
  ExtraConfig extra;
  Schema schema;
  schema.Add(Section(KeyTable<ExtraConfig>{"extra", "[extra]",
                                           {MemberKey("level", &ExtraConfig::level, IntegerType(), "How much.",
                                                      {IntegerRange(1, 9)}),
                                            MemberKey("mode", &ExtraConfig::mode, EnumType({"fast", "slow"}),
                                                      "How.")}},
                     std::function<ExtraConfig*(Config&, bool)>([&](Config&, bool present) {
                       return present ? &extra : nullptr;
                     })));
  Result<toml::table> root = ParseToml("[extra]\nlevel = 5\nmode = \"slow\"\n", "x.toml");
  ASSERT_TRUE(root.ok());
  ASSERT_TRUE(schema.Read(*root, "x.toml", TestHost()).ok());
  EXPECT_EQ(extra.level, 5);
  EXPECT_EQ(extra.mode, "slow");

  root = ParseToml("[extra]\nlevel = 10\nmood = 1\n[other]\n", "x.toml");
  ASSERT_TRUE(root.ok());
  Result<Config> config = schema.Read(*root, "x.toml", TestHost());
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(),
            "x.toml:2: extra.level: 10 is out of range; use 1 to 9\n"
            "x.toml:3: extra.mood: unknown key; known keys of [extra]: level, mode\n"
            "x.toml:4: other: unknown section; known sections: extra");

  const std::vector<std::pair<std::string, std::string>> parts = GeneratedDocParts(schema);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].second, "The accepted sections are `[extra]`.\n");
  EXPECT_EQ(parts[1].first, "extra");
  EXPECT_EQ(parts[1].second,
            "| key | type | default | meaning and constraints |\n"
            "| --- | --- | --- | --- |\n"
            "| `level` | integer | `3` | How much. 1 to 9. |\n"
            "| `mode` | enum | `\"fast\"` | How. One of `fast`, `slow`. |\n");
}

// ------------------------------------------------------ generated doc parts

// A doc with a marker pair for every part of the agent schema, each holding `inside`.
std::string DocWithEveryPart(const std::string& inside) {
  std::string doc = "# title\n\nprose\n";
  for (const auto& [name, text] : GeneratedDocParts(AgentSchema())) {
    doc += "\n<!-- generated:begin " + name + " -->\n" + inside + "<!-- generated:end " + name + " -->\nafter " +
           name + "\n";
  }
  return doc;
}

TEST(ConfigSchemaTest, RefreshRewritesOnlyTheGeneratedParts) {
  Result<std::string> fresh = RefreshGeneratedDocParts(DocWithEveryPart("stale\n"), AgentSchema());
  ASSERT_TRUE(fresh.ok()) << fresh.status().message();
  EXPECT_EQ(fresh->find("stale"), std::string::npos);
  EXPECT_EQ(fresh->rfind("# title\n\nprose\n", 0), 0u);
  for (const auto& [name, text] : GeneratedDocParts(AgentSchema())) {
    EXPECT_NE(fresh->find(BeginMarker(name) + "\n\n" + text + "\n" + EndMarker(name) + "\nafter " + name + "\n"),
              std::string::npos)
        << name;
  }
  // A fresh doc is its own refresh: that is what the docs check compares.
  Result<std::string> again = RefreshGeneratedDocParts(*fresh, AgentSchema());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *fresh);
  EXPECT_NE(fresh->find("| `max-connections` | integer | `1024` | "), std::string::npos);
  EXPECT_NE(fresh->find("The accepted sections are `[agent]`, `[api]`, "), std::string::npos);
}

// agent.toml(5) is made from the same tables: each key with its type,
// default and meaning, the markdown dropped and roff's special characters escaped.
TEST(ConfigSchemaTest, TheManPageHasEveryKeyInRoff) {
  ExtraConfig extra;
  Schema schema;
  schema.Add(Section(KeyTable<ExtraConfig>{"extra", "[extra]",
                                           {MemberKey("level", &ExtraConfig::level, IntegerType(),
                                                      ".dot-led \\ `code` **bold** 2\u00d72 \xff", {}),
                                            MemberKey("mode", &ExtraConfig::mode, EnumType({"fast", "slow"}),
                                                      "How.")}},
                     std::function<ExtraConfig*(Config&, bool)>([&](Config&, bool present) {
                       return present ? &extra : nullptr;
                     })));
  const std::string page = RenderManPage(schema, "9.8.7");
  EXPECT_EQ(page.find(".TH AGENT.TOML 5 \"\" \"slotd 9.8.7\""), page.find(".TH")) << page;
  EXPECT_NE(page.find("The accepted sections are [extra].\n"), std::string::npos) << page;
  EXPECT_NE(page.find(".SS [extra]\n.TP\n.B level\ninteger; default: 3.\n.br\n"
                      "\\&.dot\\-led \\e code bold 2\\[u00D7]2 ?\n"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find(".TP\n.B mode\nenum; default: \"fast\".\n.br\nHow. One of fast, slow.\n"), std::string::npos)
      << page;
  // Only the markdown's own text is left: no backtick and no bold markers.
  EXPECT_EQ(page.find('`'), std::string::npos);
  EXPECT_EQ(page.find("**"), std::string::npos);
}

TEST(ConfigSchemaTest, RefreshRefusesMarkersThatDoNotPair) {
  const std::string doc = DocWithEveryPart("");
  auto error_of = [](const std::string& text) {
    Result<std::string> fresh = RefreshGeneratedDocParts(text, AgentSchema());
    return fresh.ok() ? std::string("accepted") : fresh.status().message();
  };
  EXPECT_EQ(error_of(doc + "<!-- generated:begin gpu -->\n"), "line 60: no generated part is called gpu");
  EXPECT_EQ(error_of(doc + "<!-- generated:begin api -->\n"), "line 60: generated part api is there twice");
  EXPECT_EQ(error_of("<!-- generated:begin api -->\n"), "generated part api has no end marker");
  EXPECT_EQ(error_of("<!-- generated:end api -->\n"), "line 1: end of generated part api without its begin");
  const std::string without_node = doc.substr(0, doc.find("\n<!-- generated:begin node ")) +
                                   doc.substr(doc.find("after node\n") + 11);
  EXPECT_EQ(error_of(without_node),
            "generated part node is missing; add the lines \"<!-- generated:begin node -->\" and \"<!-- "
            "generated:end node -->\" where it belongs");
}

}  // namespace
}  // namespace slotd
