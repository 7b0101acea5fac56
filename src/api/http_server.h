// HttpServer: the event-driven HTTP/1.1 front of the agent's API, on
// Boost.Beast over Asio. One I/O thread reads every request and writes every
// response without blocking; no client can hold anything but its own
// connection:
//
// - reading a request (headers and body) has a deadline, counted from the
//   moment the server waits for it; a slow or idle client is cut there;
// - bodies over the limit are refused with 413 before they are read, and a
//   listener's gate (the token check) answers before the body is read;
// - each listener has its own bound on open connections, so a flood on TCP
//   never locks out the unix socket. A connection waiting for a request's
//   headers (a new one, or a kept-alive one between requests) holds its
//   place only until room is needed: a new connection past the bound closes
//   the one that has waited longest, and only when none waits is it
//   answered 503 (JSON) and closed;
// - on TCP, one client address may hold at most a quarter of the bound in
//   connections waiting for headers; its next one closes its own longest
//   waiting, so a flood of unfinished requests from one address never
//   crowds out another address, nor that address's own prompt clients;
// - handlers run off the I/O thread: kQuick ones (answered from memory) on a
//   small shared pool, kLong ones (engine calls, execs, streams) each on a
//   thread of their own, so long-lived work never waits for, or holds, the
//   workers that serve short requests; when no thread can be made (a tasks
//   limit), the request is answered 503 and the server goes on.
//
// Every answer the server makes itself (400, 413, 414, 431, 503, 500) has
// the API's JSON error body (api/responses.h).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "api/http_request.h"
#include "common/http_client.h"
#include "common/status.h"

namespace boost::asio::ssl {
class context;
}

namespace slotd::http {

// PercentDecode (common/http_client.h), for the router and the query.
using ::slotd::PercentDecode;

// A whole response.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // When not empty, the body instead of `body`: these pieces in order,
  // written from where they are kept, never joined into one buffer (a list
  // of a thousand kept records costs no copy and no fresh memory). Each
  // stays alive until it is written.
  std::vector<std::shared_ptr<const std::string>> pieces;
};

// The answer to one request, given by the one thread that handles it: either
// Reply once, or BeginStream and then Write chunks until done. When the
// handler returns having done neither, the server answers 500.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual const Request& request() const = 0;
  // Sends `response` and returns at once (the write goes on without the caller).
  virtual void Reply(Response response) = 0;
  // Sends the status line and headers of a chunked response that ends when
  // the handler returns (the connection then closes). False when the client
  // has gone.
  virtual bool BeginStream(int status, const std::string& content_type,
                           const std::vector<std::pair<std::string, std::string>>& headers = {}) = 0;
  // Sends one chunk of a begun stream and waits until it is written. False
  // once the client has gone, a write took longer than the request timeout,
  // or the server is stopping: the handler should return.
  virtual bool Write(std::string_view data) = 0;
  // Answers "101 Switching Protocols" (Connection: Upgrade, Upgrade: tcp,
  // and `headers`) and hands the connection over: returns it as a blocking
  // socket that the handler now owns and closes, with the bytes the client
  // sent after its request in `early`; -1 when the client has gone. The
  // server no longer reads, writes or times it; Gone() then becomes true
  // only when the server stops.
  virtual int Upgrade(const std::vector<std::pair<std::string, std::string>>& headers, std::string& early) = 0;
  // Becomes true when the client goes away or the server stops; for loops
  // and calls that take a stop flag.
  virtual const std::atomic<bool>& Gone() const = 0;
  // Whether Reply or BeginStream was called.
  virtual bool Answered() const = 0;
};

// Where a handler runs (see the file comment).
enum class Lane { kQuick, kLong };

// How the server should answer one request: at once with `immediate` (when
// `handler` is empty), or by running `handler` on `lane`.
struct Dispatch {
  Response immediate;
  Lane lane = Lane::kQuick;
  std::function<void(Exchange&)> handler;
};

// Chooses how to answer a complete request. Called on the I/O thread: it
// must not block (route matching and token checks only).
using Dispatcher = std::function<Dispatch(const Request&)>;

// Looks at a request whose headers are complete, before its body is read
// (`body` is empty): an answer it gives is sent at once, the body is never
// read and the connection closes; nullopt lets the request go on. Called on
// the I/O thread: it must not block (a token check).
using Gate = std::function<std::optional<Response>(const Request&)>;

// The TLS context a new connection of a TLS listener takes (its certificate,
// rules and client CAs); each connection keeps the one it began with.
using TlsSource = std::function<std::shared_ptr<boost::asio::ssl::context>()>;

struct ServerOptions {
  std::chrono::milliseconds request_timeout{10'000};  // to receive one whole request; also each write
  uint64_t max_body_bytes = 1 << 20;                  // larger bodies: 413
  int max_connections = 1024;                         // per listener; past it: room made or 503 (see above)
  int quick_workers = 2;                              // threads of the kQuick lane
  // kLong handlers running at once, each on a thread of the long lane (an
  // ElasticPool: none at rest, a thread idle for long_idle ends); one more
  // is answered 503 before its handler runs.
  int max_long_requests = 512;
  std::chrono::milliseconds long_idle{10'000};
  // Makes a thread of the long lane; throws std::system_error when none can
  // be made (a tasks limit), and the request is then answered 503. Empty:
  // std::thread. Tests give one that fails.
  std::function<std::thread(std::function<void()> body)> make_thread;
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // Stop()s

  // Listens on TCP `host`:`port` (port 0: a free port, see tcp_port()) with
  // the system's backlog. Errors name the address.
  // `gate`, when given, sees each request's headers first. With `tls`,
  // each connection begins with a TLS handshake, under the request timeout
  // and holding its place like a connection waiting for headers (see the
  // file comment); a failed one closes the connection.
  Status ListenTcp(const std::string& host, int port, Dispatcher dispatcher, Gate gate = nullptr,
                   TlsSource tls = nullptr);
  // Listens on the unix socket `path` (mode 0600), replacing a stale file.
  Status ListenUnix(const std::string& path, Dispatcher dispatcher);
  int tcp_port() const { return tcp_port_; }

  // Serves on background threads until Stop().
  void Start();
  // Stops accepting, closes every connection, marks every stream Gone, and
  // waits for the handlers in flight to return.
  void Stop();

 private:
  friend class Session;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int tcp_port_ = 0;
};

}  // namespace slotd::http
