// The API's JSON bodies: every answer, errors included, is built here, so
// that the error shape is stated once and no byte a user or an engine sent
// (not UTF-8, say) can turn an answer into a 500.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/kernel.h"
#include "api/http_server.h"
#include "common/status.h"

namespace slotd {

// Serialises `body`; bytes that are not UTF-8 become U+FFFD instead of
// failing. Exact bytes, where they matter, travel base64-encoded beside the
// text (see ExactText).
std::string DumpJson(const nlohmann::json& body);

// A JSON response with `status` and `body`.
http::Response JsonResponse(int status, const nlohmann::json& body);
// A JSON response with `status` and `text`, JSON made already (DumpJson, a kernel's record).
http::Response JsonTextResponse(int status, std::string text);

// GET /v1/kernels: {"kernels": [...]}, the `records` (KernelService::ListKernelRecords)
// in order, as the response's pieces: the records are sent as they are kept.
http::Response KernelListResponse(const std::vector<std::shared_ptr<const std::string>>& records);

// The error body {"error":{"code","message"}} with `status`.
http::Response ErrorResponse(int status, std::string_view code, const std::string& message);

// The HTTP status of a Status code: 400, 404, 409, 422, 503, 504, 500.
int HttpStatus(Status::Code code);

// ErrorResponse for `status`, its HTTP status from its code unless `http_status` is given.
http::Response ErrorResponse(const Status& status, int http_status = 0);

// Puts `bytes` into `body` under `field`: as a string when they are valid
// UTF-8; otherwise as a string with U+FFFD for each invalid byte and, under
// `field` + "_base64", the exact bytes base64-encoded.
void ExactText(nlohmann::json& body, const std::string& field, const std::string& bytes);

// True when `bytes` are valid UTF-8.
bool IsUtf8(std::string_view bytes);


}  // namespace slotd
