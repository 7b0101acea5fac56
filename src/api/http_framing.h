// What HttpServer reads of a request before a handler sees it: its query
// string, and whether its body can be framed safely.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/beast/http/message.hpp>

namespace slotd::http {

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
