// OpenApiValidator: checks JSON values against the schemas of an OpenAPI 3.1
// document (docs/openapi.yaml, read into JSON), so that tests can hold real
// answers of the agent to what the document promises.
//
// It knows the part of JSON Schema the document uses: type (one name or an
// array of names, "null" included; OpenAPI 3.0's nullable too), properties,
// required, additionalProperties (a boolean or a schema), items, minItems,
// maxItems, minLength, maxLength, pattern (ECMAScript), enum, const, minimum,
// maximum, $ref to "#/..." in the same document, oneOf, anyOf and allOf.
// Annotations (description, format, example, title, default, ...) are
// ignored. Any other keyword is reported as a problem rather than skipped,
// so the document cannot promise what no check holds.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slotd::testing {

class OpenApiValidator {
 public:
  // `document`: the whole OpenAPI document, which "$ref"s point into.
  explicit OpenApiValidator(nlohmann::json document);

  const nlohmann::json& document() const { return document_; }

  // What is wrong with `value` against `schema` (a schema object of the
  // document, or {"$ref": "#/components/schemas/Name"}); empty when it fits.
  // Each problem starts with the JSON path of the value at fault, "$" being
  // `value` itself: "$.kernels[0].state: \"RUN\" is not one of [...]".
  std::vector<std::string> Validate(const nlohmann::json& value, const nlohmann::json& schema) const;

  // Validate against "#/components/schemas/<name>".
  std::vector<std::string> ValidateAgainst(const nlohmann::json& value, const std::string& name) const;

  // What is wrong with the document's schemas themselves, read without a
  // value: every schema under components/schemas and every "schema" of a
  // path, parameter, header or response, with what they nest. Names each
  // unsupported keyword, unknown type name and unresolvable "$ref" with the
  // document path where it is ("#/components/schemas/Kernel/properties/x").
  std::vector<std::string> SchemaProblems() const;

  // The node a local reference ("#/components/schemas/Kernel") names, with
  // "~1" and "~0" unescaped; throws std::runtime_error when there is none.
  const nlohmann::json& Resolve(const std::string& ref) const;

 private:
  void Check(const nlohmann::json& value, const nlohmann::json& schema, const std::string& path,
             std::vector<std::string>& problems, int depth) const;

  void Lint(const nlohmann::json& schema, const std::string& where, std::vector<std::string>& problems) const;
  void FindSchemas(const nlohmann::json& node, const std::string& where, std::vector<std::string>& problems) const;

  nlohmann::json document_;
};

}  // namespace slotd::testing
