// Reading untrusted JSON: an agent's answer (slotctl), a container's labels,
// a claim file, state.json, an etcd document or answer. One parser and one
// reader with one error style for all of them.
//
// ParseJsonWithin parses without throwing and refuses nesting past a limit.
// A JsonReader holds the parsed document and the first problem met while
// reading it. Every read names the field's path ("resources.cpu.capacity",
// "kernels[2].state"); a missing field or a value of another type records
// the problem ("devices.cuda[0] is a number, expected a string") and reads
// as an empty value, so a caller reads everything in one pass and then asks
// problem() (or Check()) whether what it built can be used. Nothing here
// throws or reads outside the JSON.
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

#include "common/status.h"

namespace slotd {

// The deepest nesting of arrays and objects read by default.
inline constexpr int kMaxJsonDepth = 64;

// `text` parsed as JSON, or nothing when it is not JSON or nests deeper than
// `max_depth` (the top-level value is at depth 0). Never throws; a value nested too deep is dropped as it is
// parsed, so hostile input never becomes a deep tree.
std::optional<nlohmann::json> ParseJsonWithin(std::string_view text, int max_depth = kMaxJsonDepth);

class JsonField;

// One parsed document and the first problem met while reading it. Fields
// point into it: keep it alive while they are used (moving it is fine).
class JsonReader {
 public:
  // `root_name` names the whole document in problems ("the body").
  explicit JsonReader(nlohmann::json document, std::string root_name = "the document");

  // The whole document.
  JsonField Root() const;
  // The document as it was parsed.
  const nlohmann::json& document() const { return state_->document; }
  // The first problem, "<field path> <what is wrong>"; empty while there is none.
  const std::string& problem() const { return state_->problem; }
  // OK, or InvalidArgument "<what>: <the first problem>".
  Status Check(const std::string& what) const;

 private:
  friend class JsonField;
  struct State {
    nlohmann::json document;
    std::string root_name;
    std::string problem;
  };
  std::unique_ptr<State> state_;  // on the heap, so that fields survive a move of the reader
};

// A value inside a JsonReader's document, with its path. A field of a
// missing member is "absent": every read of it gives an empty value and
// records nothing more (the missing member was the problem, unless it was
// read with Optional).
class JsonField {
 public:
  // The member `key` of this object; a problem when this is not an object or lacks it.
  JsonField operator[](const std::string& key) const;
  // The member `key`; when this object lacks it, an absent field that
  // records no problem (its reads give empty values). A problem when this is not an object.
  JsonField Optional(const std::string& key) const;
  // Element `index` of this array; a problem when this is not an array or is shorter.
  JsonField At(size_t index) const;
  // This field when it is an object; a problem (and an absent field) otherwise.
  JsonField Object() const;
  // Whether this is an object with a member `key`; never a problem.
  bool Has(const std::string& key) const;
  // Whether this value is null (or absent); never a problem.
  bool IsNull() const;

  // The value as a string; a problem when it is not one.
  std::string String() const;
  // The value as a whole number; a problem when it is not one (or is beyond int64).
  int64_t Int() const;
  // The value as a whole number from `min` to `max`; a problem otherwise.
  int64_t IntIn(int64_t min, int64_t max) const;
  // The value as a whole number from 0 to `max` (a size, a count, a core); a problem otherwise.
  uint64_t Count(uint64_t max = UINT64_MAX) const;
  // The value as a boolean; a problem when it is not one.
  bool Bool() const;
  // The elements of this array; a problem (and none) when this is not an array.
  std::vector<JsonField> Elements() const;
  // The members of this object, by key; a problem (and none) when this is not an object.
  std::vector<std::pair<std::string, JsonField>> Members() const;
  // For a table cell: a string as it is, null as "-", any other value as JSON text. Never a problem.
  std::string Shown() const;

  // The value as it is (null when absent).
  const nlohmann::json& raw() const;
  // The path of this field in the document ("" for the whole document).
  const std::string& path() const { return path_; }

  // Records "<path> <what>" as the problem unless one is already recorded,
  // for a value of the right type that the caller finds wrong ("is 7, past the last core").
  void Problem(const std::string& what) const;

 private:
  friend class JsonReader;
  JsonField(const nlohmann::json* value, std::string path, JsonReader::State* reader)
      : value_(value), path_(std::move(path)), reader_(reader) {}

  // Records "<path> is <this value's kind>, expected <expected>".
  void Expected(const std::string& expected) const;
  // This field's path, or the reader's root name for the whole document.
  std::string Name() const;
  JsonField Member(const std::string& key, bool required) const;

  const nlohmann::json* value_;  // null: absent (its problem, if any, is recorded)
  std::string path_;
  JsonReader::State* reader_;
};

}  // namespace slotd
