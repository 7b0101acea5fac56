// The machinery of agent.toml's declarative key tables. A section is one
// KeyTable: per key its name, its ValueType (how it is written, read and
// shown), its checks, where its value goes, its default and a one-line doc.
// From the tables come the unknown-section and unknown-key checks (with
// their "known keys of [x]" lists), the type and range errors, the defaults
// and the key tables of docs/config.md (config_doc.h).
//
// A default is stated once: for most keys it is the initializer of the
// Config member the key is stored in, which the docs show by reading a
// default-made struct; a key whose default depends on the host or on other
// keys declares it with DefaultsTo, which names it for the docs and
// resolves it while reading.
//
// Sections are registered in a Schema (Schema::Add). The agent's own
// sections are declared in agent_schema.cc; each device plugin declares the
// table of its [resource.<kind>] section next to its code and registers it
// with DeviceSectionFor (resources/agent_config.cc joins them).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/choices.h"
#include "config/config.h"
#include "config/host_facts.h"
#include "config/toml_reader.h"

namespace slotd {

// One row of a key table in docs/config.md.
struct DocRow {
  std::string key;
  std::string type;     // "integer", "size", "array of strings"
  std::string default_; // markdown: `1024`, `"10s"`, **required**, or words
  std::string doc;      // markdown: what the key means, then its constraints
};

// The docs of one key table: a section's, or the items' of a table list.
struct DocTable {
  std::string name;  // where it is in the file: "agent", "resource.mock.devices"
  std::vector<DocRow> rows;
};

// What became of one key while reading a file.
struct KeyOutcome {
  const toml::node* node = nullptr;  // null: the key is absent
  bool ok = false;                   // present, and its value passed every check
};

// The state of reading one file: the parsed root, the host that defaults
// come from, the problems found so far and what became of each key read.
class ConfigReader {
 public:
  ConfigReader(const toml::table& root, const HostFacts& host);

  const toml::table& root() const { return root_; }
  const HostFacts& host() const { return host_; }
  // host().cpuset sorted, without duplicates.
  const std::vector<int>& cpuset() const { return cpuset_; }
  ProblemLog& problems() { return problems_; }

  void Report(const Field& field, const std::string& what) { problems_.Report(field, what); }
  void Report(const toml::source_region* where, const std::string& key_path, const std::string& what) {
    problems_.Report(where, key_path, what);
  }

  // Records what became of the key at `key_path`; keys read later (a
  // default worked out from another key) ask with OutcomeOf.
  void Record(const std::string& key_path, KeyOutcome outcome) { outcomes_[key_path] = outcome; }
  // The outcome of `key_path`; absent when it was never recorded.
  KeyOutcome OutcomeOf(const std::string& key_path) const;

 private:
  const toml::table& root_;
  const HostFacts& host_;
  std::vector<int> cpuset_;
  ProblemLog problems_;
  std::map<std::string, KeyOutcome> outcomes_;
};

// A kind of value as agent.toml writes it.
template <typename V>
struct ValueType {
  std::string name;  // the docs' type column: "integer", "size", "array of strings"
  std::string doc;   // a sentence the docs add to every key of this type ("One of ..."); may be empty
  // The value of `field`, or nullopt after reporting why it is not one.
  std::function<std::optional<V>(const Field&, ConfigReader&)> read;
  // A value as messages write it: "1024", "10s", "/run/x".
  std::function<std::string(const V&)> text;
  bool quoted = false;            // whether the file writes it as a TOML string
  std::vector<DocTable> nested;   // the key tables inside it (a table list's items), for the docs

