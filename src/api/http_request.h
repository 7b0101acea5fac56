// A request as HttpServer gives it to a handler (Request), and what the
// server reads of one before that: its query string, and whether its body
// can be framed safely.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/message.hpp>

namespace slotd::http {

// One request as received. `target` is the raw request target; `path` its
// path, still percent-encoded (the router decodes each segment, so "%2F"
// never splits one); `query` holds decoded names and values, which may be
// any bytes, not only UTF-8.
struct Request {
  std::string method;
  std::string target;
  std::string path;
  std::vector<std::pair<std::string, std::string>> query;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // Where it came from: the unix socket (`local`), or TCP (`peer`) and, over TLS
  // with client certificates, the subject CN of the client's verified
  // certificate ("" without one).
  bool local = false;
  std::string peer;  // the TCP client's address, "" on the unix socket
  std::string client_certificate;

  // The first header named `name` (case-insensitively); "" when absent.
  std::string Header(std::string_view name) const;
  // Whether the query has `name`, and its first value ("" when absent).
  bool HasParam(std::string_view name) const;
  std::string Param(std::string_view name) const;
};

// The parameters of a query string ("a=1&b=x%20y"), percent-decoded ('+' a
// space), in order; a parameter without '=' has an empty value.
std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query);

// Why the end of the body of a request with `head` cannot be found safely
// (RFC 9112 §6): a Transfer-Encoding that is not exactly "chunked" (a last
// coding other than chunked leaves the body's end unknown, and a coding
// before it is one this server does not decode), one given beside a
// Content-Length, or one in an HTTP/1.0 request. Read as anything else (as
// no body, say), the body would be taken for the next request on the
// connection. "" when the framing is sound.
std::string BadFraming(const boost::beast::http::request_header<>& head);

}  // namespace slotd::http
