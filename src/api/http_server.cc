#include "api/http_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <type_traits>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <spdlog/spdlog.h>

#include "common/ascii.h"
#include "api/http_request.h"
#include "api/responses.h"
#include "api/server_tls.h"
#include "common/elastic_pool.h"
#include "common/mutex.h"
#include "common/thread_name.h"

namespace slotd::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace ssl = boost::asio::ssl;
using Socket = net::generic::stream_protocol::socket;
using Clock = std::chrono::steady_clock;

// The longest request line and headers together; the request target alone
// may use at most kMaxTarget of it (else 414).
constexpr uint32_t kMaxHeaderBytes = 64 * 1024;
// What a connection answered before its request's body was read whole may
// still send, read and dropped before it is closed (Session::LingerThenClose).
constexpr size_t kLingerBytes = 4u << 20;
constexpr size_t kMaxTarget = 8 * 1024;
// After a failed accept (out of file descriptors, say), how long to wait
// before accepting again, so the loop does not spin.
constexpr std::chrono::milliseconds kAcceptBackoff{100};

// Counts handlers in flight, so Stop() can wait for them. Shared with each
// handler's thread, so the count outlives the server for as long as a
// thread still touches it.
struct InFlight {
  Mutex mutex;
  std::condition_variable cv;
  int count GUARDED_BY(mutex) = 0;
  void Add() {
    MutexLock lock(mutex);
    ++count;
  }
  void Done() {
    MutexLock lock(mutex);
    if (--count == 0) cv.notify_all();
  }
  void WaitIdle() {
    MutexLock lock(mutex);
    cv.wait(lock.native(), [&]() REQUIRES(mutex) { return count == 0; });
  }
};

}  // namespace

class Session;

// One listening socket with its dispatcher and its bound.
struct Listener {
  std::string description;  // "127.0.0.1:6001", "unix socket /run/x/agent.sock"
  Dispatcher dispatcher;
  Gate gate;  // may be empty
  TlsSource tls;  // empty: plain HTTP
  std::optional<net::ip::tcp::acceptor> tcp;
  std::optional<net::local::stream_protocol::acceptor> local;
  std::optional<net::steady_timer> backoff;
  int open = 0;  // connections open now; I/O thread only
  // The connections waiting for a request's headers (new ones, and kept-alive
  // ones between requests), longest waiting first, and how many of them each
  // TCP client address has (none counted on the unix socket). Each session
  // enters and leaves these itself (Session::StartWaiting, StopWaiting); I/O
  // thread only.
  std::list<Session*> waiting;
  std::map<net::ip::address, int> waiting_from;
};

struct HttpServer::Impl {
  explicit Impl(ServerOptions o) : options(o), io(1), guard(net::make_work_guard(io)) {}

  void Accept(Listener& listener);
  // Serves a new connection from `peer` (for TCP), making room for it or
  // refusing it with 503 (see the file comment of http_server.h).
  void OnAccepted(Listener& listener, Socket socket, std::optional<net::ip::address> peer);
  // Closes the connection of `listener` that has waited longest for a
  // request's headers, among those from `peer` when given; false when none
  // waits.
  bool CloseLongestWaiting(Listener& listener, const net::ip::address* peer);
  // How many connections waiting for headers one TCP client address may
  // hold on a listener: a quarter of max_connections.
  int WaitingPerAddress() const { return std::max(1, options.max_connections / 4); }
  // Runs `handler` for `request`, which arrived on `session`, on `lane`.
  void Run(Lane lane, std::shared_ptr<Session> session, Request request, std::function<void(Exchange&)> handler);

  const ServerOptions options;
  net::io_context io;
  net::executor_work_guard<net::io_context::executor_type> guard;
  std::list<Listener> listeners;
  std::list<std::weak_ptr<Session>> sessions;  // I/O thread only; pruned as they close
  std::thread io_thread;
  // The quick lane: its threads run the quick routes, in the order they came.
  std::optional<net::thread_pool> quick;
  std::shared_ptr<InFlight> in_flight = std::make_shared<InFlight>();
  // The long lane: a thread per kLong handler running, reused while busy.
  std::optional<ElasticPool> long_lane;
  std::atomic<bool> stopping{false};
};

