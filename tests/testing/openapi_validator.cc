#include "testing/openapi_validator.h"

#include <regex>
#include <set>
#include <stdexcept>

namespace slotd::testing {
namespace {

using nlohmann::json;

// Keywords that describe and never constrain.
// OpenAPI's discriminator only names which oneOf branch to look at; oneOf itself is checked.
const std::set<std::string> kAnnotations = {"description", "format",   "example",   "examples",     "title",
                                            "default",     "deprecated", "readOnly", "writeOnly", "discriminator"};
// Keywords Check() enforces.
const std::set<std::string> kChecked = {"$ref",      "type",     "nullable",  "enum",      "const",
                                        "properties", "required", "additionalProperties", "items",
                                        "minItems",  "maxItems", "minLength", "maxLength", "pattern",
                                        "minimum",   "maximum",  "oneOf",     "anyOf",     "allOf"};
// A schema nested deeper than this is taken for a reference cycle.
constexpr int kMaxDepth = 64;

// The JSON Schema type names `value` has: "integer" values are "number" too.
bool HasType(const json& value, const std::string& type) {
  if (type == "null") return value.is_null();
  if (type == "boolean") return value.is_boolean();
  if (type == "integer") return value.is_number_integer();
  if (type == "number") return value.is_number();
  if (type == "string") return value.is_string();
  if (type == "array") return value.is_array();
  if (type == "object") return value.is_object();
  throw std::runtime_error("schema: unknown type \"" + type + "\"");
}

// `value` for a message, cut to a readable length.
std::string Show(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

std::string Join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

// The keys of `object`, in order.
std::vector<std::string> Keys(const json& object) {
  std::vector<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.push_back(it.key());
  return keys;
}

}  // namespace

OpenApiValidator::OpenApiValidator(json document) : document_(std::move(document)) {}

const json& OpenApiValidator::Resolve(const std::string& ref) const {
  if (!ref.starts_with("#/")) throw std::runtime_error("$ref " + ref + ": only references into this document (#/...) are known");
  const json* node = &document_;
  size_t start = 2;
  while (start <= ref.size()) {
    size_t slash = ref.find('/', start);
    if (slash == std::string::npos) slash = ref.size();
    std::string key = ref.substr(start, slash - start);
    for (size_t at; (at = key.find("~1")) != std::string::npos;) key.replace(at, 2, "/");
    for (size_t at; (at = key.find("~0")) != std::string::npos;) key.replace(at, 2, "~");
    if (!node->is_object() || !node->contains(key)) throw std::runtime_error("$ref " + ref + ": no " + key + " there");
    node = &(*node)[key];
    start = slash + 1;
  }
  return *node;
}

std::vector<std::string> OpenApiValidator::Validate(const json& value, const json& schema) const {
  std::vector<std::string> problems;
  try {
    Check(value, schema, "$", problems, 0);
  } catch (const std::exception& e) {
    problems.push_back(std::string("schema error: ") + e.what());
  }
  return problems;
}

std::vector<std::string> OpenApiValidator::SchemaProblems() const {
  std::vector<std::string> problems;
  FindSchemas(document_, "#", problems);
  return problems;
}

void OpenApiValidator::FindSchemas(const json& node, const std::string& where, std::vector<std::string>& problems) const {
  if (node.is_array()) {
    for (size_t i = 0; i < node.size(); ++i) FindSchemas(node[i], where + "/" + std::to_string(i), problems);
    return;
  }
  if (!node.is_object()) return;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string at = where + "/" + it.key();
    if (it.key() == "schema") {
      Lint(*it, at, problems);
    } else if (at == "#/components/schemas") {
      for (auto schema = it->begin(); schema != it->end(); ++schema) Lint(*schema, at + "/" + schema.key(), problems);
    } else {
      FindSchemas(*it, at, problems);
    }
  }
}

void OpenApiValidator::Lint(const json& schema, const std::string& where, std::vector<std::string>& problems) const {
  if (schema.is_boolean()) return;
  if (!schema.is_object()) {
    problems.push_back(where + ": a schema must be an object or a boolean");
    return;
  }
  for (auto it = schema.begin(); it != schema.end(); ++it)
    if (!kChecked.count(it.key()) && !kAnnotations.count(it.key()))
      problems.push_back(where + ": schema keyword \"" + it.key() + "\" is not supported by this validator");
  if (schema.contains("$ref")) {
    try {
      Resolve(schema["$ref"].get<std::string>());
    } catch (const std::exception& e) {
      problems.push_back(where + ": " + e.what());
    }
  }
  if (schema.contains("type")) {
    const json types = schema["type"].is_array() ? schema["type"] : json::array({schema["type"]});
    for (const json& type : types) {
      try {
        HasType(nullptr, type.get<std::string>());
      } catch (const std::exception& e) {
        problems.push_back(where + ": " + e.what());
      }
    }
  }
  if (schema.contains("properties"))
    for (auto it = schema["properties"].begin(); it != schema["properties"].end(); ++it)
      Lint(*it, where + "/properties/" + it.key(), problems);
  for (const char* key : {"items", "additionalProperties"})
    if (schema.contains(key)) Lint(schema[key], where + "/" + key, problems);
  for (const char* key : {"oneOf", "anyOf", "allOf"})
    if (schema.contains(key))
      for (size_t i = 0; i < schema[key].size(); ++i)
        Lint(schema[key][i], where + "/" + key + "/" + std::to_string(i), problems);
}

std::vector<std::string> OpenApiValidator::ValidateAgainst(const json& value, const std::string& name) const {
  return Validate(value, json{{"$ref", "#/components/schemas/" + name}});
}

void OpenApiValidator::Check(const json& value, const json& schema, const std::string& path,
                             std::vector<std::string>& problems, int depth) const {
  if (depth > kMaxDepth) throw std::runtime_error(path + ": schemas nested too deep (a $ref cycle?)");
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) problems.push_back(path + ": no value is allowed here");
    return;
  }
  if (!schema.is_object()) throw std::runtime_error(path + ": a schema must be an object, not " + Show(schema));
  for (const auto& [key, ignored] : schema.items())
    if (!kChecked.count(key) && !kAnnotations.count(key))
      throw std::runtime_error(path + ": schema keyword \"" + key + "\" is not supported by this validator");

  if (schema.contains("$ref")) {
    Check(value, Resolve(schema["$ref"].get<std::string>()), path, problems, depth + 1);
  }

  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_array()) {
      for (const json& t : schema["type"]) types.push_back(t.get<std::string>());
    } else {
      types.push_back(schema["type"].get<std::string>());
    }
    if (schema.value("nullable", false)) types.push_back("null");
    bool fits = false;
    for (const std::string& type : types) fits = fits || HasType(value, type);
    if (!fits) {
      problems.push_back(path + ": " + Show(value) + " is not of type " + Join(types, " or "));
      return;  // the other keywords would only repeat it
    }
  }

  if (schema.contains("enum")) {
    bool listed = false;
    for (const json& allowed : schema["enum"]) listed = listed || allowed == value;
    if (!listed) problems.push_back(path + ": " + Show(value) + " is not one of " + Show(schema["enum"]));
  }
  if (schema.contains("const") && schema["const"] != value)
    problems.push_back(path + ": " + Show(value) + " is not " + Show(schema["const"]));

  if (value.is_number()) {
    if (schema.contains("minimum") && value.get<double>() < schema["minimum"].get<double>())
      problems.push_back(path + ": " + Show(value) + " is less than the minimum " + Show(schema["minimum"]));
    if (schema.contains("maximum") && value.get<double>() > schema["maximum"].get<double>())
      problems.push_back(path + ": " + Show(value) + " is more than the maximum " + Show(schema["maximum"]));
  }

  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    if (schema.contains("minLength") && text.size() < schema["minLength"].get<size_t>())
      problems.push_back(path + ": " + Show(value) + " is shorter than " + Show(schema["minLength"]) + " bytes");
    if (schema.contains("maxLength") && text.size() > schema["maxLength"].get<size_t>())
      problems.push_back(path + ": " + Show(value) + " is longer than " + Show(schema["maxLength"]) + " bytes");
    if (schema.contains("pattern") &&
        !std::regex_search(text, std::regex(schema["pattern"].get<std::string>(), std::regex::ECMAScript)))
      problems.push_back(path + ": " + Show(value) + " does not match " + Show(schema["pattern"]));
  }

  if (value.is_array()) {
    if (schema.contains("minItems") && value.size() < schema["minItems"].get<size_t>())
      problems.push_back(path + ": " + std::to_string(value.size()) + " items, fewer than " + Show(schema["minItems"]));
    if (schema.contains("maxItems") && value.size() > schema["maxItems"].get<size_t>())
      problems.push_back(path + ": " + std::to_string(value.size()) + " items, more than " + Show(schema["maxItems"]));
    if (schema.contains("items"))
      for (size_t i = 0; i < value.size(); ++i)
        Check(value[i], schema["items"], path + "[" + std::to_string(i) + "]", problems, depth + 1);
  }

  if (value.is_object()) {
    const json no_properties = json::object();
    const json& properties = schema.contains("properties") ? schema["properties"] : no_properties;
    if (schema.contains("required"))
      for (const json& name : schema["required"])
        if (!value.contains(name.get<std::string>()))
          problems.push_back(path + ": the required field \"" + name.get<std::string>() + "\" is missing");
    for (const auto& [key, field] : value.items()) {
      const std::string field_path = path + "." + key;
      if (properties.contains(key)) {
        Check(field, properties[key], field_path, problems, depth + 1);
      } else if (schema.contains("additionalProperties")) {
        const json& extra = schema["additionalProperties"];
        if (extra.is_boolean() && !extra.get<bool>())
          problems.push_back(field_path + ": a field the schema does not list (known: " +
                             Join(Keys(properties), ", ") + ")");
        else
          Check(field, extra, field_path, problems, depth + 1);
      }
    }
  }

  for (const char* combinator : {"oneOf", "anyOf"}) {
    if (!schema.contains(combinator)) continue;
    std::vector<std::string> why;
    int fits = 0;
    for (size_t i = 0; i < schema[combinator].size(); ++i) {
      std::vector<std::string> branch;
      Check(value, schema[combinator][i], path, branch, depth + 1);
      if (branch.empty()) ++fits;
      else why.push_back("#" + std::to_string(i) + ": " + Join(branch, "; "));
    }
    const bool one = std::string(combinator) == "oneOf";
    if (fits == 0)
      problems.push_back(path + ": fits none of " + combinator + " (" + Join(why, " | ") + ")");
    else if (one && fits > 1)
      problems.push_back(path + ": fits " + std::to_string(fits) + " schemas of oneOf, where exactly one must fit");
  }
  if (schema.contains("allOf"))
    for (const json& part : schema["allOf"]) Check(value, part, path, problems, depth + 1);
}

}  // namespace slotd::testing
