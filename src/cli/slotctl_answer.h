// An agent's JSON answer, for slotctl. An answer comes from another process,
// perhaps of another slotd version: any field may be missing or of another
// type. It is read with the tree's JSON reader (common/json_reader.h): every
// read names the field's path, and the first problem makes the view built
// from it thrown away.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/json_reader.h"

namespace slotctl {

// The most bytes of an answer slotctl reads; a longer one is a bad answer.
inline constexpr size_t kMaxAnswerBytes = size_t{512} << 20;
// The deepest nesting of arrays and objects slotctl accepts in an answer.
inline constexpr int kMaxAnswerDepth = slotd::kMaxJsonDepth;

// A value inside an answer, with its path.
using AnswerField = slotd::JsonField;

// One parsed answer and the first problem met while reading it. Fields point
// into it: keep it alive while they are used (moving it is fine).
class Answer {
 public:
  // `body`, the agent's answer to `request` ("GET /v1/agent").
  Answer(nlohmann::json body, std::string request)
      : reader_(std::move(body), "the body"), request_(std::move(request)) {}

  // The whole body.
  AnswerField Root() const { return reader_.Root(); }
  // The body as it came, for --json.
  const nlohmann::json& body() const { return reader_.document(); }
  // The first problem, "<field path> <what is wrong>"; empty while there is none.
  const std::string& problem() const { return reader_.problem(); }
  // What the answer answered ("GET /v1/agent"), for messages.
  const std::string& request() const { return request_; }

 private:
  slotd::JsonReader reader_;
  std::string request_;
};

}  // namespace slotctl