  // A value as the docs write it: `1024`, `"10s"`.
  std::string Show(const V& value) const {
    return quoted ? "`\"" + text(value) + "\"`" : "`" + text(value) + "`";
  }
};

// A rule on a value that has the right type.
template <typename V>
struct Check {
  std::string doc;  // a sentence for the docs ("1 to 65536."); empty when the key's doc says it
  // Reports what is wrong with `value` at `field`; false when it is refused.
  std::function<bool(const V&, const Field&, ConfigReader&)> accept;
};

// A check from a rule that says what is wrong with a value, or "" when nothing is.
template <typename V>
Check<V> Rule(std::string doc, std::function<std::string(const V&, const Field&, const ConfigReader&)> problem) {
  return Check<V>{std::move(doc), [problem = std::move(problem)](const V& value, const Field& field,
                                                                  ConfigReader& reader) {
                    const std::string what = problem(value, field, reader);
                    if (!what.empty()) reader.Report(field, what);
                    return what.empty();
                  }};
}

// Where an absent key would have been, for a "missing" report.
struct Absence {
  const toml::table* table = nullptr;  // its table, or null when that is absent
  bool table_unusable = false;         // the table is present but not a table (reported already)
  std::string path;                    // the key's full path
};

// One key of a table that reads into a T.
template <typename T>
struct Key {
  std::string name;
  std::string type;               // the docs' type column
  std::string doc;                // the docs' meaning column: the key's doc, then its checks' sentences
  std::vector<DocTable> nested;   // key tables inside its value, for the docs
  // The docs' default column, from a default-made T.
  std::function<std::string(const T&)> show_default;
  // Reads the present value at `field` into `target`; false when it is unusable (reported).
  std::function<bool(const Field&, T&, ConfigReader&)> read;
  // Runs when the key is absent; null: the target keeps its initializer.
  std::function<void(T&, ConfigReader&, const Absence&)> absent;

  // The key must be present; `advice` follows "missing; " in the report.
  Key&& Required(std::string advice) && {
    show_default = [](const T&) { return std::string("**required**"); };
    absent = [advice = std::move(advice)](T&, ConfigReader& reader, const Absence& where) {
      if (where.table_unusable) return;  // one problem for the table is enough
      reader.Report(where.table != nullptr ? &where.table->source() : nullptr, where.path, "missing; " + advice);
    };
    return std::move(*this);
  }

  // An absent key takes the default `resolve` works out from the host or
  // other keys (it reports when it cannot); `doc` names it in the docs.
  Key&& DefaultsTo(std::string doc, std::function<void(T&, ConfigReader&)> resolve) && {
    show_default = [doc = std::move(doc)](const T&) { return doc; };
    absent = [resolve = std::move(resolve)](T& target, ConfigReader& reader, const Absence&) {
      resolve(target, reader);
    };
    return std::move(*this);
  }

  // Only the docs' default column changes: the value itself is the initializer.
  Key&& DefaultDoc(std::string doc) && {
    show_default = [doc = std::move(doc)](const T&) { return doc; };
    return std::move(*this);
  }
};

// A key whose value `store` puts into the target; `show_default` shows the
// default from a default-made T (null only when DefaultsTo or DefaultDoc
// follows and says it).
template <typename T, typename V>
Key<T> StoredKey(std::string name, ValueType<V> type, std::string doc, std::vector<Check<V>> checks,
                 std::function<void(T&, V&&)> store, std::function<std::string(const T&)> show_default) {
  Key<T> key;
  key.name = std::move(name);
  key.type = type.name;
  key.doc = std::move(doc);
  if (!type.doc.empty()) key.doc += " " + type.doc;
  for (const Check<V>& check : checks) {
    if (!check.doc.empty()) key.doc += " " + check.doc;
  }
  key.nested = type.nested;
  key.show_default = std::move(show_default);
  key.read = [read = std::move(type.read), checks = std::move(checks), store = std::move(store)](
                 const Field& field, T& target, ConfigReader& reader) {
    std::optional<V> value = read(field, reader);
    if (!value) return false;
    for (const Check<V>& check : checks) {
      if (!check.accept(*value, field, reader)) return false;
    }
    store(target, std::move(*value));
    return true;
  };
  return key;
}

// Whether M is a std::optional (a key whose absence leaves no value).
template <typename M>
struct IsOptional : std::false_type {};
template <typename M>
struct IsOptional<std::optional<M>> : std::true_type {};

// A key stored in `member` of T. Its default is the member's initializer;
// an optional member without a value shows as "none".
template <typename T, typename V, typename M>
Key<T> MemberKey(std::string name, M T::*member, ValueType<V> type, std::string doc,
                 std::vector<Check<V>> checks = {}) {
  auto show_default = [member, type](const T& defaults) {
    const M& value = defaults.*member;
    if constexpr (IsOptional<M>::value) {
      return value ? type.Show(V(*value)) : std::string("none");
    } else {
      return type.Show(static_cast<V>(value));
    }
  };
  auto store = [member](T& target, V&& value) { target.*member = static_cast<M>(std::move(value)); };
  return StoredKey<T, V>(std::move(name), std::move(type), std::move(doc), std::move(checks), std::move(store),
                         std::move(show_default));
}

// The keys of one table that reads into a T: a section, or each item of a
// table list.
template <typename T>
struct KeyTable {
  std::string name;      // where it is in the file: "agent", "resource.mock.devices"
  std::string known_as;  // in "unknown key; known keys of <known_as>: ...": "[agent]", "a mock device"
  std::vector<Key<T>> keys;

