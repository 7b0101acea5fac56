// HttpClient::Upgrade: one request on a socket of its own, so that the
// connection can outlive the exchange (libcurl keeps its sockets); the
// answer's head is read by Beast's parser.
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>

#include "common/http_client.h"
#include "common/ascii.h"

namespace slotd {
namespace {

// The most an answer's head (status line and headers) may take.
constexpr size_t kMaxHead = 64 * 1024;

// Connects to a unix socket path, or to "http://host:port".
Result<int> Connect(bool unix_socket, const std::string& target, const std::string& where) {
  if (unix_socket) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (target.size() >= sizeof addr.sun_path) {
      ::close(fd);
      return Status::InvalidArgument(where + ": the socket path is too long");
    }
    std::memcpy(addr.sun_path, target.c_str(), target.size() + 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      const std::string why = ErrnoText(errno);
      ::close(fd);
      return Status::Unavailable(where + " failed: cannot connect: " + why);
    }
    return fd;
  }
  std::string host_port = target.substr(target.find("://") == std::string::npos ? 0 : target.find("://") + 3);
  host_port = host_port.substr(0, host_port.find('/'));
  const size_t colon = host_port.rfind(':');
  const std::string host = colon == std::string::npos ? host_port : host_port.substr(0, colon);
  const std::string port = colon == std::string::npos ? "80" : host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0)
    return Status::Unavailable(where + " failed: " + host + ": " + gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(found);
      return fd;
    }
    why = ErrnoText(errno);
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return Status::Unavailable(where + " failed: cannot connect: " + why);
}

// Waits until `fd` is readable (or writable) before `deadline`.
bool WaitFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

}  // namespace

std::string UpgradedConnection::Header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (EqualsIgnoringAsciiCase(key, name)) return value;
  return "";
}

Result<UpgradedConnection> HttpClient::Upgrade(const std::string& method, const std::string& path_and_query,
                                               const std::string& body, const std::vector<std::string>& headers,
                                               std::chrono::milliseconds timeout, bool accept_200) const {
  const std::string where = method + " " + path_and_query + " on " + description_;
  const std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + timeout;
  Result<int> connected = Connect(unix_socket_, target_, where);
  if (!connected.ok()) return connected.status();
  const int fd = *connected;
  auto fail = [fd](Status status) -> Result<UpgradedConnection> {
    ::close(fd);
    return status;
  };

  std::string request = method + " " + path_and_query + " HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n"
                        "Upgrade: tcp\r\n";
  if (!bearer_token_.empty()) request += "Authorization: Bearer " + bearer_token_ + "\r\n";
  for (const std::string& header : headers) request += header + "\r\n";
  if (!body.empty()) request += "Content-Type: application/json\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (size_t sent = 0; sent < request.size();) {
    if (!WaitFor(fd, POLLOUT, deadline)) return fail(Status::DeadlineExceeded(where + ": could not send the request in time"));
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return fail(Status::Unavailable(where + " failed: " + ErrnoText(errno)));
    sent += static_cast<size_t>(n);
  }

  std::string received;
  size_t head_end = std::string::npos;
  while ((head_end = received.find("\r\n\r\n")) == std::string::npos) {
    if (received.size() > kMaxHead) return fail(Status::Internal(where + ": the answer's head is over 64 KiB"));
    if (!WaitFor(fd, POLLIN, deadline))
      return fail(Status::DeadlineExceeded(where + ": no answer within " + std::to_string(timeout.count()) + " ms"));
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return fail(Status::Unavailable(where + " failed: the connection closed before an answer"));
    received.append(chunk, static_cast<size_t>(n));
  }
  // The head, read by Beast's parser; its body (an error's) is read below.
  boost::beast::http::response_parser<boost::beast::http::empty_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(kMaxHead));
  parser.skip(true);
  boost::beast::error_code error;
  parser.put(boost::asio::buffer(received.data(), head_end + 4), error);
  if (error || !parser.is_header_done())
    return fail(Status::Internal(where + ": the answer's head is not HTTP: " + error.message()));
  UpgradedConnection upgraded;
  upgraded.early = received.substr(head_end + 4);
  const auto& answer = parser.get();
  const long status = static_cast<long>(answer.result_int());
  for (const auto& field : answer)
    upgraded.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  if (status == 101 || (accept_200 && status == 200)) {
    upgraded.fd = fd;
    return upgraded;
  }
  // An error: its body, as much as comes before the deadline.
  std::string error_body = upgraded.early;
  const uint64_t length = parser.content_length().value_or(0);
  while (error_body.size() < length && error_body.size() < kMaxHttpErrorBody &&
         WaitFor(fd, POLLIN, deadline)) {
    char chunk[4096];
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    error_body.append(chunk, static_cast<size_t>(n));
  }
  return fail(StatusForHttpError(status, where + ": HTTP " + std::to_string(status) + ": " + error_body));
}

}  // namespace slotd
