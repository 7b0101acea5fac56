// Status and Result<T>: the one error model of slotd.
//
// A Status is either OK or carries a Code and a message written for the user
// (what was wrong, where, what to do). Result<T> is a value or a non-OK
// Status. Neither throws; callers check ok().
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace slotd {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,     // the request or config is malformed (HTTP 400)
    kNotFound,            // no such kernel/container/image (HTTP 404)
    kConflict,            // exists with different content (HTTP 409)
    kResourceExhausted,   // request cannot be met now (HTTP 422)
    kFailedPrecondition,  // state forbids the operation (HTTP 409/422)
    kPermissionDenied,    // the operator's config does not allow it (HTTP 403)
    kUnavailable,         // the engine or a peer cannot be reached (HTTP 503)
    kDeadlineExceeded,    // an operation ran past its deadline
    kInternal,            // anything else; the message says what
  };

  // Constructs OK.
  Status() = default;

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
  static Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {Code::kResourceExhausted, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {Code::kFailedPrecondition, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {Code::kPermissionDenied, std::move(m)}; }
  static Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {Code::kDeadlineExceeded, std::move(m)}; }
  static Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<prefix>: <message>".
  Status WithPrefix(const std::string& prefix) const {
    return ok() ? *this : Status(code_, prefix + ": " + message_);
  }

  // A short snake_case name of the code ("not_found"), used in API errors.
  static const char* CodeName(Code code);

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  std::string message_;
};

// A value of T, or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: must not be OK

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// The text of an errno value ("No such file or directory"), for messages.
std::string ErrnoText(int error);

}  // namespace slotd