// One connection: reads requests one after another (keep-alive), hands each
// to its dispatcher, writes the answers. Every socket operation and every
// member but the atomics runs on the I/O thread; handler threads reach it
// only through posts (see ExchangeImpl).
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(HttpServer::Impl& server, Listener& listener, Socket socket, std::optional<net::ip::address> peer)
      : server_(server), listener_(listener), socket_(std::move(socket)), timer_(server.io), peer_(std::move(peer)) {
    ++listener_.open;
    if (listener_.tls) {
      tls_context_ = listener_.tls();
      tls_.emplace(socket_, *tls_context_);
    }
  }
  ~Session() { Close(); }

  // Begins with the TLS handshake on a TLS listener: under the request
  // deadline, and evictable like a connection waiting for headers.
  void Start() {
    if (!tls_) return ReadRequest();
    Arm();
    StartWaiting();
    tls_->async_handshake(ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
      self->StopWaiting();
      self->timer_.cancel();
      if (ec) {  // not TLS, a refused client certificate, a refused version or cipher, or too slow
        spdlog::debug("API {}: TLS handshake with {} failed: {}", self->listener_.description,
                      self->peer_ ? self->peer_->to_string() : "?", ec.message());
        return self->Close();
      }
      self->client_certificate_ = ClientCertificateName(self->tls_->native_handle());
      self->ReadRequest();
    });
  }

  // Closes the connection now; idempotent. I/O thread only. Closing a
  // connection handed over by an upgrade only says the server is stopping,
  // and ends the relay of a TLS one (BridgeUpgraded).
  void Close() {
    if (closed_) {
      gone_ = true;
      if (bridge_) EndBridge();
      return;
    }
    closed_ = true;
    gone_ = true;
    StopWaiting();
    timer_.cancel();
    beast::error_code ignored;
    socket_.shutdown(net::socket_base::shutdown_both, ignored);
    socket_.close(ignored);
    --listener_.open;
  }

  // Writes a whole response, then reads the next request or closes.
  void Send(Response response) {
    awaiting_answer_ = false;
    if (closed_) return;
    if (!response.pieces.empty()) return SendPieces(std::move(response));
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>();
    res->version(11);
    SetHead(response, *res);
    res->body() = std::move(response.body);
    res->prepare_payload();
    Arm();
    WithStream([&](auto& stream) {
      bhttp::async_write(stream, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
        self->Sent(ec, res->keep_alive());
      });
    });
  }

  // Send for a body of kept pieces: the head, with their length, then the
  // pieces as they are (gathered, at most 64 to a system call).
  void SendPieces(Response response) {
    auto pieces = std::make_shared<std::vector<std::shared_ptr<const std::string>>>(std::move(response.pieces));
    uint64_t length = 0;
    for (const auto& piece : *pieces) length += piece->size();
    auto res = std::make_shared<bhttp::response<bhttp::empty_body>>();
    SetHead(response, *res);
    res->content_length(length);
    const bool keep_alive = res->keep_alive();
    WriteHead(res, [self = shared_from_this(), pieces, keep_alive](bool written) {
      if (!written) return;  // closed already
      auto buffers = std::make_shared<std::vector<net::const_buffer>>();
      buffers->reserve(pieces->size());
      for (const auto& piece : *pieces) buffers->emplace_back(piece->data(), piece->size());
      self->Arm();
      self->WithStream([&](auto& stream) {
        net::async_write(stream, *buffers, [self, pieces, buffers, keep_alive](beast::error_code ec, size_t) {
          self->Sent(ec, keep_alive);
        });
      });
    });
  }

  // The head of `res` as `response` has it (status, content type, headers),
  // kept alive when this connection is and the server is not stopping.
  template <class Body>
  void SetHead(const Response& response, bhttp::response<Body>& res) const {
    res.result(static_cast<unsigned>(response.status));
    res.set(bhttp::field::content_type, response.content_type);
    for (const auto& [name, value] : response.headers) res.set(name, value);
    res.keep_alive(keep_alive_ && !server_.stopping);
  }

  // After a whole response was written (or failed to be): reads the next
  // request, or closes.
  void Sent(beast::error_code ec, bool keep_alive) {
    timer_.cancel();
    if (!ec && !keep_alive && unread_body_) return LingerThenClose();
    if (ec || !keep_alive) return Close();
    ReadRequest();
  }

  // Ends a connection answered before its request's body was read whole:
  // the answer written, its sending side is shut (the client reads the
  // answer, then end of stream), and what the client still sends is read
  // and dropped, at most kLingerBytes and until the request deadline.
  // Closing at once, with bytes unread, resets the connection, and a client
  // still sending its body then meets a broken pipe instead of the answer.
  void LingerThenClose() {
    beast::error_code ignored;
    socket_.shutdown(net::socket_base::shutdown_send, ignored);
    Arm();
    DropWhatComes(std::make_shared<std::array<char, 16384>>(), 0);
  }
  void DropWhatComes(std::shared_ptr<std::array<char, 16384>> scratch, size_t dropped) {
    auto& bytes = *scratch;
    socket_.async_read_some(net::buffer(bytes), [self = shared_from_this(), scratch = std::move(scratch),
                                                 dropped](beast::error_code ec, size_t n) mutable {
      if (ec || dropped + n >= kLingerBytes) {
        self->timer_.cancel();
        return self->Close();
      }
      self->DropWhatComes(std::move(scratch), dropped + n);
    });
  }

  // The stream half of ExchangeImpl: each runs on the I/O thread and
  // fulfils `done` with whether the bytes were written.
  void SendStreamHead(int status, std::string content_type, std::vector<std::pair<std::string, std::string>> headers,
                      std::shared_ptr<std::promise<bool>> done) {
    if (closed_) return done->set_value(false);
    auto res = std::make_shared<bhttp::response<bhttp::empty_body>>();
    res->result(static_cast<unsigned>(status));
    res->set(bhttp::field::content_type, content_type);
    for (const auto& [name, value] : headers) res->set(name, value);
    res->keep_alive(false);
    res->chunked(true);
    WriteHead(res, [self = shared_from_this(), done](bool written) {
      if (written) self->WatchForHangUp();
      done->set_value(written);
    });
  }
  void SendChunk(std::shared_ptr<std::string> data, std::shared_ptr<std::promise<bool>> done) {
    if (closed_) return done->set_value(false);
    Arm();
    WithStream([&](auto& stream) {
      net::async_write(stream, bhttp::make_chunk(net::buffer(*data)),
                       [self = shared_from_this(), data, done](beast::error_code ec, size_t) {
                         self->timer_.cancel();
                         if (ec) self->Close();
                         done->set_value(!ec);
                       });
    });
  }
  // Ends a stream: the last chunk, then close.
  void EndStream() {
    if (closed_) return;
    Arm();
    WithStream([&](auto& stream) {
      net::async_write(stream, bhttp::make_chunk_last(),
                       [self = shared_from_this()](beast::error_code, size_t) { self->Close(); });
    });
  }

  // Writes the 101 answer, then hands the connection over (see
  // Exchange::Upgrade): `done` gets a blocking duplicate of the socket and
  // the bytes read past the request, or -1; the session's own descriptor is
  // closed without a shutdown, so the connection lives on in the duplicate.
  // A TLS connection cannot be handed over as a socket: the handler gets
  // one end of a socket pair that the session relays (BridgeUpgraded).
  void SendUpgrade(std::vector<std::pair<std::string, std::string>> headers,
                   std::shared_ptr<std::promise<std::pair<int, std::string>>> done) {
    if (closed_) return done->set_value({-1, ""});
    auto res = std::make_shared<bhttp::response<bhttp::empty_body>>();
    res->result(bhttp::status::switching_protocols);
    res->set(bhttp::field::connection, "Upgrade");
    res->set(bhttp::field::upgrade, "tcp");
    for (const auto& [name, value] : headers) res->set(name, value);
    WriteHead(res, [self = shared_from_this(), done](bool written) {
      if (!written) return done->set_value({-1, ""});
      if (self->tls_) return self->BridgeUpgraded(done);
      const int fd = ::dup(self->socket_.native_handle());
      std::string early(static_cast<const char*>(self->buffer_.data().data()), self->buffer_.size());
      self->closed_ = true;
      --self->listener_.open;
      beast::error_code ignored;
      self->socket_.close(ignored);
      if (fd >= 0) {
        ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        ::fcntl(fd, F_SETFD, FD_CLOEXEC);
      }
      done->set_value({fd, std::move(early)});
    });
  }

  // The relay of an upgraded TLS connection: the handler gets one end of a
  // socket pair (blocking, close-on-exec) as if it were the connection, and
  // the session copies the bytes between the other end and the TLS stream.
  // The client ending its side ends the handler's reading (end of stream);
  // the handler ending its side (shutdown or close) ends the client's, and
  // the client then has the request timeout to hang up before the relay
  // closes both. Like a handed-over socket, it no longer counts against the
  // listener's bound.
  void BridgeUpgraded(std::shared_ptr<std::promise<std::pair<int, std::string>>> done) {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      Close();
      return done->set_value({-1, ""});
    }
    std::string early(static_cast<const char*>(buffer_.data().data()), buffer_.size());
    buffer_.consume(buffer_.size());
    closed_ = true;
    --listener_.open;
    beast::error_code ec;
    bridge_.emplace(server_.io);
    bridge_->assign(net::local::stream_protocol(), pair[1], ec);
    if (ec) {
      ::close(pair[0]);
      ::close(pair[1]);
      bridge_.reset();
      beast::error_code ignored;
      socket_.close(ignored);
      return done->set_value({-1, ""});
    }
    RelayToHandler(std::make_shared<std::array<char, 16384>>());
    RelayToClient(std::make_shared<std::array<char, 16384>>());
    done->set_value({pair[0], std::move(early)});
  }

  const std::atomic<bool>& gone() const { return gone_; }
  // The TCP client's address; none on the unix socket.
  const std::optional<net::ip::address>& peer() const { return peer_; }

 private:
  // Runs `op` with the connection's byte stream: the TLS stream on a TLS
  // listener, else the socket itself.
  template <class Op>
  void WithStream(Op&& op) {
    if (tls_) op(*tls_);
    else op(socket_);
  }

  // BridgeUpgraded's two directions; each ends with its side.
  void RelayToHandler(std::shared_ptr<std::array<char, 16384>> bytes) {
    auto& space = *bytes;
    tls_->async_read_some(net::buffer(space), [self = shared_from_this(), bytes](beast::error_code ec, size_t n) {
      if (!self->bridge_) return;
      if (ec) {  // the client ended its side, or the connection broke
        beast::error_code ignored;
        self->bridge_->shutdown(net::socket_base::shutdown_send, ignored);
        return;
      }
      net::async_write(*self->bridge_, net::buffer(bytes->data(), n), [self, bytes](beast::error_code e, size_t) {
        if (e) return self->EndBridge();  // the handler closed its end
        self->RelayToHandler(bytes);
      });
    });
  }
  void RelayToClient(std::shared_ptr<std::array<char, 16384>> bytes) {
    auto& space = *bytes;
    bridge_->async_read_some(net::buffer(space), [self = shared_from_this(), bytes](beast::error_code ec, size_t n) {
      if (!self->bridge_) return;
      if (ec) {  // the handler ended its side: so does the client's, which has a while to hang up
        beast::error_code ignored;
        self->socket_.shutdown(net::socket_base::shutdown_send, ignored);
        self->Arm();
        return;
      }
      net::async_write(*self->tls_, net::buffer(bytes->data(), n), [self, bytes](beast::error_code e, size_t) {
        if (e) return self->EndBridge();
        self->RelayToClient(bytes);
      });
    });
  }
  // Closes both sides of the relay; its pending operations end with errors.
  void EndBridge() {
    gone_ = true;
    timer_.cancel();
    beast::error_code ignored;
    if (bridge_) bridge_->close(ignored);
    bridge_.reset();
    socket_.close(ignored);
  }

  // Enters the listener's count of connections waiting for a request's
  // headers, as the newest; StopWaiting leaves it, and may be called again.
  void StartWaiting() {
    waiting_at_ = listener_.waiting.insert(listener_.waiting.end(), this);
    if (peer_) ++listener_.waiting_from[*peer_];
  }
  void StopWaiting() {
    if (!waiting_at_) return;
    listener_.waiting.erase(*waiting_at_);
    waiting_at_.reset();
    if (!peer_) return;
    auto count = listener_.waiting_from.find(*peer_);
    if (--count->second == 0) listener_.waiting_from.erase(count);
  }

  // Writes the head of `res` (HTTP/1.1, no body yet) under the write
  // deadline, then calls `then` with whether it was written; a failed write
  // closes the connection first.
  void WriteHead(std::shared_ptr<bhttp::response<bhttp::empty_body>> res, std::function<void(bool)> then) {
    res->version(11);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*res);
    Arm();
    WithStream([&](auto& stream) {
      bhttp::async_write_header(stream, *serializer,
                                [self = shared_from_this(), res, serializer, then](beast::error_code ec, size_t) {
                                  self->timer_.cancel();
                                  if (ec) self->Close();
                                  then(!ec);
                                });
    });
  }

  // Starts the deadline of the read or write about to begin: past it the
  // connection closes, cancelling the operation.
  void Arm() {
    timer_.expires_after(server_.options.request_timeout);
    timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      if (ec) return;  // cancelled: the operation ended in time
      if (auto self = weak.lock()) self->Close();
    });
  }

  void ReadRequest() {
    if (closed_ || server_.stopping) return Close();
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(server_.options.max_body_bytes);
    Arm();
    StartWaiting();
    WithStream([&](auto& stream) {
      bhttp::async_read_header(stream, buffer_, *parser_,
                               [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
    });
  }

  // Answers an error the server found itself, then closes: the rest of the
  // request is not read.
  void Refuse(int status, std::string_view code, const std::string& message) {
    keep_alive_ = false;
    Send(ErrorResponse(status, code, message));
  }

  void OnHeader(beast::error_code ec) {
    StopWaiting();
    if (ec == bhttp::error::header_limit) {
      // Without a line end in what was read, the request line alone is too long.
      const std::string_view seen(static_cast<const char*>(buffer_.data().data()), buffer_.size());
      if (seen.find('\n') == std::string_view::npos)
        return Refuse(414, "uri_too_long",
                      "the request target is longer than " + std::to_string(kMaxTarget) + " bytes");
      return Refuse(431, "headers_too_large",
                    "the request headers are larger than " + std::to_string(kMaxHeaderBytes) + " bytes");
    }
    if (ec == bhttp::error::body_limit) return RefuseBody();
    if (ec) {
      // The client left, idled past the deadline, or sent something that is not HTTP.
      if (ec != bhttp::error::end_of_stream && ec != net::error::operation_aborted && ec != net::error::eof &&
          ec != net::error::connection_reset && ec != net::error::bad_descriptor &&
          ec.category() != net::error::get_ssl_category() && ec != ssl::error::stream_truncated && !closed_)
        return Refuse(400, "bad_request", "malformed HTTP request: " + ec.message());
      return Close();
    }
    const auto& head = parser_->get();
    if (head.target().size() > kMaxTarget)
      return Refuse(414, "uri_too_long", "the request target is longer than " + std::to_string(kMaxTarget) + " bytes");
    if (const std::string framing = BadFraming(head); !framing.empty()) {
      unread_body_ = true;  // whatever follows is read and dropped, never taken for a request
      return Refuse(400, "bad_request", framing);
    }
    if (parser_->content_length() && *parser_->content_length() > server_.options.max_body_bytes) return RefuseBody();
    keep_alive_ = head.keep_alive();
    if (listener_.gate) {
      if (std::optional<Response> refused = listener_.gate(RequestOf(head, client_certificate_))) {
        keep_alive_ = false;  // the body, if any, is never read
        unread_body_ = parser_->content_length().value_or(0) > 0 || parser_->chunked();
        return Send(std::move(*refused));
      }
    }
    const auto expect = head[bhttp::field::expect];
    if (EqualsIgnoringAsciiCase(std::string_view(expect.data(), expect.size()), "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      WithStream([&](auto& stream) {
        net::async_write(stream, net::buffer(kContinue), [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec) return self->Close();
          self->ReadBody();
        });
      });
      return;
    }
    ReadBody();
  }

  void RefuseBody() {
    unread_body_ = true;
    Refuse(413, "payload_too_large",
           "the request body is larger than " + std::to_string(server_.options.max_body_bytes) +
               " bytes; the limit is [api] max-body-size in the agent's config");
  }

  void ReadBody() {
    WithStream([&](auto& stream) {
      bhttp::async_read(stream, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
        self->timer_.cancel();
        if (ec == bhttp::error::body_limit) return self->RefuseBody();
        if (ec) return self->Close();
        self->OnRequest();
      });
    });
  }

  // The request line and headers of `head`, without a body, from a client
  // whose certificate names `client_certificate`.
  Request RequestOf(const bhttp::request_header<>& head, const std::string& client_certificate) const {
    Request request;
    request.local = !peer_.has_value();
    if (peer_) request.peer = peer_->to_string();
    request.client_certificate = client_certificate;
    request.method = std::string(head.method_string());
    request.target = std::string(head.target());
    const size_t question = request.target.find('?');
    request.path = request.target.substr(0, question);
    if (question != std::string::npos) request.query = ParseQuery(std::string_view(request.target).substr(question + 1));
    for (const auto& field : head)
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    return request;
  }

  void OnRequest() {
    auto message = parser_->release();
    parser_.reset();
    Request request = RequestOf(message.base(), client_certificate_);
    request.body = std::move(message.body());

    Dispatch dispatch = listener_.dispatcher(request);
    if (!dispatch.handler) return Send(std::move(dispatch.immediate));
    if (dispatch.lane == Lane::kLong) {
      awaiting_answer_ = true;
      WatchWhileAnswered();
    }
    server_.Run(dispatch.lane, shared_from_this(), std::move(request), std::move(dispatch.handler));
  }

  // While a long handler works on its answer the client has said all it had
  // to: its connection ending (end of stream, a reset) marks it gone, so an
  // exec or another long wait on its behalf can end. Peeks, never reads: the
  // bytes of a next request stay for ReadRequest, and once any have come
  // (read already or waiting) the client is plainly there and the watch
  // ends. Waits for readiness only with nothing unread in the socket, so
  // that a later read is never queued behind a wait no new byte would end.
  // On TLS the peek sees records, not requests: a client that ends with a
  // TLS alert before its FIN is not seen to go until the answer is written.
  void WatchWhileAnswered() {
    if (closed_ || !awaiting_answer_ || buffer_.size() > 0) return;
    char byte;
    const ssize_t n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;
    if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      gone_ = true;
      return;
    }
    socket_.async_wait(net::socket_base::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->WatchWhileAnswered();
    });
  }

  // While a stream is sent the client has nothing more to say: a read that
  // ends means it hung up.
  void WatchForHangUp() {
    WithStream([&](auto& stream) {
      stream.async_read_some(net::buffer(hang_up_probe_), [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) {
          self->gone_ = true;
          return;
        }
        if (!self->closed_) self->WatchForHangUp();
      });
    });
  }

  HttpServer::Impl& server_;
  Listener& listener_;
  Socket socket_;
  // On a TLS listener: the context this connection began with, the TLS
  // stream over socket_ (destroyed before it), and the client's
  // certificate name once the handshake is done.
  std::shared_ptr<ssl::context> tls_context_;
  // beast's ssl_stream: a gathered write (a head and its body) goes out as
  // one TLS record, not one record and system call per piece.
  std::optional<beast::ssl_stream<Socket&>> tls_;
  std::string client_certificate_;
  std::optional<net::local::stream_protocol::socket> bridge_;  // an upgraded TLS connection's relay (BridgeUpgraded)
  net::steady_timer timer_;
  const std::optional<net::ip::address> peer_;
  std::optional<std::list<Session*>::iterator> waiting_at_;  // in listener_.waiting while waiting for headers
  beast::flat_buffer buffer_;  // bounded by the parser's header and body limits
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bool keep_alive_ = true;
  bool unread_body_ = false;  // answered before the request's body was read whole: linger before closing
  bool closed_ = false;
  bool awaiting_answer_ = false;  // a long handler works on this request's answer (WatchWhileAnswered)
  std::atomic<bool> gone_{false};
  char hang_up_probe_[64];
};

