#include "api/responses.h"

#include "common/base64.h"

#include <utility>

namespace slotd {

using nlohmann::json;

std::string DumpJson(const json& body) {
  return body.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

http::Response JsonResponse(int status, const json& body) { return JsonTextResponse(status, DumpJson(body)); }

http::Response JsonTextResponse(int status, std::string text) {
  http::Response response;
  response.status = status;
  response.content_type = "application/json";
  response.body = std::move(text);
  return response;
}

http::Response KernelListResponse(const std::vector<std::shared_ptr<const std::string>>& records) {
  static const auto head = std::make_shared<const std::string>("{\"kernels\":[");
  static const auto comma = std::make_shared<const std::string>(",");
  static const auto tail = std::make_shared<const std::string>("]}");
  http::Response response;
  response.pieces.reserve(2 * records.size() + 2);
  response.pieces.push_back(head);
  for (size_t i = 0; i < records.size(); ++i) {
    if (i > 0) response.pieces.push_back(comma);
    response.pieces.push_back(records[i]);
  }
  response.pieces.push_back(tail);
  return response;
}

http::Response ErrorResponse(int status, std::string_view code, const std::string& message) {
  return JsonResponse(status, {{"error", {{"code", std::string(code)}, {"message", message}}}});
}

int HttpStatus(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return 200;
    case Status::Code::kInvalidArgument: return 400;
    case Status::Code::kNotFound: return 404;
    case Status::Code::kConflict: return 409;
    case Status::Code::kFailedPrecondition: return 409;
    case Status::Code::kResourceExhausted: return 422;
    case Status::Code::kPermissionDenied: return 403;
    case Status::Code::kUnavailable: return 503;
    case Status::Code::kDeadlineExceeded: return 504;
    case Status::Code::kInternal: return 500;
  }
  return 500;
}

http::Response ErrorResponse(const Status& status, int http_status) {
  return ErrorResponse(http_status ? http_status : HttpStatus(status.code()), Status::CodeName(status.code()),
                       status.message());
}

bool IsUtf8(std::string_view bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}


void ExactText(json& body, const std::string& field, const std::string& bytes) {
  body[field] = bytes;  // DumpJson replaces invalid bytes in the text
  if (!IsUtf8(bytes)) body[field + "_base64"] = Base64(bytes);
}

}  // namespace slotd
