#include "common/status.h"

#include <system_error>

namespace slotd {

const char* Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kNotFound: return "not_found";
    case Code::kConflict: return "conflict";
    case Code::kResourceExhausted: return "insufficient_resources";
    case Code::kFailedPrecondition: return "failed_precondition";
    case Code::kPermissionDenied: return "permission_denied";
    case Code::kUnavailable: return "unavailable";
    case Code::kDeadlineExceeded: return "deadline_exceeded";
    case Code::kInternal: return "internal";
  }
  return "internal";
}

std::string ErrnoText(int error) { return std::error_code(error, std::generic_category()).message(); }

}  // namespace slotd
