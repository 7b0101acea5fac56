// HttpServer on a loopback port, driven by HttpClient and by raw sockets:
// what it does when the host refuses it a thread, a body of kept pieces, how
// it sets up an accepted connection, requests framed to smuggle another, and
// a client that leaves while a long handler works.
#include "api/http_server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <condition_variable>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/http_client.h"
#include "testing/eventually.h"

namespace slotd {
namespace {

using nlohmann::json;

// "/long" runs on the kLong lane, "/quick" on the kQuick lane; both answer 200.
http::Dispatch TwoLanes(const http::Request& request) {
  http::Dispatch dispatch;
  dispatch.lane = request.path == "/long" ? http::Lane::kLong : http::Lane::kQuick;
  dispatch.handler = [](http::Exchange& ex) { ex.Reply({.status = 200, .body = "{}"}); };
  return dispatch;
}

// A client socket connected to 127.0.0.1:`port`, closed when it goes.
class RawSocket {
 public:
  explicit RawSocket(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawSocket() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool connected() const { return connected_; }
  bool Send(std::string_view bytes) {
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // What comes within `limit`, until the server closes (`closed` then
  // true) or, when `until` is not empty, until it has come.
  std::string Read(std::chrono::milliseconds limit, bool* closed, std::string_view until = {}) {
    std::string out;
    *closed = false;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end && (until.empty() || out.find(until) == std::string::npos)) {
      pollfd p{fd_, POLLIN, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        *closed = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // The local port this client connected from.
  int local_port() const {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
  }

 private:
  int fd_;
  bool connected_ = false;
};

// The descriptor of this process that is the server's side of the TCP
// connection from local port `client_port` to `server_port`; -1 when none.
int ServerSideOf(int server_port, int client_port) {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* entry = ::readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    if (entry->d_name[0] == '.' || fd == ::dirfd(dir)) continue;
    sockaddr_in local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 || local.sin_family != AF_INET ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0)
      continue;
    if (ntohs(local.sin_port) == server_port && ntohs(peer.sin_port) == client_port) found = fd;
  }
  ::closedir(dir);
  return found;
}

// How many answers (status lines) `bytes` holds.
int AnswersIn(const std::string& bytes) {
  int count = 0;
  for (size_t at = bytes.find("HTTP/1.1 "); at != std::string::npos; at = bytes.find("HTTP/1.1 ", at + 1)) ++count;
  return count;
}

TEST(HttpServer, AThreadThatCannotBeMadeIsA503AndTheServerGoesOn) {
  http::ServerOptions options;
  int refused = 0;
  options.make_thread = [&refused](std::function<void()>) -> std::thread {
    ++refused;
    throw std::system_error(EAGAIN, std::generic_category(), "Resource temporarily unavailable");
  };
  http::HttpServer server(options);
  ASSERT_TRUE(server.ListenTcp("127.0.0.1", 0, TwoLanes).ok());
  server.Start();
  const HttpClient client = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(server.tcp_port()));
  for (int i = 0; i < 3; ++i) {
    auto answer = client.Request("GET", "/long");
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->status, 503);
    const json body = json::parse(answer->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << answer->body;
    EXPECT_EQ(body["error"]["code"], "unavailable");
    EXPECT_NE(body["error"]["message"].get<std::string>().find("tasks limit"), std::string::npos) << answer->body;
  }
  EXPECT_EQ(refused, 3);
  auto quick = client.Request("GET", "/quick");
  ASSERT_TRUE(quick.ok()) << quick.status().message();
  EXPECT_EQ(quick->status, 200);
  server.Stop();  // returns: no handler is counted in flight for the refused ones
}

// Long handlers past the lane's bound are 503 before they run, with
// Retry-After; the quick lane still answers, and a place that comes back
// serves the next one.
TEST(HttpServer, LongRequestsPastTheLanesBoundAre503AndTheirPlacesComeBack) {
  http::ServerOptions options;
  options.max_long_requests = 2;
  std::mutex mutex;
  std::condition_variable opened;
  bool open = false;
  std::atomic<int> held{0};
  http::HttpServer server(options);
  ASSERT_TRUE(server
                  .ListenTcp("127.0.0.1", 0,
                             [&](const http::Request& request) {
                               http::Dispatch dispatch = TwoLanes(request);
                               if (request.path != "/long") return dispatch;
                               dispatch.handler = [&](http::Exchange& ex) {
                                 ++held;
                                 std::unique_lock lock(mutex);
                                 opened.wait(lock, [&] { return open; });
                                 --held;
                                 ex.Reply({.status = 200, .body = "{}"});
                               };
                               return dispatch;
                             })
                  .ok());
  server.Start();
  const HttpClient client = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(server.tcp_port()));
  std::vector<std::thread> holders;
  for (int i = 0; i < 2; ++i) holders.emplace_back([&] { (void)client.Request("GET", "/long"); });
  ASSERT_TRUE(Eventually([&] { return held == 2; }));
  RawSocket third(server.tcp_port());
  ASSERT_TRUE(third.connected());
  ASSERT_TRUE(third.Send("GET /long HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  bool closed = false;
  const std::string refused = third.Read(std::chrono::seconds(10), &closed);
  EXPECT_EQ(refused.rfind("HTTP/1.1 503", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1\r\n"), std::string::npos) << refused;
  EXPECT_NE(refused.find("long requests"), std::string::npos) << refused;
  auto quick = client.Request("GET", "/quick");
  ASSERT_TRUE(quick.ok());
  EXPECT_EQ(quick->status, 200);
  {
    std::lock_guard lock(mutex);
    open = true;
    opened.notify_all();
  }
  for (auto& t : holders) t.join();
  auto served = client.Request("GET", "/long");
  ASSERT_TRUE(served.ok());
  EXPECT_EQ(served->status, 200);
  server.Stop();
}

TEST(HttpServer, ABodyOfPiecesArrivesWholeAndInOrderBetweenOtherAnswers) {
  // More pieces than one system call gathers (64), more bytes than a socket
  // buffer holds, and an empty piece among them.
  std::vector<std::shared_ptr<const std::string>> pieces;
  std::string whole;
  for (int i = 0; i < 3000; ++i) {
    const char letter = static_cast<char>('a' + i % 26);
    pieces.push_back(std::make_shared<const std::string>(i == 7 ? "" : std::string(1000, letter)));
    whole += *pieces.back();
  }
  http::HttpServer server({});
  ASSERT_TRUE(server
                  .ListenTcp("127.0.0.1", 0,
                             [&pieces](const http::Request& request) {
                               http::Dispatch dispatch;
                               dispatch.handler = [&pieces, small = request.path == "/small"](http::Exchange& ex) {
                                 http::Response response;
                                 if (small) response.body = "{}";
                                 else response.pieces = pieces;
                                 ex.Reply(std::move(response));
                               };
                               return dispatch;
                             })
                  .ok());
  server.Start();
  const HttpClient client = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(server.tcp_port()));
  for (const std::string path : {"/pieces", "/small", "/pieces"}) {
    auto answer = client.Request("GET", path);
    ASSERT_TRUE(answer.ok()) << answer.status().message();
    EXPECT_EQ(answer->status, 200);
    EXPECT_EQ(answer->body, path == "/small" ? "{}" : whole) << path;
  }
  server.Stop();
}

TEST(HttpServer, AnAcceptedTcpConnectionHasNagleOff) {
  // With Nagle's algorithm on the server's side, a body written after its
  // head (a body of pieces) waits for the client's delayed ACK: about 40 ms
  // on every answer after a kept-alive connection's first.
  http::HttpServer server({});
  ASSERT_TRUE(server.ListenTcp("127.0.0.1", 0, TwoLanes).ok());
  server.Start();
  RawSocket client(server.tcp_port());
  ASSERT_TRUE(client.Send("GET /quick HTTP/1.1\r\nHost: x\r\n\r\n"));
  bool closed = false;
  const std::string answer = client.Read(std::chrono::seconds(10), &closed, "\r\n\r\n{}");
  ASSERT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;  // the server has set its side up
  ASSERT_FALSE(closed);
  const int fd = ServerSideOf(server.tcp_port(), client.local_port());
  ASSERT_GE(fd, 0) << "no descriptor of this process is the server's side of the connection";
  int nodelay = 0;
  socklen_t len = sizeof nodelay;
  ASSERT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len), 0);
  EXPECT_NE(nodelay, 0) << "TCP_NODELAY is off on the server's side of an accepted connection";
  server.Stop();
}

TEST(HttpServer, ABodyFramedByATransferCodingOtherThanChunkedIs400AndNeverReadAsTheNextRequest) {
  // Each request's body is itself a request: read as "no body", it would be
  // the connection's next request (a smuggled one, past whatever checked the
  // first).
  std::vector<std::string> seen;  // the paths dispatched, on the I/O thread only
  http::HttpServer server({});
  ASSERT_TRUE(server
                  .ListenTcp("127.0.0.1", 0,
                             [&seen](const http::Request& request) {
                               seen.push_back(request.path);
                               http::Dispatch dispatch;
                               dispatch.immediate = {.status = 200, .body = "{}"};
                               return dispatch;
                             })
                  .ok());
  server.Start();
  const std::string smuggled = "DELETE /smuggled HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
  for (const std::string codings : {"Transfer-Encoding: identity\r\n", "Transfer-Encoding: gzip\r\n",
                                    "Transfer-Encoding: chunked, identity\r\n",
                                    "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n"}) {
    RawSocket client(server.tcp_port());
    ASSERT_TRUE(client.Send("POST /first HTTP/1.1\r\nHost: x\r\n" + codings + "\r\n" + smuggled));
    bool closed = false;
    const std::string answers = client.Read(std::chrono::seconds(10), &closed);
    EXPECT_TRUE(closed) << codings << "the connection stayed open";
    EXPECT_EQ(AnswersIn(answers), 1) << codings << answers;
    EXPECT_EQ(answers.rfind("HTTP/1.1 400", 0), 0u) << codings << answers;
    EXPECT_NE(answers.find("\"bad_request\""), std::string::npos) << answers;
    EXPECT_NE(answers.find("Transfer-Encoding"), std::string::npos) << answers;
  }
  // A chunked body is still read as one.
  RawSocket client(server.tcp_port());
  ASSERT_TRUE(client.Send("POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
                          "\r\n2\r\n{}\r\n0\r\n\r\n"));
  bool closed = false;
  const std::string answer = client.Read(std::chrono::seconds(10), &closed);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  server.Stop();
  EXPECT_EQ(seen, std::vector<std::string>{"/chunked"});
}

// A TCP connection to 127.0.0.1:`port`; -1 when it cannot be made.
int ConnectTo(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

// The bytes `fd` receives until `until` has come twice or the peer closes (at most 10 s).
std::string ReadAnswers(int fd, std::string_view until) {
  timeval limit{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  std::string seen;
  char buffer[4096];
  while (true) {
    const size_t first = seen.find(until);
    if (first != std::string::npos && seen.find(until, first + 1) != std::string::npos) return seen;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) return seen;
    seen.append(buffer, static_cast<size_t>(n));
  }
}

// A long handler learns that its client went away while it worked (an exec
// waiting on its command then ends it); a client that stays, even one that
// sends its next request meanwhile, is not taken for gone, and that request
// is served after.
TEST(HttpServer, ALongHandlerSeesItsClientGoButNotOneThatSendsItsNextRequest) {
  std::promise<void> started_promise;
  std::future<void> started = started_promise.get_future();
  std::promise<void> release_promise;
  std::shared_future<void> release = release_promise.get_future().share();
  std::promise<bool> saw_gone;
  http::HttpServer server({});
  ASSERT_TRUE(server
                  .ListenTcp("127.0.0.1", 0,
                             [&](const http::Request& request) {
                               http::Dispatch dispatch;
                               dispatch.lane = http::Lane::kLong;
                               if (request.path == "/next") {
                                 dispatch.handler = [](http::Exchange& ex) { ex.Reply({.status = 200, .body = "{}"}); };
                                 return dispatch;
                               }
                               dispatch.handler = [&](http::Exchange& ex) {
                                 started_promise.set_value();
                                 // Until the client goes, or the test lets it answer (bounded either way).
                                 const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                                 while (!ex.Gone() && std::chrono::steady_clock::now() < give_up &&
                                        release.wait_for(std::chrono::milliseconds(10)) != std::future_status::ready) {
                                 }
                                 saw_gone.set_value(ex.Gone());
                                 ex.Reply({.status = 200, .body = "{}"});
                               };
                               return dispatch;
                             })
                  .ok());
  server.Start();

  // A client that closes while its request is worked on.
  const int leaving = ConnectTo(server.tcp_port());
  ASSERT_GE(leaving, 0);
  const std::string request = "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(leaving, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  started.wait();
  ::close(leaving);
  EXPECT_TRUE(saw_gone.get_future().get()) << "the handler never learnt that its client went away";

  // A client that stays and sends its next request before the first is answered.
  started_promise = std::promise<void>();
  started = started_promise.get_future();
  saw_gone = std::promise<bool>();
  std::future<bool> second_saw_gone = saw_gone.get_future();
  const int staying = ConnectTo(server.tcp_port());
  ASSERT_GE(staying, 0);
  ASSERT_EQ(::send(staying, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  started.wait();
  const std::string next = "GET /next HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(staying, next.data(), next.size(), MSG_NOSIGNAL), static_cast<ssize_t>(next.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the bytes of /next are there to be seen
  release_promise.set_value();
  EXPECT_FALSE(second_saw_gone.get()) << "a client that sent its next request was taken for gone";
  const std::string answers = ReadAnswers(staying, "HTTP/1.1 200");
  EXPECT_EQ(std::count(answers.begin(), answers.end(), '{'), 2) << "both requests answered: " << answers;
  ::close(staying);
  server.Stop();
}

}  // namespace
}  // namespace slotd
