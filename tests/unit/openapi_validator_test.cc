#include "testing/openapi_validator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace slotd::testing {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// A document with the kinds of schema docs/openapi.yaml uses.
OpenApiValidator Validator() {
  return OpenApiValidator(json::parse(R"({
    "components": {"schemas": {
      "Error": {"type": "object", "additionalProperties": false, "required": ["error"],
                "properties": {"error": {"type": "object", "additionalProperties": false,
                                         "required": ["code", "message"],
                                         "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}},
      "Kernel": {"type": "object", "additionalProperties": false, "required": ["kernel_id", "state", "exit_code"],
                 "properties": {"kernel_id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
                                "state": {"type": "string", "enum": ["RUNNING", "TERMINATED"]},
                                "exit_code": {"type": ["integer", "null"]},
                                "cpu": {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 2},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}},
      "Size": {"oneOf": [{"type": "string", "minLength": 1}, {"type": "integer", "minimum": 0}]},
      "Either": {"anyOf": [{"type": "number", "maximum": 10}, {"type": "number", "minimum": 5}]},
      "Cycle": {"$ref": "#/components/schemas/Cycle"},
      "Odd": {"type": "string", "uniqueItems": true},
      "Slash~/key": {"type": "boolean"}
    }}})"));
}

TEST(OpenApiValidatorTest, AcceptsWhatFits) {
  const OpenApiValidator v = Validator();
  EXPECT_THAT(v.ValidateAgainst(json::parse(R"({"error": {"code": "not_found", "message": "no kernel k"}})"), "Error"),
              IsEmpty());
  EXPECT_THAT(v.ValidateAgainst(json::parse(R"({"kernel_id": "k-1", "state": "RUNNING", "exit_code": null,
                                                "cpu": [0, 1], "labels": {"team": "a"}})"),
                                "Kernel"),
              IsEmpty());
  EXPECT_THAT(v.ValidateAgainst("256m", "Size"), IsEmpty());
  EXPECT_THAT(v.ValidateAgainst(268435456, "Size"), IsEmpty());
  EXPECT_THAT(v.ValidateAgainst(7.5, "Either"), IsEmpty());
  EXPECT_THAT(v.Validate(true, {{"$ref", "#/components/schemas/Slash~0~1key"}}), IsEmpty());
}

TEST(OpenApiValidatorTest, NamesThePathOfEachProblem) {
  const OpenApiValidator v = Validator();
  EXPECT_THAT(v.ValidateAgainst(json::parse(R"({"error": {"code": 404}})"), "Error"),
              ElementsAre("$.error: the required field \"message\" is missing",
                          "$.error.code: 404 is not of type string"));
  EXPECT_THAT(v.ValidateAgainst(json::parse(R"({"kernel_id": "-bad", "state": "RUN", "exit_code": 1.5,
                                                "cpu": [0, -1, 2], "labels": {"a": 1}, "gpu": 1})"),
                                "Kernel"),
              UnorderedElementsAre("$.kernel_id: \"-bad\" does not match \"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$\"",
                          "$.state: \"RUN\" is not one of [\"RUNNING\",\"TERMINATED\"]",
                          "$.exit_code: 1.5 is not of type integer or null",
                          "$.cpu: 3 items, more than 2", "$.cpu[1]: -1 is less than the minimum 0",
                          "$.labels.a: 1 is not of type string",
                          "$.gpu: a field the schema does not list (known: cpu, exit_code, kernel_id, labels, state)"));
}

TEST(OpenApiValidatorTest, OneOfNeedsExactlyOneAndAnyOfAtLeastOne) {
  const OpenApiValidator v = Validator();
  const std::vector<std::string> none = v.ValidateAgainst("", "Size");
  ASSERT_EQ(none.size(), 1u);
  EXPECT_THAT(none[0], HasSubstr("$: fits none of oneOf"));
  EXPECT_THAT(none[0], HasSubstr("shorter than 1 bytes"));
  EXPECT_THAT(v.ValidateAgainst(true, "Either"), ElementsAre(HasSubstr("$: fits none of anyOf")));
  const OpenApiValidator both(json::parse(
      R"({"components": {"schemas": {"Two": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}}})"));
  EXPECT_THAT(both.ValidateAgainst(3, "Two"), ElementsAre("$: fits 2 schemas of oneOf, where exactly one must fit"));
}

TEST(OpenApiValidatorTest, RefusesSchemasItCannotHold) {
  const OpenApiValidator v = Validator();
  EXPECT_THAT(v.ValidateAgainst("x", "Odd"),
              ElementsAre(HasSubstr("schema keyword \"uniqueItems\" is not supported")));
  EXPECT_THAT(v.ValidateAgainst(1, "Missing"), ElementsAre(HasSubstr("no Missing there")));
  EXPECT_THAT(v.ValidateAgainst(1, "Cycle"), ElementsAre(HasSubstr("a $ref cycle?")));
  EXPECT_THAT(v.Validate(1, {{"type", "int"}}), ElementsAre(HasSubstr("unknown type \"int\"")));
}

TEST(OpenApiValidatorTest, SchemaProblemsFindsBadSchemasWithoutAValue) {
  EXPECT_THAT(Validator().SchemaProblems(),
              UnorderedElementsAre("#/components/schemas/Odd: schema keyword \"uniqueItems\" is not supported by this validator"));
  const OpenApiValidator v(json::parse(R"({
    "paths": {"/x": {"get": {"responses": {"200": {"content": {"application/json": {"schema":
      {"type": "object", "properties": {"a": {"type": "int"}, "b": {"items": {"$ref": "#/components/schemas/Gone"}}},
       "additionalProperties": {"only when": "a comma split a YAML flow map"}}}}}}}}},
    "components": {"schemas": {}}})"));
  const std::string at = "#/paths//x/get/responses/200/content/application/json/schema";
  EXPECT_THAT(v.SchemaProblems(),
              UnorderedElementsAre(at + "/properties/a: schema: unknown type \"int\"",
                                   at + "/properties/b/items: $ref #/components/schemas/Gone: no Gone there",
                                   at + "/additionalProperties: schema keyword \"only when\" is not supported by this validator"));
}

}  // namespace
}  // namespace slotd::testing
