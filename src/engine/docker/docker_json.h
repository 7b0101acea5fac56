// Reading the Docker engine's JSON without throwing, shared by the answer
// parsers (docker_answers.cc) and the calls (docker_engine.cc). An engine's
// answer is untrusted and parsed like all untrusted JSON (ParseJsonWithin,
// common/json_reader.h), but read leniently rather than checked: a missing
// or mistyped field reads as empty ("", 0, false, no labels), never as an
// error, since engines of other versions (and Podman) leave fields out or
// send null. The agent checks what it relies on (an id, a state) itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/container_engine.h"

namespace slotd::docker_json {

using json = nlohmann::json;

// The member `key` of object `j`; null when `j` is no object or has none.
const json* Field(const json& j, const char* key);
// The object at `key`; an empty object when it is absent or not an object.
const json& ObjectField(const json& j, const char* key);
// The string at `key`; "" when absent or not a string.
std::string StringField(const json& j, const char* key);
// The integer at `key`; 0 when absent or not an integer.
int64_t IntField(const json& j, const char* key);
// A count or a byte total: a whole number from 0 up; 0 when absent, negative
// or not a whole number.
uint64_t CountField(const json& j, const char* key);
// The boolean at `key`; false when absent or not a boolean.
bool BoolField(const json& j, const char* key);
// An object of strings (labels, attributes); other values are skipped.
Labels StringMapField(const json& j, const char* key);
// An array of strings; other values are skipped.
std::vector<std::string> StringListField(const json& j, const char* key);

// Serialises without throwing: invalid UTF-8 in user text becomes U+FFFD.
std::string Dump(const json& j);
// `body` as JSON; kInternal, prefixed with `what` and quoting the start of
// `body`, when it is not JSON or nests deeper than kMaxJsonDepth.
Result<json> ParseJson(const std::string& body, const std::string& what);
// Seconds since the epoch of an RFC 3339 time ("2024-05-01T12:34:56.1Z",
// "2024-05-01T14:34:56+02:00"; common/rfc3339.h), rounded down; 0 when it
// does not parse.
int64_t ParseRfc3339(const std::string& text);
// The same in milliseconds (its fraction's first three digits); 0 when it
// does not parse or is before the epoch ("0001-01-01T00:00:00Z": never).
int64_t ParseRfc3339Millis(const std::string& text);

}  // namespace slotd::docker_json