namespace {

// The Exchange a handler gets: each call posts its work to the I/O thread.
class ExchangeImpl : public Exchange {
 public:
  ExchangeImpl(net::io_context& io, std::shared_ptr<Session> session, Request request)
      : io_(io), session_(std::move(session)), request_(std::move(request)) {}

  const Request& request() const override { return request_; }

  void Reply(Response response) override {
    if (answered_) return;
    answered_ = true;
    net::post(io_, [s = session_, r = std::move(response)]() mutable { s->Send(std::move(r)); });
  }

  bool BeginStream(int status, const std::string& content_type,
                   const std::vector<std::pair<std::string, std::string>>& headers) override {
    if (answered_) return false;
    answered_ = streaming_ = true;
    auto done = std::make_shared<std::promise<bool>>();
    auto sent = done->get_future();
    net::post(io_, [s = session_, status, content_type, headers, done] { s->SendStreamHead(status, content_type, headers, done); });
    return sent.get();
  }

  bool Write(std::string_view data) override {
    if (!streaming_ || session_->gone()) return false;
    if (data.empty()) return true;  // an empty chunk would end the body
    auto done = std::make_shared<std::promise<bool>>();
    auto sent = done->get_future();
    net::post(io_, [s = session_, d = std::make_shared<std::string>(data), done] { s->SendChunk(d, done); });
    return sent.get();
  }

