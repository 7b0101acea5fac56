#include "cli/slotctl_answer.h"

#include <limits>

namespace slotctl {

using nlohmann::json;

namespace {

// The null that an absent optional member reads as.
const json& Null() {
  static const json null;
  return null;
}

// How a field is named in a problem: its path, or "the body" for the whole answer.
std::string FieldName(const std::string& path) { return path.empty() ? "the body" : path; }

// "a string", "an object", "null": what a value is, for a problem.
std::string Kind(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_object() || value.is_array()) return std::string("an ") + value.type_name();
  return std::string("a ") + value.type_name();
}

}  // namespace

std::optional<json> ParseAnswerJson(std::string_view text) {
  bool too_deep = false;
  // A value nested past the limit is dropped as it is parsed (the callback
  // returns false), so a hostile answer never becomes a deep tree.
  auto limit_depth = [&too_deep](int depth, json::parse_event_t, json&) {
    if (depth > kMaxAnswerDepth) too_deep = true;
    return depth <= kMaxAnswerDepth;
  };
  json parsed = json::parse(text, limit_depth, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || too_deep) return std::nullopt;
  return parsed;
}

Answer::Answer(json body, std::string request)
    : state_(std::make_unique<State>(State{std::move(body), std::move(request), ""})) {}

AnswerField Answer::Root() const { return AnswerField(&state_->body, "", state_.get()); }

void AnswerField::Expected(const char* expected) const {
  if (value_ == nullptr || !answer_->problem.empty()) return;
  answer_->problem = FieldName(path_) + " is " + Kind(*value_) + ", expected " + expected;
}

AnswerField AnswerField::Member(const std::string& key, bool required) const {
  const std::string path = path_.empty() ? key : path_ + "." + key;
  if (value_ == nullptr) return AnswerField(nullptr, path, answer_);
  if (!value_->is_object()) {
    Expected("an object");
    return AnswerField(nullptr, path, answer_);
  }
  auto it = value_->find(key);
  if (it != value_->end()) return AnswerField(&*it, path, answer_);
  if (!required) return AnswerField(&Null(), path, answer_);
  if (answer_->problem.empty()) answer_->problem = path + " is missing";
  return AnswerField(nullptr, path, answer_);
}

AnswerField AnswerField::operator[](const std::string& key) const { return Member(key, /*required=*/true); }

AnswerField AnswerField::Optional(const std::string& key) const { return Member(key, /*required=*/false); }

AnswerField AnswerField::At(size_t index) const {
  const std::string path = path_ + "[" + std::to_string(index) + "]";
  if (value_ == nullptr) return AnswerField(nullptr, path, answer_);
  if (!value_->is_array()) {
    Expected("an array");
    return AnswerField(nullptr, path, answer_);
  }
  if (index < value_->size()) return AnswerField(&(*value_)[index], path, answer_);
  if (answer_->problem.empty()) answer_->problem = path + " is missing (" + FieldName(path_) + " has " +
                                                   std::to_string(value_->size()) + " elements)";
  return AnswerField(nullptr, path, answer_);
}

bool AnswerField::Has(const std::string& key) const {
  return value_ != nullptr && value_->is_object() && value_->contains(key);
}

std::string AnswerField::String() const {
  if (value_ != nullptr && value_->is_string()) return value_->get<std::string>();
  Expected("a string");
  return "";
}

int64_t AnswerField::Int() const {
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

uint64_t AnswerField::Count(uint64_t max) const {
  // A whole number of 0 or more parses as unsigned.
  if (value_ != nullptr && value_->is_number_unsigned() && value_->get<uint64_t>() <= max)
    return value_->get<uint64_t>();
  if (value_ != nullptr && answer_->problem.empty() && value_->is_number_unsigned()) {
    answer_->problem = FieldName(path_) + " is " + value_->dump() + ", expected at most " + std::to_string(max);
    return 0;
  }
  Expected("a whole number of 0 or more");
  return 0;
}

std::vector<AnswerField> AnswerField::Elements() const {
  std::vector<AnswerField> elements;
  if (value_ == nullptr || !value_->is_array()) {
    Expected("an array");
    return elements;
  }
  elements.reserve(value_->size());
  for (size_t i = 0; i < value_->size(); ++i)
    elements.push_back(AnswerField(&(*value_)[i], path_ + "[" + std::to_string(i) + "]", answer_));
  return elements;
}

std::vector<std::pair<std::string, AnswerField>> AnswerField::Members() const {
  std::vector<std::pair<std::string, AnswerField>> members;
  if (value_ == nullptr || !value_->is_object()) {
    Expected("an object");
    return members;
  }
  for (auto it = value_->begin(); it != value_->end(); ++it)
    members.emplace_back(it.key(), AnswerField(&it.value(), path_.empty() ? it.key() : path_ + "." + it.key(), answer_));
  return members;
}

const json& AnswerField::raw() const { return value_ == nullptr ? Null() : *value_; }

std::string AnswerField::Shown() const {
  if (value_ == nullptr || value_->is_null()) return "-";
  if (value_->is_string()) return value_->get<std::string>();
  return value_->dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace slotctl