  std::vector<std::string> KeyNames() const {
    std::vector<std::string> names;
    for (const Key<T>& key : keys) names.push_back(key.name);
    return names;
  }

  // Its docs first, then those of the tables nested in its values.
  std::vector<DocTable> Docs() const {
    const T defaults{};
    std::vector<DocTable> docs(1);
    docs[0].name = name;
    for (const Key<T>& key : keys) {
      docs[0].rows.push_back(DocRow{key.name, key.type, key.show_default(defaults), key.doc});
      docs.insert(docs.end(), key.nested.begin(), key.nested.end());
    }
    return docs;
  }

  // Reads every key of `table` (at `path`) into `target`, in table order:
  // a present key is read and checked, an absent one takes its default.
  // `table` is null when the table is absent; unknown keys are not checked here.
  void Read(const toml::table* table, const std::string& path, bool table_unusable, T& target,
            ConfigReader& reader) const {
    for (const Key<T>& key : keys) {
      const std::string key_path = path + "." + key.name;
      if (std::optional<Field> field = FindField(table, path, key.name)) {
        const bool ok = key.read(*field, target, reader);
        reader.Record(key_path, KeyOutcome{field->node, ok});
      } else if (key.absent) {
        key.absent(target, reader, Absence{table, table_unusable, key_path});
      }
    }
  }
};

// "a, b, c".
std::string JoinList(const std::vector<std::string>& list);

// Reports each key of `table` (at `path`) that `names` lacks, as
// "unknown key; known keys of <known_as>: <names>".
void ReportUnknownKeys(const toml::table& table, const std::string& path, const std::vector<std::string>& names,
                       const std::string& known_as, ConfigReader& reader);

// The items of the array at `field`, each with its path ("x[0]"), or nullopt
// after reporting "expected an array of <what>, found ..." or "is empty; <if_empty>".
std::optional<std::vector<Field>> ArrayItems(const Field& field, std::string_view what, std::string_view if_empty,
                                             ConfigReader& reader);

// ----------------------------------------------------------- value types

ValueType<std::string> StringType();
// An absolute path: "\"x\" is not an absolute path; ...".
ValueType<std::string> PathType();
// A string that is one of `choices`.
ValueType<std::string> EnumType(std::vector<std::string> choices);
// A string that is one of `words`, read as the choice it names: a setting
// that is a choice is typed from the moment the file is read.
template <typename E>
ValueType<E> ChoiceType(const ChoiceWords<E>& words) {
  std::vector<std::string> names;
  for (const auto& choice : words) names.push_back(choice.second);
  ValueType<std::string> strings = EnumType(std::move(names));
  ValueType<E> type;
  type.name = strings.name;
  type.doc = strings.doc;
  type.quoted = true;
  type.read = [&words, read = std::move(strings.read)](const Field& field, ConfigReader& reader) -> std::optional<E> {
    const std::optional<std::string> word = read(field, reader);
    return word ? ChoiceOf(words, *word) : std::nullopt;  // EnumType refused every other word
  };
  type.text = [&words](const E& value) { return WordOf(words, value); };
  return type;
}
ValueType<int64_t> IntegerType();
// true or false.
ValueType<bool> BoolType();
// Bytes: a size string ("512m") or an integer.
ValueType<uint64_t> SizeType();
// A duration string ("10s"); a bare number is refused.
ValueType<std::chrono::milliseconds> DurationType();
// A core list string ("0-7,16"), parsed to sorted, unique cores.
ValueType<std::vector<int>> CoreListType();
// A non-empty array of `item`s like `what`, each passing `item_checks` and
// listed once ("\"x\" is already listed; <listed_once>").
ValueType<std::vector<std::string>> ListType(ValueType<std::string> item, std::vector<Check<std::string>> item_checks,
                                             std::string what, std::string if_empty, std::string listed_once);

// A non-empty array of tables, each read with `items`: its unknown keys
// reported with items.known_as, "expected a table like <item_example>" for
// an item that is not a table (it still takes its place in the list).
template <typename Item>
ValueType<std::vector<Item>> TableListType(KeyTable<Item> items, std::string what, std::string if_empty,
                                           std::string item_example) {
  ValueType<std::vector<Item>> type;
  type.name = "array of " + what.substr(0, what.find(" like "));
  type.doc = "At least one.";
  type.nested = items.Docs();
  type.text = [](const std::vector<Item>&) { return std::string("[...]"); };
  type.read = [items = std::move(items), what = std::move(what), if_empty = std::move(if_empty),
               item_example = std::move(item_example)](const Field& field,
                                                       ConfigReader& reader) -> std::optional<std::vector<Item>> {
    std::optional<std::vector<Field>> fields = ArrayItems(field, what, if_empty, reader);
    if (!fields) return std::nullopt;
    const std::vector<std::string> names = items.KeyNames();
    std::vector<Item> values;
    for (const Field& item : *fields) {
      Item value{};
      if (const toml::table* table = item.node->as_table()) {
        ReportUnknownKeys(*table, item.path, names, items.known_as, reader);
        items.Read(table, item.path, false, value, reader);
      } else {
        reader.Report(item, "expected a table like " + item_example + ", found " + TypeName(*item.node));
      }
      values.push_back(std::move(value));
    }
    return values;
  };
  return type;
}

// ---------------------------------------------------------------- checks

Check<std::string> NotEmpty();
// "<v> is out of range; use <min> to <max>".
Check<int64_t> IntegerRange(int64_t min, int64_t max);
// "\"<as written>\" is out of range; use <min> to <max>".
Check<std::chrono::milliseconds> DurationRange(std::chrono::milliseconds min, std::chrono::milliseconds max);
// "is out of range; use <min> to <max>".
Check<uint64_t> SizeRange(uint64_t min, uint64_t max);
// "must be above 0".
Check<uint64_t> AboveZero();

// 0 (which means `zero_means`) or at least `min`: "<too_small>; use 0
// (<zero_means>) or <min> and up".
template <typename V>
Check<V> ZeroOrAtLeast(const ValueType<V>& type, V min, std::string zero_means, std::string too_small) {
  std::string doc = "`0` means " + zero_means + "; otherwise at least " + type.Show(min) + ".";
  std::string what = too_small + "; use 0 (" + zero_means + ") or " + type.text(min) + " and up";
  return Rule<V>(std::move(doc), [min, what = std::move(what)](const V& value, const Field&, const ConfigReader&) {
    return value != V{} && value < min ? what : std::string();
  });
}

// ---------------------------------------------------------------- schema

// One section of agent.toml: its key table, bound to the part of Config it reads into.
class Section {
 public:
  // `bind` gives the struct the keys are read into. It is told whether the
  // section is present, and returns null to skip it: a plugin's section
  // turns its plugin on, so it binds only when present.
  template <typename T>
  Section(KeyTable<T> table, std::function<T*(Config&, bool present)> bind)
      : name_(table.name), known_as_(table.known_as), key_names_(table.KeyNames()), docs_(table.Docs()) {
    read_ = [table = std::move(table), bind = std::move(bind)](const toml::table& root, Config& config,
                                                                ConfigReader& reader) {
      const toml::node* node = NodeAt(root, table.name);
      const toml::table* section = node != nullptr ? node->as_table() : nullptr;
      T* target = bind(config, section != nullptr);
      if (target == nullptr) return;
      table.Read(section, table.name, node != nullptr && section == nullptr, *target, reader);
    };
  }