  int Upgrade(const std::vector<std::pair<std::string, std::string>>& headers, std::string& early) override {
    if (answered_) return -1;
    answered_ = true;
    auto done = std::make_shared<std::promise<std::pair<int, std::string>>>();
    auto handed = done->get_future();
    net::post(io_, [s = session_, headers, done] { s->SendUpgrade(headers, done); });
    auto [fd, bytes] = handed.get();
    early = std::move(bytes);
    return fd;
  }

  const std::atomic<bool>& Gone() const override { return session_->gone(); }
  bool Answered() const override { return answered_; }

  // After the handler: ends a stream, or answers 500 for a handler that gave
  // no answer; then hands the session back to the I/O thread to release.
  void Finish() {
    if (streaming_) {
      net::post(io_, [s = session_] { s->EndStream(); });
    } else if (!answered_) {
      Reply(ErrorResponse(500, "internal", "the agent produced no answer to " + request().method + " " +
                                              request().path + "; this is a bug, please report it"));
    }
    net::post(io_, [s = std::move(session_)] {});
  }

 private:
  net::io_context& io_;
  std::shared_ptr<Session> session_;
  const Request request_;
  bool answered_ = false;
  bool streaming_ = false;
};

// Runs `handler` on `exchange`, turning an escaped exception into a 500.
void RunHandler(const std::function<void(Exchange&)>& handler, ExchangeImpl& exchange) {
  try {
    handler(exchange);
  } catch (const std::exception& e) {
    spdlog::error("API handler for {} {} failed: {}", exchange.request().method, exchange.request().path, e.what());
    if (!exchange.Answered())
      exchange.Reply(ErrorResponse(500, "internal", std::string("internal error: ") + e.what()));
  }
  exchange.Finish();
}

}  // namespace

