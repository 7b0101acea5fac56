#include "common/json_reader.h"

#include <string>

#include <gtest/gtest.h>

namespace slotd {
namespace {

using nlohmann::json;

// The problem of reading `text` with `read`.
template <typename Read>
std::string ProblemOf(const std::string& text, Read read) {
  const JsonReader reader(json::parse(text));
  read(reader.Root());
  return reader.problem();
}

TEST(JsonReaderTest, EachProblemNamesTheFieldsPathAndWhatWasExpected) {
  struct Case {
    std::string text;
    std::string (*read)(const JsonField&);
    std::string problem;
  };
  const Case cases[] = {
      {R"({"a": 1})", [](const JsonField& f) { return f["b"].String(); }, "b is missing"},
      {R"({"a": 1})", [](const JsonField& f) { return f["a"].String(); }, "a is a number, expected a string"},
      {R"({"a": {"b": [1, "x"]}})", [](const JsonField& f) { return std::to_string(f["a"]["b"].At(1).Int()); },
       "a.b[1] is a string, expected a whole number"},
      {R"({"a": [1]})", [](const JsonField& f) { return f["a"].At(3).String(); }, "a[3] is missing (a has 1 elements)"},
      {R"([1])", [](const JsonField& f) { return f["a"].String(); }, "the document is an array, expected an object"},
      {R"({"a": -1})", [](const JsonField& f) { return std::to_string(f["a"].Count()); },
       "a is a number, expected a whole number of 0 or more"},
      {R"({"a": 9})", [](const JsonField& f) { return std::to_string(f["a"].Count(8)); }, "a is 9, expected at most 8"},
      {R"({"a": 9})", [](const JsonField& f) { return std::to_string(f["a"].IntIn(-2, 2)); },
       "a is 9, expected a whole number from -2 to 2"},
      {R"({"a": 18446744073709551615})", [](const JsonField& f) { return std::to_string(f["a"].Int()); },
       "a is a number, expected a whole number below 2^63"},
      {R"({"a": "yes"})", [](const JsonField& f) { return std::to_string(f["a"].Bool()); },
       "a is a string, expected true or false"},
      {R"({"a": {"k": 1}})",
       [](const JsonField& f) {
         for (const auto& [key, value] : f["a"].Members()) value.String();
         return std::string();
       },
       "a.k is a number, expected a string"},
  };
  for (const Case& c : cases) EXPECT_EQ(ProblemOf(c.text, c.read), c.problem) << c.text;
}

TEST(JsonReaderTest, AFailedReadGivesAnEmptyValueAndOnlyTheFirstProblemIsKept) {
  const JsonReader reader(json::parse(R"({"a": 1, "b": "x"})"));
  const JsonField root = reader.Root();
  EXPECT_EQ(root["a"].String(), "");
  EXPECT_EQ(root["b"].Int(), 0);
  EXPECT_EQ(root["missing"]["deeper"].At(2).String(), "");  // absent: nothing more recorded
  EXPECT_EQ(reader.problem(), "a is a number, expected a string");
  EXPECT_EQ(reader.Check("the record").message(), "the record: a is a number, expected a string");
  EXPECT_EQ(reader.Check("the record").code(), Status::Code::kInvalidArgument);
}

TEST(JsonReaderTest, AnOptionalMemberThatIsAbsentReadsEmptyWithoutAProblem) {
  const JsonReader reader(json::parse(R"({"present": null})"));
  const JsonField root = reader.Root();
  EXPECT_EQ(root.Optional("absent").String(), "");
  EXPECT_EQ(root.Optional("absent").Count(), 0u);
  EXPECT_FALSE(root.Optional("absent").Bool());
  EXPECT_TRUE(root.Optional("absent").Members().empty());
  EXPECT_TRUE(root.Optional("absent").Optional("deeper").IsNull());
  EXPECT_EQ(root.Optional("absent").Shown(), "-");
  EXPECT_EQ(reader.problem(), "");
  // Present but null is a value, and of the wrong type.
  root.Optional("present").String();
  EXPECT_EQ(reader.problem(), "present is null, expected a string");
}

TEST(JsonReaderTest, NumbersBuiltInMemoryReadAsTheyWouldParsed) {
  const JsonReader reader(json{{"cores", std::vector<int>{0, 3}}, {"bytes", uint64_t{1} << 40}});
  const JsonField root = reader.Root();
  EXPECT_EQ(root["cores"].At(1).Count(), 3u);
  EXPECT_EQ(root["bytes"].Count(), uint64_t{1} << 40);
  EXPECT_EQ(reader.problem(), "");
}

TEST(JsonReaderTest, ObjectIsTheFieldOnlyWhenItIsAnObject) {
  const JsonReader reader(json::parse(R"({"a": [1]})"), "label x");
  EXPECT_EQ(reader.Root().Object()["a"].At(0).Count(), 1u);
  EXPECT_EQ(reader.Root()["a"].Object()["b"].String(), "");
  EXPECT_EQ(reader.problem(), "a is an array, expected an object");
  const JsonReader array(json::parse("[]"), "label x");
  array.Root().Object();
  EXPECT_EQ(array.problem(), "label x is an array, expected an object");
}

TEST(JsonReaderTest, ParsingRefusesWhatIsNotJsonAndWhatNestsTooDeep) {
  EXPECT_FALSE(ParseJsonWithin("not json \xff").has_value());
  EXPECT_FALSE(ParseJsonWithin("{\"a\": ").has_value());
  // The top-level value is at depth 0: eleven arrays nest ten deep.
  EXPECT_TRUE(ParseJsonWithin(std::string(11, '[') + std::string(11, ']'), 10).has_value());
  EXPECT_FALSE(ParseJsonWithin(std::string(12, '[') + std::string(12, ']'), 10).has_value());
  EXPECT_FALSE(ParseJsonWithin(std::string(100000, '[') + std::string(100000, ']')).has_value());
  EXPECT_EQ(ParseJsonWithin(R"({"a": "\u00e9"})")->at("a"), "\xc3\xa9");
}

TEST(JsonReaderTest, AProblemQuotesAtMostTheStartOfALongPath) {
  const std::string key(100000, 'k');
  const JsonReader reader(json{{key, 1}});
  for (const auto& [name, value] : reader.Root().Members()) value.String();
  EXPECT_EQ(reader.problem(), std::string(200, 'k') + "... is a number, expected a string");
}

TEST(JsonReaderTest, ProblemRecordsWhatTheCallerFindsWrongOnce) {
  const JsonReader reader(json::parse(R"({"id": "Bad Id"})"));
  reader.Root()["id"].Problem("is not an agent id");
  reader.Root()["id"].Problem("is something else too");
  EXPECT_EQ(reader.problem(), "id is not an agent id");
}

}  // namespace
}  // namespace slotd