  // A section written as an array of tables ([[name]]), each item read with
  // `items` into one element of the list `bind` gives; absent: left empty.
  // `item_example` shows an item in the error for one that is not a table.
  template <typename Item>
  static Section TableList(KeyTable<Item> items, std::function<std::vector<Item>*(Config&)> bind,
                           std::string item_example) {
    Section section;
    section.name_ = items.name;
    section.known_as_ = items.known_as;
    section.key_names_ = items.KeyNames();
    section.docs_ = items.Docs();
    section.list_ = true;
    const std::string name = items.name;
    ValueType<std::vector<Item>> type =
        TableListType(std::move(items), "tables like [[" + name + "]]", "write each entry as a [[" + name + "]] table",
                      std::move(item_example));
    section.read_ = [type = std::move(type), bind = std::move(bind), name](const toml::table& root, Config& config,
                                                                           ConfigReader& reader) {
      const toml::node* node = NodeAt(root, name);
      if (node == nullptr) return;
      if (std::optional<std::vector<Item>> values = type.read(Field{node, name}, reader)) *bind(config) = std::move(*values);
    };
    return section;
  }

  const std::string& name() const { return name_; }
  // How the file writes its header: "[agent]", or "[[pool]]" for a table list.
  std::string Header() const { return list_ ? "[[" + name_ + "]]" : "[" + name_ + "]"; }
  bool list() const { return list_; }
  const std::string& known_as() const { return known_as_; }
  const std::vector<std::string>& key_names() const { return key_names_; }
  // The section's key table first, then the tables nested in its values.
  const std::vector<DocTable>& docs() const { return docs_; }