void HttpServer::Impl::Run(Lane lane, std::shared_ptr<Session> session, Request request,
                           std::function<void(Exchange&)> handler) {
  auto exchange = std::make_shared<ExchangeImpl>(io, std::move(session), std::move(request));
  in_flight->Add();
  auto task = [exchange, handler = std::move(handler), counter = in_flight]() mutable {
    RunHandler(handler, *exchange);
    exchange.reset();
    handler = nullptr;
    counter->Done();
  };
  if (lane == Lane::kQuick) return net::post(*quick, std::move(task));
  const Status started = long_lane->Run(std::move(task));
  if (started.ok()) return;
  // The task never ran: this thread answers for it.
  spdlog::error("API: no thread for {} {}: {}; answered 503", exchange->request().method, exchange->request().path,
                started.message());
  Response refused = ErrorResponse(
      503, "unavailable",
      started.code() == Status::Code::kResourceExhausted
          ? "the agent serves " + std::to_string(options.max_long_requests) +
                " long requests (creates, deletes, restarts, execs, logs, event streams, image calls) at once "
                "already; retry shortly"
          : "the agent cannot start a thread for this request now (" + started.message() +
                "): it is at its tasks limit (systemd TasksMax, ulimit -u); retry shortly, or raise the limit");
  refused.headers.emplace_back("Retry-After", "1");
  exchange->Reply(std::move(refused));
  exchange->Finish();
  in_flight->Done();
}

