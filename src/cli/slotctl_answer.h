// Checked reads of an agent's JSON answer, for slotctl. An answer comes from
// another process, perhaps of another slotd version: any field may be
// missing or of another type. Every read here names the field's path
// ("resources.cpu.capacity", "kernels[2].state"); a missing field or a value
// of another type records the answer's first problem and reads as an empty
// value, so a view is built in one pass and thrown away when the answer has
// a problem. Nothing here throws or reads outside the JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace slotctl {

// The most bytes of an answer slotctl reads; a longer one is a bad answer.
inline constexpr size_t kMaxAnswerBytes = size_t{512} << 20;
// The deepest nesting of arrays and objects slotctl accepts in an answer.
inline constexpr int kMaxAnswerDepth = 64;

// `text` parsed as JSON, or nothing when it is not JSON or nests deeper than
// kMaxAnswerDepth. Never throws.
std::optional<nlohmann::json> ParseAnswerJson(std::string_view text);

class AnswerField;

// One parsed answer and the first problem met while reading it. Fields point
// into it: keep it alive while they are used (moving it is fine).
class Answer {
 public:
  // `body`, the agent's answer to `request` ("GET /v1/agent").
  Answer(nlohmann::json body, std::string request);

  // The whole body.
  AnswerField Root() const;
  // The body as it came, for --json.
  const nlohmann::json& body() const { return state_->body; }
  // The first problem, "<field path>: <what is wrong>"; empty while there is none.
  const std::string& problem() const { return state_->problem; }
  // What the answer answered ("GET /v1/agent"), for messages.
  const std::string& request() const { return state_->request; }

 private:
  friend class AnswerField;
  struct State {
    nlohmann::json body;
    std::string request;
    std::string problem;
  };
  std::unique_ptr<State> state_;  // on the heap, so that fields survive a move of the Answer
};

// A value inside an Answer, with its path. A field of a missing member is
// "absent": every read of it gives an empty value and records nothing more.
class AnswerField {
 public:
  // The member `key` of this object; a problem when this is not an object or lacks it.
  AnswerField operator[](const std::string& key) const;
  // The member `key`, or null (no problem) when this object lacks it; a problem when this is not an object.
  AnswerField Optional(const std::string& key) const;
  // Element `index` of this array; a problem when this is not an array or is shorter.
  AnswerField At(size_t index) const;
  // Whether this is an object with a member `key`; never a problem.
  bool Has(const std::string& key) const;

  // The value as a string; a problem when it is not one.
  std::string String() const;
  // The value as a whole number; a problem when it is not one (or is beyond int64).
  int64_t Int() const;
  // The value as a whole number from 0 to `max` (a size, a count, a core); a problem otherwise.
  uint64_t Count(uint64_t max = UINT64_MAX) const;
  // The elements of this array; a problem (and none) when this is not an array.
  std::vector<AnswerField> Elements() const;
  // The members of this object, by key; a problem (and none) when this is not an object.
  std::vector<std::pair<std::string, AnswerField>> Members() const;
  // For a table cell: a string as it is, null as "-", any other value as JSON text. Never a problem.
  std::string Shown() const;

  // The value as it is (null when absent), for --json.
  const nlohmann::json& raw() const;

  // The path of this field in the answer ("" for the whole body).
  const std::string& path() const { return path_; }

 private:
  friend class Answer;
  AnswerField(const nlohmann::json* value, std::string path, Answer::State* answer)
      : value_(value), path_(std::move(path)), answer_(answer) {}

  // Records "<path>: expected <expected>, got <this value's type>" unless a problem is already recorded.
  void Expected(const char* expected) const;
  AnswerField Member(const std::string& key, bool required) const;

  const nlohmann::json* value_;  // null: absent (its problem is recorded)
  std::string path_;
  Answer::State* answer_;
};

}  // namespace slotctl
