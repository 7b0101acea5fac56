// The value types and checks of the key tables, and the Schema walk that
// applies them: layout first, then each section in registration order.
#include "config/schema.h"

#include <algorithm>

#include "common/units.h"

namespace slotd {
namespace {

bool Contains(const std::vector<std::string>& list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// A string value, or nullopt after "expected a string, found ...".
std::optional<std::string> ReadString(const Field& field, ConfigReader& reader) {
  if (const auto* value = field.node->as_string()) return value->get();
  reader.Report(field, "expected a string, found " + TypeName(*field.node));
  return std::nullopt;
}

// A duration as messages and docs write it; zero is "0s".
std::string DurationText(std::chrono::milliseconds duration) {
  return duration.count() == 0 ? "0s" : FormatDuration(duration);
}

}  // namespace

ConfigReader::ConfigReader(const toml::table& root, const HostFacts& host)
    : root_(root), host_(host), cpuset_(host.cpuset) {
  std::sort(cpuset_.begin(), cpuset_.end());
  cpuset_.erase(std::unique(cpuset_.begin(), cpuset_.end()), cpuset_.end());
}

KeyOutcome ConfigReader::OutcomeOf(const std::string& key_path) const {
  auto it = outcomes_.find(key_path);
  return it == outcomes_.end() ? KeyOutcome{} : it->second;
}

std::string JoinList(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& item : list) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

void ReportUnknownKeys(const toml::table& table, const std::string& path, const std::vector<std::string>& names,
                       const std::string& known_as, ConfigReader& reader) {
  for (auto&& [key, node] : table) {
    if (!Contains(names, key.str())) {
      reader.Report(&key.source(), path + "." + KeyPart(key.str()),
                    "unknown key; known keys of " + known_as + ": " + JoinList(names));
    }
  }
}

std::optional<std::vector<Field>> ArrayItems(const Field& field, std::string_view what, std::string_view if_empty,
                                             ConfigReader& reader) {
  const toml::array* array = field.node->as_array();
  if (array == nullptr) {
    reader.Report(field, "expected an array of " + std::string(what) + ", found " + TypeName(*field.node));
    return std::nullopt;
  }
  if (array->empty()) {
    reader.Report(field, "is empty; " + std::string(if_empty));
    return std::nullopt;
  }
  std::vector<Field> items;
  for (size_t i = 0; i < array->size(); ++i) {
    items.push_back(Field{array->get(i), field.path + "[" + std::to_string(i) + "]"});
  }
  return items;
}

// ----------------------------------------------------------- value types

ValueType<std::string> StringType() {
  ValueType<std::string> type;
  type.name = "string";
  type.read = ReadString;
  type.text = [](const std::string& value) { return value; };
  type.quoted = true;
  return type;
}

ValueType<std::string> PathType() {
  ValueType<std::string> type;
  type.name = "path";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::string> {
    std::optional<std::string> value = ReadString(field, reader);
    if (value && (value->empty() || value->front() != '/')) {
      reader.Report(field, "\"" + *value + "\" is not an absolute path; write the full path starting with /");
      return std::nullopt;
    }
    return value;
  };
  type.text = [](const std::string& value) { return value; };
  return type;
}

ValueType<std::string> EnumType(std::vector<std::string> choices) {
  ValueType<std::string> type;
  type.name = "enum";
  type.doc = "One of";
  for (size_t i = 0; i < choices.size(); ++i) type.doc += (i == 0 ? " `" : ", `") + choices[i] + "`";
  type.doc += ".";
  type.read = [choices = std::move(choices)](const Field& field, ConfigReader& reader) -> std::optional<std::string> {
    std::optional<std::string> value = ReadString(field, reader);
    if (value && !Contains(choices, *value)) {
      reader.Report(field, "\"" + *value + "\" is not one of " + JoinList(choices));
      return std::nullopt;
    }
    return value;
  };
  type.text = [](const std::string& value) { return value; };
  type.quoted = true;
  return type;
}

ValueType<int64_t> IntegerType() {
  ValueType<int64_t> type;
  type.name = "integer";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<int64_t> {
    if (const auto* value = field.node->as_integer()) return value->get();
    reader.Report(field, "expected an integer, found " + TypeName(*field.node));
    return std::nullopt;
  };
  type.text = [](const int64_t& value) { return std::to_string(value); };
  return type;
}

ValueType<bool> BoolType() {
  ValueType<bool> type;
  type.name = "boolean";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<bool> {
    if (const auto* value = field.node->as_boolean()) return value->get();
    reader.Report(field, "expected true or false, found " + TypeName(*field.node));
    return std::nullopt;
  };
  type.text = [](const bool& value) { return std::string(value ? "true" : "false"); };
  return type;
}

ValueType<uint64_t> SizeType() {
  ValueType<uint64_t> type;
  type.name = "size";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<uint64_t> {
    if (const auto* number = field.node->as_integer()) {
      if (number->get() >= 0) return static_cast<uint64_t>(number->get());
      reader.Report(field, "size " + std::to_string(number->get()) + " is negative; give bytes or a size like \"32g\"");
      return std::nullopt;
    }
    if (const auto* text = field.node->as_string()) {
      Result<uint64_t> size = ParseSize(text->get());
      if (size.ok()) return *size;
      reader.Report(field, size.status().message());
      return std::nullopt;
    }
    reader.Report(field,
                  "expected a size (a string like \"32g\" or an integer of bytes), found " + TypeName(*field.node));
    return std::nullopt;
  };
  type.text = [](const uint64_t& value) { return FormatSize(value); };
  type.quoted = true;
  return type;
}

ValueType<std::chrono::milliseconds> DurationType() {
  ValueType<std::chrono::milliseconds> type;
  type.name = "duration";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::chrono::milliseconds> {
    const auto* text = field.node->as_string();
    if (text == nullptr) {
      reader.Report(field, "expected a duration string like \"10s\", found " + TypeName(*field.node));
      return std::nullopt;
    }
    Result<std::chrono::milliseconds> duration = ParseDuration(text->get());
    if (duration.ok()) return *duration;
    reader.Report(field, duration.status().message());
    return std::nullopt;
  };
  type.text = DurationText;
  type.quoted = true;
  return type;
}

ValueType<std::vector<int>> CoreListType() {
  ValueType<std::vector<int>> type;
  type.name = "core list";
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::vector<int>> {
    const auto* text = field.node->as_string();
    if (text == nullptr) {
      reader.Report(field, "expected a core list string like \"0-7,16\", found " + TypeName(*field.node));
      return std::nullopt;
    }
    Result<std::vector<int>> cores = ParseCoreList(text->get());
    if (cores.ok()) return std::move(*cores);
    reader.Report(field, cores.status().message());
    return std::nullopt;
  };
  type.text = FormatCoreList;
  type.quoted = true;
  return type;
}

ValueType<std::vector<std::string>> ListType(ValueType<std::string> item, std::vector<Check<std::string>> item_checks,
                                             std::string what, std::string if_empty, std::string listed_once) {
  ValueType<std::vector<std::string>> type;
  type.name = "array of " + item.name + "s";
  type.doc = "At least one entry, each listed once.";
  for (const Check<std::string>& check : item_checks) {
    if (!check.doc.empty()) type.doc += " " + check.doc;
  }
  type.text = [](const std::vector<std::string>& values) {
    std::string out;
    for (const std::string& value : values) out += (out.empty() ? "" : ", ") + ("\"" + value + "\"");
    return "[" + out + "]";
  };
  type.read = [item = std::move(item), item_checks = std::move(item_checks), what = std::move(what),
               if_empty = std::move(if_empty), listed_once = std::move(listed_once)](
                  const Field& field, ConfigReader& reader) -> std::optional<std::vector<std::string>> {
    std::optional<std::vector<Field>> fields = ArrayItems(field, what, if_empty, reader);
    if (!fields) return std::nullopt;
    std::vector<std::string> values;
    for (const Field& item_field : *fields) {
      std::optional<std::string> value = item.read(item_field, reader);
      if (!value) continue;
      const bool checked = std::all_of(item_checks.begin(), item_checks.end(), [&](const Check<std::string>& check) {
        return check.accept(*value, item_field, reader);
      });
      if (!checked) continue;
      if (Contains(values, *value)) {
        reader.Report(item_field, "\"" + *value + "\" is already listed; " + listed_once);
        continue;
      }
      values.push_back(std::move(*value));
    }
    return values;
  };
  return type;
}

// ---------------------------------------------------------------- checks

Check<std::string> NotEmpty() {
  return Rule<std::string>("Not empty.", [](const std::string& value, const Field&, const ConfigReader&) {
    return value.empty() ? std::string("must not be empty") : std::string();
  });
}

Check<int64_t> IntegerRange(int64_t min, int64_t max) {
  const std::string range = std::to_string(min) + " to " + std::to_string(max);
  return Rule<int64_t>(range + ".", [min, max, range](const int64_t& value, const Field&, const ConfigReader&) {
    return value < min || value > max ? std::to_string(value) + " is out of range; use " + range : std::string();
  });
}

Check<std::chrono::milliseconds> DurationRange(std::chrono::milliseconds min, std::chrono::milliseconds max) {
  const std::string range = DurationText(min) + " to " + DurationText(max);
  return Rule<std::chrono::milliseconds>(
      "From `\"" + DurationText(min) + "\"` to `\"" + DurationText(max) + "\"`.",
      [min, max, range](const std::chrono::milliseconds& value, const Field& field, const ConfigReader&) {
        if (value >= min && value <= max) return std::string();
        return "\"" + field.node->as_string()->get() + "\" is out of range; use " + range;
      });
}

Check<uint64_t> SizeRange(uint64_t min, uint64_t max) {
  const std::string range = FormatSize(min) + " to " + FormatSize(max);
  return Rule<uint64_t>("From `\"" + FormatSize(min) + "\"` to `\"" + FormatSize(max) + "\"`.",
                        [min, max, range](const uint64_t& value, const Field&, const ConfigReader&) {
                          return value < min || value > max ? "is out of range; use " + range : std::string();
                        });
}

Check<uint64_t> AboveZero() {
  return Rule<uint64_t>("Above 0.", [](const uint64_t& value, const Field&, const ConfigReader&) {
    return value == 0 ? std::string("must be above 0") : std::string();
  });
}

// ---------------------------------------------------------------- schema

std::vector<std::string> Schema::SectionNames() const {
  std::vector<std::string> names;
  for (const Section& section : sections_) names.push_back(section.name());
  return names;
}

const Section* Schema::Find(std::string_view name) const {
  for (const Section& section : sections_) {
    if (section.name() == name) return &section;
  }
  return nullptr;
}

void Schema::CheckLayout(const toml::table& table, const std::string& path, ConfigReader& reader) const {
  const Section* section = path.empty() ? nullptr : Find(path);
  for (auto&& [key, node] : table) {
    const std::string child = path.empty() ? KeyPart(key.str()) : path + "." + KeyPart(key.str());
    if (const Section* known = Find(child); known != nullptr) {
      if (known->list()) continue;  // its reading checks its items
      if (const toml::table* sub = node.as_table()) CheckLayout(*sub, child, reader);
      else reader.Report(&node.source(), child, "expected a table, found " + TypeName(node));
      continue;
    }
    if (section != nullptr && Contains(section->key_names(), key.str())) continue;  // read by its key
    if (node.is_table() || node.is_array_of_tables()) {
      reader.Report(&key.source(), child, "unknown section; known sections: " + JoinList(SectionNames()));
    } else if (section == nullptr) {
      reader.Report(&key.source(), child, "unknown key; keys belong in one of the sections " + JoinList(SectionNames()));
    } else {
      reader.Report(&key.source(), child,
                    "unknown key; known keys of " + section->known_as() + ": " + JoinList(section->key_names()));
    }
  }
}

Result<Config> Schema::Read(const toml::table& root, const std::string& file, const HostFacts& host) const {
  ConfigReader reader(root, host);
  Config config;
  config.path = file;
  CheckLayout(root, "", reader);
  for (const Section& section : sections_) section.Read(root, config, reader);
  if (reader.problems().empty()) return config;
  return Status::InvalidArgument(reader.problems().Format(file));
}

Result<Config> Schema::Parse(const std::string& text, const std::string& file, const HostFacts& host) const {
  Result<toml::table> root = ParseToml(text, file);
  if (!root.ok()) return root.status();
  try {
    return Read(*root, file, host);
  } catch (const std::exception& error) {
    return Status::Internal("cannot parse config file " + file + ": " + error.what());
  }
}

Result<Config> Schema::Load(const std::string& path, const HostFacts& host) const {
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status();
  return Parse(*text, path, host);
}

}  // namespace slotd