  // Reads the section (absent or not) from `root` into `config`.
  void Read(const toml::table& root, Config& config, ConfigReader& reader) const { read_(root, config, reader); }

 private:
  Section() = default;

  std::string name_;
  bool list_ = false;  // an array of tables ([[name]]), not one table
  std::string known_as_;
  std::vector<std::string> key_names_;
  std::vector<DocTable> docs_;
  std::function<void(const toml::table&, Config&, ConfigReader&)> read_;
};

// A device plugin's section, [resource.<kind>], read with `table` into a T
// (a DeviceSection) that Config::resource.devices.by_kind[kind] then holds.
// An absent section is not stored, so its plugin stays off.
template <typename T>
Section DeviceSectionFor(const std::string& kind, KeyTable<T> table) {
  static_assert(std::is_base_of_v<DeviceSection, T>, "a device section derives from DeviceSection");
  return Section(std::move(table), std::function<T*(Config&, bool)>([kind](Config& config, bool present) -> T* {
                   if (!present) return nullptr;
                   auto section = std::make_shared<T>();
                   config.resource.devices.by_kind[kind] = section;
                   return section.get();
                 }));
}

// The sections a config file may have, in the order messages and docs list them.
class Schema {
 public:
  // Registers `section` after those registered before.
  void Add(Section section) { sections_.push_back(std::move(section)); }

  const std::vector<Section>& sections() const { return sections_; }
  std::vector<std::string> SectionNames() const;

  // Reads `root`: reports unknown sections and keys, then reads every
  // section in order. The Config, or InvalidArgument listing every problem
  // ("<file>:<line>: <key path>: <what is wrong>") in file order.
  Result<Config> Read(const toml::table& root, const std::string& file, const HostFacts& host) const;
  // The same from agent.toml text (`file` names it in messages); a TOML
  // syntax error is one problem line. No exception leaves it.
  Result<Config> Parse(const std::string& text, const std::string& file, const HostFacts& host) const;
  // The same from the file at `path`.
  Result<Config> Load(const std::string& path, const HostFacts& host) const;

 private:
  // Reports unknown sections and keys, and known sections that are not tables.
  void CheckLayout(const toml::table& table, const std::string& path, ConfigReader& reader) const;
  const Section* Find(std::string_view name) const;

  std::vector<Section> sections_;
};

}  // namespace slotd
