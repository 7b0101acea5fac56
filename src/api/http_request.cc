#include "api/http_request.h"

#include "common/ascii.h"
#include "common/http_client.h"

namespace slotd::http {

namespace bhttp = boost::beast::http;

std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    if (!part.empty()) {
      const size_t eq = part.find('=');
      out.emplace_back(PercentDecode(part.substr(0, eq), /*plus_is_space=*/true),
                       eq == std::string_view::npos ? std::string() : PercentDecode(part.substr(eq + 1), /*plus_is_space=*/true));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

std::string BadFraming(const bhttp::request_header<>& head) {
  std::string codings;
  for (const auto& field : head)
    if (field.name() == bhttp::field::transfer_encoding)
      codings += std::string(codings.empty() ? "" : ", ") + std::string(field.value());
  if (codings.empty()) return "";
  const std::string quoted = "Transfer-Encoding \"" + codings + "\"";
  if (head.version() < 11) return quoted + " in an HTTP/1.0 request";
  if (head.find(bhttp::field::content_length) != head.end())
    return quoted + " beside a Content-Length: send one of them";
  std::string_view list = codings;
  while (!list.empty() && (list.front() == ' ' || list.front() == '\t')) list.remove_prefix(1);
  while (!list.empty() && (list.back() == ' ' || list.back() == '\t')) list.remove_suffix(1);
  if (!EqualsIgnoringAsciiCase(list, "chunked"))
    return quoted + ": the only transfer coding this server reads is \"chunked\", alone; send the body with a "
                    "Content-Length, or chunked";
  return "";
}

std::string Request::Header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (EqualsIgnoringAsciiCase(key, name)) return value;
  return "";
}

bool Request::HasParam(std::string_view name) const {
  for (const auto& [key, value] : query)
    if (key == name) return true;
  return false;
}

std::string Request::Param(std::string_view name) const {
  for (const auto& [key, value] : query)
    if (key == name) return value;
  return "";
}

}  // namespace slotd::http