void HttpServer::Impl::Accept(Listener& listener) {
  auto on_accept = [this, &listener](beast::error_code ec, auto socket) {
    if (stopping) return;
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      spdlog::warn("API {}: accept failed: {}; retrying in {} ms", listener.description, ec.message(),
                   kAcceptBackoff.count());
      listener.backoff->expires_after(kAcceptBackoff);
      listener.backoff->async_wait([this, &listener](beast::error_code e) {
        if (!e && !stopping) Accept(listener);
      });
      return;
    }
    if constexpr (std::is_same_v<decltype(socket), net::ip::tcp::socket>) {
      // Each piece of an answer goes out at once: with Nagle's algorithm a
      // body written after its head waits for the client's delayed ACK
      // (40 ms on Linux) on every answer after a connection's first.
      beast::error_code ignored;
      socket.set_option(net::ip::tcp::no_delay(true), ignored);
    }
    std::optional<net::ip::address> peer;
    if constexpr (std::is_same_v<decltype(socket), net::ip::tcp::socket>) {
      beast::error_code gone;
      const auto endpoint = socket.remote_endpoint(gone);
      if (!gone) peer = endpoint.address();
    }
    OnAccepted(listener, Socket(std::move(socket)), std::move(peer));
    Accept(listener);
  };
  if (listener.tcp) listener.tcp->async_accept(on_accept);
  else listener.local->async_accept(on_accept);
}

