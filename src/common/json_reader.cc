#include "common/json_reader.h"

#include <limits>

namespace slotd {

using nlohmann::json;

namespace {

// The most bytes of a field's path that a problem quotes.
constexpr size_t kMaxProblemPath = 200;

// The null that an absent optional member reads as.
const json& NullJson() {
  static const json null;
  return null;
}

// "a string", "an object", "null": what a value is, for a problem.
std::string KindOf(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_object() || value.is_array()) return std::string("an ") + value.type_name();
  return std::string("a ") + value.type_name();
}

}  // namespace

std::optional<json> ParseJsonWithin(std::string_view text, int max_depth) {
  bool too_deep = false;
  auto limit_depth = [&too_deep, max_depth](int depth, json::parse_event_t, json&) {
    if (depth > max_depth) too_deep = true;
    return depth <= max_depth;
  };
  json parsed = json::parse(text, limit_depth, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || too_deep) return std::nullopt;
  return parsed;
}

JsonReader::JsonReader(json document, std::string root_name)
    : state_(std::make_unique<State>(State{std::move(document), std::move(root_name), ""})) {}

JsonField JsonReader::Root() const { return JsonField(&state_->document, "", state_.get()); }

Status JsonReader::Check(const std::string& what) const {
  if (state_->problem.empty()) return Status::Ok();
  return Status::InvalidArgument(what + ": " + state_->problem);
}

void JsonField::Problem(const std::string& what) const {
  if (!reader_->problem.empty()) return;
  // The path is made of the document's own keys: bounded, so that a hostile
  // key cannot make every message that quotes the problem as long as itself.
  std::string name = Name();
  if (name.size() > kMaxProblemPath) name = name.substr(0, kMaxProblemPath) + "...";
  reader_->problem = name + " " + what;
}

void JsonField::Expected(const std::string& expected) const {
  if (value_ != nullptr) Problem("is " + KindOf(*value_) + ", expected " + expected);
}

std::string JsonField::Name() const { return path_.empty() ? reader_->root_name : path_; }

JsonField JsonField::Member(const std::string& key, bool required) const {
  const std::string path = path_.empty() ? key : path_ + "." + key;
  if (value_ == nullptr) return JsonField(nullptr, path, reader_);
  if (!value_->is_object()) {
    Expected("an object");
    return JsonField(nullptr, path, reader_);
  }
  auto it = value_->find(key);
  if (it != value_->end()) return JsonField(&*it, path, reader_);
  if (!required) return JsonField(nullptr, path, reader_);
  JsonField missing(nullptr, path, reader_);
  missing.Problem("is missing");
  return missing;
}

JsonField JsonField::operator[](const std::string& key) const { return Member(key, /*required=*/true); }

JsonField JsonField::Optional(const std::string& key) const { return Member(key, /*required=*/false); }

JsonField JsonField::At(size_t index) const {
  const std::string path = path_ + "[" + std::to_string(index) + "]";
  if (value_ == nullptr) return JsonField(nullptr, path, reader_);
  if (!value_->is_array()) {
    Expected("an array");
    return JsonField(nullptr, path, reader_);
  }
  if (index < value_->size()) return JsonField(&(*value_)[index], path, reader_);
  JsonField missing(nullptr, path, reader_);
  missing.Problem("is missing (" + Name() + " has " + std::to_string(value_->size()) + " elements)");
  return missing;
}

JsonField JsonField::Object() const {
  if (value_ != nullptr && value_->is_object()) return *this;
  Expected("an object");
  return JsonField(nullptr, path_, reader_);
}

bool JsonField::Has(const std::string& key) const {
  return value_ != nullptr && value_->is_object() && value_->contains(key);
}

bool JsonField::IsNull() const { return value_ == nullptr || value_->is_null(); }

std::string JsonField::String() const {
  if (value_ != nullptr && value_->is_string()) return value_->get<std::string>();
  Expected("a string");
  return "";
}

int64_t JsonField::Int() const {
  if (value_ != nullptr && value_->is_number_integer()) {
    if (value_->is_number_unsigned() && value_->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
      Expected("a whole number below 2^63");
      return 0;
    }
    return value_->get<int64_t>();
  }
  Expected("a whole number");
  return 0;
}

int64_t JsonField::IntIn(int64_t min, int64_t max) const {
  const std::string expected = "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  if (value_ == nullptr || !value_->is_number_integer()) {
    Expected(expected);
    return 0;
  }
  const bool above_int64 =
      value_->is_number_unsigned() && value_->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max());
  const int64_t value = above_int64 ? 0 : value_->get<int64_t>();
  if (above_int64 || value < min || value > max) {
    Problem("is " + value_->dump() + ", expected " + expected);
    return 0;
  }
  return value;
}

uint64_t JsonField::Count(uint64_t max) const {
  // A whole number of 0 or more parses as unsigned; one built in memory from a signed type is signed.
  const bool whole = value_ != nullptr && value_->is_number_integer() &&
                     (value_->is_number_unsigned() || value_->get<int64_t>() >= 0);
  if (!whole) {
    Expected("a whole number of 0 or more");
    return 0;
  }
  const uint64_t value = value_->get<uint64_t>();
  if (value <= max) return value;
  Problem("is " + value_->dump() + ", expected at most " + std::to_string(max));
  return 0;
}

bool JsonField::Bool() const {
  if (value_ != nullptr && value_->is_boolean()) return value_->get<bool>();
  Expected("true or false");
  return false;
}

std::vector<JsonField> JsonField::Elements() const {
  std::vector<JsonField> elements;
  if (value_ == nullptr || !value_->is_array()) {
    Expected("an array");
    return elements;
  }
  elements.reserve(value_->size());
  for (size_t i = 0; i < value_->size(); ++i)
    elements.push_back(JsonField(&(*value_)[i], path_ + "[" + std::to_string(i) + "]", reader_));
  return elements;
}

std::vector<std::pair<std::string, JsonField>> JsonField::Members() const {
  std::vector<std::pair<std::string, JsonField>> members;
  if (value_ == nullptr || !value_->is_object()) {
    Expected("an object");
    return members;
  }
  for (auto it = value_->begin(); it != value_->end(); ++it)
    members.emplace_back(it.key(), JsonField(&it.value(), path_.empty() ? it.key() : path_ + "." + it.key(), reader_));
  return members;
}

const json& JsonField::raw() const { return value_ == nullptr ? NullJson() : *value_; }

std::string JsonField::Shown() const {
  if (value_ == nullptr || value_->is_null()) return "-";
  if (value_->is_string()) return value_->get<std::string>();
  return value_->dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace slotd