bool HttpServer::Impl::CloseLongestWaiting(Listener& listener, const net::ip::address* peer) {
  for (Session* session : listener.waiting) {
    if (peer != nullptr && session->peer() != *peer) continue;
    session->Close();  // leaves listener.waiting
    return true;
  }
  return false;
}

void HttpServer::Impl::OnAccepted(Listener& listener, Socket socket, std::optional<net::ip::address> peer) {
  // A client address at its share of connections waiting for headers makes
  // room from its own: a flood from one address never crowds out another.
  if (peer) {
    const auto count = listener.waiting_from.find(*peer);
    if (count != listener.waiting_from.end() && count->second >= WaitingPerAddress())
      CloseLongestWaiting(listener, &*peer);
  }
  // A full listener makes room by closing the connection that has waited
  // longest for a request's headers; only when every connection is busy
  // (reading a body, handled, answering, streaming) is the new one refused.
  if (listener.open >= options.max_connections && !CloseLongestWaiting(listener, nullptr)) {
    // One non-blocking send of a canned answer: a refused client never holds the I/O thread.
    static const std::string kBody = [] {
      return DumpJson({{"error",
                        {{"code", "unavailable"},
                         {"message", "too many connections: this listener serves a bounded number at once "
                                     "([api] max-connections in the agent's config); retry shortly"}}}});
    }();
    const std::string answer = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                               "Connection: close\r\nContent-Length: " + std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
    ::send(socket.native_handle(), answer.data(), answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    beast::error_code ignored;
    socket.shutdown(net::socket_base::shutdown_send, ignored);
    socket.close(ignored);
    return;
  }
  auto session = std::make_shared<Session>(*this, listener, std::move(socket), std::move(peer));
  sessions.remove_if([](const std::weak_ptr<Session>& s) { return s.expired(); });
  sessions.push_back(session);
  session->Start();
}

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(options)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::ListenTcp(const std::string& host, int port, Dispatcher dispatcher, Gate gate, TlsSource tls) {
  const std::string where = host + ":" + std::to_string(port) + " (rpc-listen-addr)";
  beast::error_code ec;
  net::ip::tcp::resolver resolver(impl_->io);
  auto endpoints = resolver.resolve(host, std::to_string(port), net::ip::resolver_base::passive, ec);
  if (ec || endpoints.empty()) return Status::Unavailable("cannot resolve " + where + ": " + ec.message());
  const net::ip::tcp::endpoint endpoint = endpoints.begin()->endpoint();
  Listener& listener = impl_->listeners.emplace_back();
  listener.dispatcher = std::move(dispatcher);
  listener.gate = std::move(gate);
  listener.tls = std::move(tls);
  listener.backoff.emplace(impl_->io);
  auto& acceptor = listener.tcp.emplace(impl_->io);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    impl_->listeners.pop_back();
    return Status::Unavailable("cannot listen on " + where + ": " + ec.message() +
                               "; the port is in use or the address is not local; choose another rpc-listen-addr");
  }
  tcp_port_ = acceptor.local_endpoint().port();
  listener.description = host + ":" + std::to_string(tcp_port_);
  return Status::Ok();
}

Status HttpServer::ListenUnix(const std::string& path, Dispatcher dispatcher) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path))
    return Status::InvalidArgument("unix socket path " + path + " is longer than " +
                                   std::to_string(sizeof(addr.sun_path) - 1) +
                                   " bytes; choose a shorter ipc-base-path");
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket(AF_UNIX): ") + strerror(errno));
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ::unlink(path.c_str());  // a stale socket of an earlier run; the agent lock makes this safe
  const mode_t old_mask = ::umask(0177);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old_mask);
  if (rc != 0 || ::chmod(path.c_str(), 0600) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    std::string err = strerror(errno);
    ::close(fd);
    return Status::Unavailable("cannot listen on unix socket " + path + ": " + err);
  }
  Listener& listener = impl_->listeners.emplace_back();
  listener.description = "unix socket " + path;
  listener.dispatcher = std::move(dispatcher);
  listener.backoff.emplace(impl_->io);
  beast::error_code ec;
  listener.local.emplace(impl_->io).assign(net::local::stream_protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    impl_->listeners.pop_back();
    return Status::Internal("cannot serve unix socket " + path + ": " + ec.message());
  }
  return Status::Ok();
}

void HttpServer::Start() {
  const size_t quick_workers = static_cast<size_t>(std::max(1, impl_->options.quick_workers));
  impl_->quick.emplace(quick_workers);
  NamePoolThreads(*impl_->quick, quick_workers, "api-quick");
  impl_->long_lane.emplace("api-long", std::max(1, impl_->options.max_long_requests), impl_->options.long_idle,
                           impl_->options.make_thread);
  for (Listener& listener : impl_->listeners) impl_->Accept(listener);
  impl_->io_thread = std::thread([this] {
    NameThisThread("api-io");
    impl_->io.run();
  });
}

void HttpServer::Stop() {
  Impl& impl = *impl_;
  if (impl.stopping.exchange(true) || !impl.io_thread.joinable()) return;
  net::post(impl.io, [&impl] {
    beast::error_code ignored;
    for (Listener& listener : impl.listeners) {
      if (listener.tcp) listener.tcp->close(ignored);
      if (listener.local) listener.local->close(ignored);
      listener.backoff->cancel();
    }
    for (auto& weak : impl.sessions)
      if (auto session = weak.lock()) session->Close();
    impl.sessions.clear();
  });
  impl.in_flight->WaitIdle();  // streams see Gone and return; engine calls finish
  impl.quick->join();  // runs what is queued, then joins
  impl.long_lane.reset();  // its handlers have returned (WaitIdle): its threads end
  impl.guard.reset();
  impl.io_thread.join();
}

}  // namespace slotd::http
