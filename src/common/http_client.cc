#include "common/http_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <curl/curl.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "common/ascii.h"
#include "common/mutex.h"

namespace slotd {
namespace {

// How often Stream checks its stop flag while no data arrives.
constexpr int kStreamPollMs = 100;
// How much curl reads from the connection at a time.
constexpr long kReadBufferBytes = 64 * 1024;

// curl_global_init is not thread-safe; a function-local static runs it once.
// OpenSSL is told first not to clean itself up at exit: an upgraded https
// connection's bridge thread may still be running then.
void EnsureCurlInitialized() {
  static const CURLcode init = [] {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, nullptr);
    return curl_global_init(CURL_GLOBAL_DEFAULT);
  }();
  (void)init;
}

bool IsHttps(const std::string& url) { return url.rfind("https://", 0) == 0; }

// The host and port of a base URL ("https://[::1]:6001/x"): the port is the
// scheme's when the URL has none; an IPv6 host loses its brackets.
struct HostPort {
  std::string host;
  std::string port;
};
HostPort HostOf(const std::string& url) {
  const size_t scheme = url.find("://");
  std::string host_port = url.substr(scheme == std::string::npos ? 0 : scheme + 3);
  host_port = host_port.substr(0, host_port.find('/'));
  HostPort parts{host_port, IsHttps(url) ? "443" : "80"};
  const size_t bracket = host_port.rfind(']');
  const size_t colon = host_port.rfind(':');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    parts.host = host_port.substr(0, colon);
    parts.port = host_port.substr(colon + 1);
  }
  if (parts.host.size() >= 2 && parts.host.front() == '[' && parts.host.back() == ']')
    parts.host = parts.host.substr(1, parts.host.size() - 2);
  return parts;
}

// Connects to a unix socket path, or to the host of a base URL.
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
  const HostPort server = HostOf(target);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(server.host.c_str(), server.port.c_str(), &hints, &found); rc != 0)
    return Status::Unavailable(where + " failed: " + server.host + ": " + gai_strerror(rc));
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

// Whether the server of the http:// `base_url` answers TLS instead: for the
// message of a request it answered with nothing HTTP.
bool ServerSpeaksTls(const std::string& base_url) {
  Result<int> fd = Connect(false, base_url, "");
  return fd.ok() && AnswersTlsHandshake(*fd);
}

}  // namespace

// Idle curl handles of one client. A curl handle keeps its connection open
// after a request whose server keeps it alive, and curl_easy_reset keeps it
// too, so a handle taken from here sends its next request on that
// connection; curl connects again when the server has closed it meanwhile.
// A handle is reset as it comes back: an idle one points at nothing of the
// call that used it.
// At most kMaxIdle are kept: as many as the client's busiest callers use at
// once. Each costs three descriptors (its connection, and the socket pair of
// curl's internal multi handle), so a handle idle for kMaxIdleTime is cleaned
// up at the next Take or Give: a burst of parallel calls leaves no
// connections behind once it has passed, and a steady caller keeps reusing
// the most recent handle.
class CurlHandlePool {
 public:
  static constexpr size_t kMaxIdle = 8;
  static constexpr std::chrono::seconds kMaxIdleTime{5};

  ~CurlHandlePool() {
    MutexLock lock(mutex_);
    for (const Idle& idle : idle_) curl_easy_cleanup(idle.easy);
  }

  // The most recently given idle handle, or a new one; null when curl
  // cannot allocate one.
  CURL* Take() {
    CURL* easy = nullptr;
    std::vector<CURL*> expired;
    {
      MutexLock lock(mutex_);
      expired = TakeExpired();
      if (!idle_.empty()) {
        easy = idle_.back().easy;
        idle_.pop_back();
      }
    }
    for (CURL* old : expired) curl_easy_cleanup(old);
    return easy != nullptr ? easy : curl_easy_init();
  }

  // Keeps `easy`, reset, for a later call, or cleans it up when kMaxIdle are kept.
  void Give(CURL* easy) {
    curl_easy_reset(easy);
    std::vector<CURL*> expired;
    {
      MutexLock lock(mutex_);
      expired = TakeExpired();
      if (idle_.size() < kMaxIdle) {
        idle_.push_back({easy, std::chrono::steady_clock::now()});
        easy = nullptr;
      }
    }
    for (CURL* old : expired) curl_easy_cleanup(old);
    if (easy != nullptr) curl_easy_cleanup(easy);
  }

 private:
  struct Idle {
    CURL* easy;
    std::chrono::steady_clock::time_point since;  // when it was given back
  };

  // Removes the handles idle for kMaxIdleTime or longer and returns them,
  // to be cleaned up without the lock (closing their connections).
  std::vector<CURL*> TakeExpired() REQUIRES(mutex_) {
    std::vector<CURL*> expired;
    const auto limit = std::chrono::steady_clock::now() - kMaxIdleTime;
    // Given back in order, so the oldest are at the front.
    while (!idle_.empty() && idle_.front().since <= limit) {
      expired.push_back(idle_.front().easy);
      idle_.erase(idle_.begin());
    }
    return expired;
  }

  Mutex mutex_;
  std::vector<Idle> idle_ GUARDED_BY(mutex_);  // oldest first
};

namespace {

// Gives a handle back to its pool, or cleans it up when it has none.
struct EasyDeleter {
  CurlHandlePool* pool = nullptr;
  void operator()(CURL* easy) const {
    if (pool != nullptr) {
      pool->Give(easy);
    } else {
      curl_easy_cleanup(easy);
    }
  }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using HeaderList = std::unique_ptr<curl_slist, SlistDeleter>;

struct MultiDeleter {
  void operator()(CURLM* multi) const { curl_multi_cleanup(multi); }
};
using MultiHandle = std::unique_ptr<CURLM, MultiDeleter>;

// An easy handle set up for one request, with what must outlive it.
struct PreparedRequest {
  EasyHandle easy;
  HeaderList headers;
  char error[CURL_ERROR_SIZE] = {0};
  std::optional<TlsPeerCheck> check;  // of an https request's handshake
};

// curl's hook into a new https connection's OpenSSL context: the pin.
CURLcode InstallPeerCheck(CURL*, void* ssl_ctx, void* check) {
  static_cast<TlsPeerCheck*>(check)->Install(static_cast<SSL_CTX*>(ssl_ctx));
  return CURLE_OK;
}

bool MethodCarriesBody(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH";
}

// Text for a failed transfer: curl's short reason and, when it has one, its
// detailed message.
std::string CurlErrorText(CURLcode code, const char* detail) {
  std::string text = curl_easy_strerror(code);
  if (detail != nullptr && detail[0] != '\0') {
    std::string d = detail;
    while (!d.empty() && (d.back() == '\n' || d.back() == '\r')) d.pop_back();
    if (d != text) text += " (" + d + ")";
  }
  return text;
}

// The status of a transfer to the base URL `target` that failed with
// `code`: TLS's failures and a server of the other scheme said in words,
// the rest with curl's reason.
Status TransferFailure(CURLcode code, const PreparedRequest& req, bool unix_socket, const std::string& target,
                       const std::string& where) {
  const std::string detail = CurlErrorText(code, req.error);
  if (req.check) {
    if (code == CURLE_SSL_CACERT_BADFILE || code == CURLE_SSL_CERTPROBLEM)
      return Status::InvalidArgument(where + ": cannot use the TLS files given: " + detail);
    // A read or write after the handshake failed (TLS 1.3 refuses a client
    // certificate so), or the handshake did.
    const bool in_handshake = code != CURLE_RECV_ERROR && code != CURLE_SEND_ERROR;
    if (std::string words = req.check->Explain(detail, in_handshake); !words.empty())
      return Status::Unavailable(where + " failed: " + words);
  } else if (!unix_socket && (code == CURLE_GOT_NOTHING || code == CURLE_WEIRD_SERVER_REPLY ||
                              code == CURLE_RECV_ERROR || code == CURLE_UNSUPPORTED_PROTOCOL) &&
             ServerSpeaksTls(target)) {
    return Status::Unavailable(where + " failed: the server speaks https: use https://");
  }
  return Status::Unavailable(where + " failed: " + detail);
}

}  // namespace

HttpClient::HttpClient(bool unix_socket, std::string target, std::string description)
    : unix_socket_(unix_socket),
      target_(std::move(target)),
      description_(std::move(description)),
      idle_handles_(std::make_shared<CurlHandlePool>()) {}

HttpClient HttpClient::Unix(std::string socket_path) {
  std::string description = "unix socket " + socket_path;
  return HttpClient(true, std::move(socket_path), std::move(description));
}

HttpClient HttpClient::Tcp(std::string base_url) {
  while (!base_url.empty() && base_url.back() == '/') base_url.pop_back();
  std::string description = base_url;
  return HttpClient(false, std::move(base_url), std::move(description));
}

void HttpClient::SetBearerToken(std::string token) { bearer_token_ = std::move(token); }

void HttpClient::SetTls(TlsClientOptions options) {
  tls_ = std::move(options);
  idle_handles_ = std::make_shared<CurlHandlePool>();  // connections made under other settings stay with the copies
}

namespace {

// Sets up `req` for an https request as `tls` says. kInternal when this
// curl cannot hook into OpenSSL to check a pinned fingerprint.
Status PrepareTls(PreparedRequest& req, const TlsClientOptions& tls, const std::string& target) {
  CURL* easy = req.easy.get();
  req.check.emplace(tls, HostOf(target).host);
  curl_easy_setopt(easy, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
  if (!tls.cert_file.empty()) {
    curl_easy_setopt(easy, CURLOPT_SSLCERT, tls.cert_file.c_str());
    curl_easy_setopt(easy, CURLOPT_SSLKEY, (tls.key_file.empty() ? tls.cert_file : tls.key_file).c_str());
  }
  if (tls.fingerprint.empty()) {
    if (!tls.ca_file.empty()) curl_easy_setopt(easy, CURLOPT_CAINFO, tls.ca_file.c_str());
    return Status::Ok();
  }
  // Pinned: the check installed in each new connection's context is the
  // only one; no CA, host name, or session resumed without it.
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYPEER, 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_VERIFYHOST, 0L);
  curl_easy_setopt(easy, CURLOPT_SSL_SESSIONID_CACHE, 0L);
  if (curl_easy_setopt(easy, CURLOPT_SSL_CTX_FUNCTION, &InstallPeerCheck) != CURLE_OK ||
      curl_easy_setopt(easy, CURLOPT_SSL_CTX_DATA, &*req.check) != CURLE_OK)
    return Status::Internal("this libcurl cannot check a pinned fingerprint (it is not built with OpenSSL)");
  return Status::Ok();
}

// Builds an easy handle for `method` `path` with `body` against the target,
// taken from `pool` (and given back to it) when there is one; `tls` applies
// to an https target. kInternal when curl cannot allocate a handle or
// cannot check a pinned fingerprint.
Result<std::unique_ptr<PreparedRequest>> Prepare(CurlHandlePool* pool, bool unix_socket, const std::string& target,
                                                 const TlsClientOptions& tls, const std::string& bearer_token,
                                                 const std::string& method, const std::string& path,
                                                 const std::string& body,
                                                 const std::vector<std::string>& extra_headers) {
  EnsureCurlInitialized();
  auto req = std::make_unique<PreparedRequest>();
  req->easy = EasyHandle(pool != nullptr ? pool->Take() : curl_easy_init(), EasyDeleter{pool});
  if (!req->easy) return Status::Internal("cannot allocate a curl handle");
  CURL* easy = req->easy.get();
  if (!unix_socket && IsHttps(target))
    if (Status s = PrepareTls(*req, tls, target); !s.ok()) return s;

  std::string url;
  if (unix_socket) {
    curl_easy_setopt(easy, CURLOPT_UNIX_SOCKET_PATH, target.c_str());
    url = "http://localhost" + path;
  } else {
    url = target + path;
    curl_easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  }
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));  // also over TLS: no HTTP/2
  curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  // A large body (a list of a thousand kernels, an engine's list) in 64 KiB
  // reads rather than curl's default 16 KiB: a quarter of the calls.
  curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, kReadBufferBytes);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, req->error);

  curl_slist* headers = nullptr;
  // Never wait for "100 Continue" before sending a large body.
  headers = curl_slist_append(headers, "Expect:");
  if (!bearer_token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + bearer_token).c_str());
  }
  for (const std::string& header : extra_headers) headers = curl_slist_append(headers, header.c_str());
  // No body: suppress curl's default form Content-Type on a body-less POST.
  headers =
      curl_slist_append(headers, body.empty() ? "Content-Type:" : "Content-Type: application/json");
  req->headers.reset(headers);
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);

  if (!body.empty() || MethodCarriesBody(method)) {
    curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body.c_str());
  }
  return std::move(req);
}

// The most of a 2xx body's declared length (Content-Length) that Request
// sets aside before the body arrives; a longer body grows past it as it comes.
constexpr curl_off_t kMaxBodyReserve = 64 << 20;

// Where a transfer's body goes: a 2xx body to `on_chunk` or, when that is
// null, whole into `whole_body`; a non-2xx body's start to `error_body`.
struct ChunkTarget {
  CURL* easy = nullptr;
  const std::function<bool(std::string_view)>* on_chunk = nullptr;
  std::string* whole_body = nullptr;
  std::string* error_body = nullptr;
};

size_t DeliverChunk(char* data, size_t size, size_t count, void* user) {
  auto* target = static_cast<ChunkTarget*>(user);
  const size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(target->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status < 200 || status >= 300) {
    if (target->error_body->size() < kMaxHttpErrorBody)
      target->error_body->append(data, std::min(n, kMaxHttpErrorBody - target->error_body->size()));
    return n;
  }
  if (target->on_chunk) return (*target->on_chunk)(std::string_view(data, n)) ? n : 0;
  if (target->whole_body->empty()) {
    // Sized once from the declared length: a body grown piece by piece is
    // copied again at each doubling, into memory never touched before.
    curl_off_t declared = -1;
    curl_easy_getinfo(target->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &declared);
    if (declared > 0) target->whole_body->reserve(static_cast<size_t>(std::min(declared, kMaxBodyReserve)));
  }
  target->whole_body->append(data, n);
  return n;
}

}  // namespace

Result<HttpResponse> HttpClient::Request(const std::string& method,
                                         const std::string& path_and_query, const std::string& body,
                                         std::chrono::milliseconds timeout,
                                         const std::vector<std::string>& headers) const {
  HttpResponse response;
  auto result = Transfer(method, path_and_query, body, timeout, nullptr, &response.body, nullptr, headers);
  if (!result.ok()) return result.status();
  if (!result->body.empty()) response.body = std::move(result->body);  // a non-2xx body
  response.status = result->status;
  return response;
}

Result<HttpResponse> HttpClient::RequestStreamed(const std::string& method, const std::string& path_and_query,
                                                 const std::string& body, std::chrono::milliseconds timeout,
                                                 const std::function<bool(std::string_view chunk)>& on_chunk,
                                                 const std::atomic<bool>* stop,
                                                 const std::vector<std::string>& headers) const {
  return Transfer(method, path_and_query, body, timeout, &on_chunk, nullptr, stop, headers);
}

namespace {

// curl's progress callback for a transfer with a stop flag: non-zero aborts
// it. curl calls it often while data flows and about once a second while none does.
int AbortWhenStopped(void* stop, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  return static_cast<const std::atomic<bool>*>(stop)->load() ? 1 : 0;
}

}  // namespace

Result<HttpResponse> HttpClient::Transfer(const std::string& method, const std::string& path_and_query,
                                          const std::string& body, std::chrono::milliseconds timeout,
                                          const std::function<bool(std::string_view chunk)>* on_chunk,
                                          std::string* whole_body, const std::atomic<bool>* stop,
                                          const std::vector<std::string>& headers) const {
  const std::string where = method + " " + path_and_query + " on " + description_;
  auto prepared =
      Prepare(idle_handles_.get(), unix_socket_, target_, tls_, bearer_token_, method, path_and_query, body, headers);
  if (!prepared.ok()) return prepared.status().WithPrefix(where);
  const std::unique_ptr<PreparedRequest>& req = *prepared;
  CURL* easy = req->easy.get();

  HttpResponse response;
  ChunkTarget target{easy, on_chunk, whole_body, &response.body};
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &DeliverChunk);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &target);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, timeout.count())));
  if (stop != nullptr) {
    curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, &AbortWhenStopped);
    curl_easy_setopt(easy, CURLOPT_XFERINFODATA, const_cast<std::atomic<bool>*>(stop));
    curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
  }

  const CURLcode code = curl_easy_perform(easy);
  if (code == CURLE_OPERATION_TIMEDOUT) {
    // Sent the request: the server was too slow. Did not: it cannot be reached.
    long request_bytes = 0;
    curl_easy_getinfo(easy, CURLINFO_REQUEST_SIZE, &request_bytes);
    if (request_bytes > 0) {
      return Status::DeadlineExceeded(where + ": no complete response within " +
                                      std::to_string(timeout.count()) + " ms");
    }
  }
  if (code == CURLE_ABORTED_BY_CALLBACK && stop != nullptr && stop->load())
    return Status::Unavailable(where + ": abandoned, its caller stopped waiting");
  if (code != CURLE_OK) return TransferFailure(code, *req, unix_socket_, target_, where);
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

namespace {

// State shared by Stream and its curl callbacks; lives on Stream's stack.
struct StreamState {
  CURL* easy = nullptr;
  const std::function<void()>* on_connected = nullptr;
  const std::function<bool(std::string_view)>* on_chunk = nullptr;
  long status = 0;         // the final response's status, once headers ended
  bool connected = false;  // a 2xx response's headers have arrived
  bool stopped_by_callback = false;
  std::string error_body;  // start of a non-2xx body
};

size_t StreamHeader(char* data, size_t size, size_t count, void* user) {
  auto* state = static_cast<StreamState*>(user);
  const std::string_view line(data, size * count);
  if (line == "\r\n" || line == "\n") {  // the end of one header block
    long status = 0;
    curl_easy_getinfo(state->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 200) {  // 1xx blocks are followed by the real one
      state->status = status;
      if (status < 300 && !state->connected) {
        state->connected = true;
        if (*state->on_connected) (*state->on_connected)();
      }
    }
  }
  return size * count;
}

size_t StreamBody(char* data, size_t size, size_t count, void* user) {
  auto* state = static_cast<StreamState*>(user);
  const size_t n = size * count;
  if (!state->connected) {
    if (state->error_body.size() < kMaxHttpErrorBody) {
      state->error_body.append(data, std::min(n, kMaxHttpErrorBody - state->error_body.size()));
    }
    return n;
  }
  if (!(*state->on_chunk)(std::string_view(data, n))) {
    state->stopped_by_callback = true;
    return 0;  // fewer bytes than given: curl aborts the transfer
  }
  return n;
}

}  // namespace

Status HttpClient::Stream(const std::string& method, const std::string& path_and_query,
                          const std::string& body, const std::function<void()>& on_connected,
                          const std::function<bool(std::string_view chunk)>& on_chunk,
                          const std::atomic<bool>& stop, bool end_is_ok,
                          const std::vector<std::string>& headers) const {
  const std::string where = method + " " + path_and_query + " on " + description_;
  auto prepared = Prepare(nullptr, unix_socket_, target_, tls_, bearer_token_, method, path_and_query, body, headers);
  if (!prepared.ok()) return prepared.status().WithPrefix(where);
  const std::unique_ptr<PreparedRequest>& req = *prepared;
  MultiHandle multi(curl_multi_init());
  if (!multi) return Status::Internal(where + ": cannot allocate a curl handle");
  CURL* easy = req->easy.get();

  StreamState state;
  state.easy = easy;
  state.on_connected = &on_connected;
  state.on_chunk = &on_chunk;
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &StreamHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &state);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &StreamBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &state);

  curl_multi_add_handle(multi.get(), easy);
  CURLcode result = CURLE_OK;
  bool done = false;
  while (!done) {
    if (stop.load()) break;
    int running = 0;
    const CURLMcode mc = curl_multi_perform(multi.get(), &running);
    if (mc != CURLM_OK) {
      curl_multi_remove_handle(multi.get(), easy);
      return Status::Internal(where + ": curl_multi_perform failed: " + curl_multi_strerror(mc));
    }
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi.get(), &queued)) {
      if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
        result = msg->data.result;
        done = true;
      }
    }
    if (!done && !stop.load()) curl_multi_poll(multi.get(), nullptr, 0, kStreamPollMs, nullptr);
  }
  curl_multi_remove_handle(multi.get(), easy);

  if (!done || state.stopped_by_callback) return Status::Ok();
  if (result != CURLE_OK) return TransferFailure(result, *req, unix_socket_, target_, where);
  if (!state.connected) {
    return StatusForHttpError(
        state.status, where + ": HTTP " + std::to_string(state.status) + ": " + state.error_body);
  }
  if (end_is_ok) return Status::Ok();
  return Status::Unavailable(where + ": the server ended the stream");
}

Status StatusForHttpError(long http_status, std::string message) {
  switch (http_status) {
    case 400:
      return Status::InvalidArgument(std::move(message));
    case 401:
    case 403:
      return Status::FailedPrecondition(std::move(message));
    case 404:
      return Status::NotFound(std::move(message));
    case 409:
      return Status::Conflict(std::move(message));
    case 422:
      return Status::ResourceExhausted(std::move(message));
    case 503:
      return Status::Unavailable(std::move(message));
    case 504:
      return Status::DeadlineExceeded(std::move(message));
    default:
      // Any other 4xx refused what was asked: the asker's error, never the server's.
      if (http_status >= 400 && http_status < 500) return Status::InvalidArgument(std::move(message));
      return Status::Internal(std::move(message));
  }
}

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 && HexValue(text[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else {
      out += plus_is_space && text[i] == '+' ? ' ' : text[i];
    }
  }
  return out;
}

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' ||
        u == '.' || u == '_' || u == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0xF];
    }
  }
  return out;
}

}  // namespace slotd

// ---- Upgrade: a request that turns its connection into a raw stream.

namespace slotd {
namespace {

// The most an answer's head (status line and headers) may take.
constexpr size_t kMaxHead = 64 * 1024;

using Deadline = std::chrono::steady_clock::time_point;

// The connection of one Upgrade: a blocking socket, or TLS over one. Its
// errors say what failed, not where.
class UpgradeLink {
 public:
  explicit UpgradeLink(int fd) : fd_(fd) {}
  explicit UpgradeLink(TlsConnection tls) : tls_(std::move(tls)) {}
  ~UpgradeLink() {
    if (fd_ >= 0) ::close(fd_);
  }
  UpgradeLink(const UpgradeLink&) = delete;
  UpgradeLink& operator=(const UpgradeLink&) = delete;

  Status SendAll(std::string_view bytes, Deadline deadline) {
    if (tls_) return tls_->Write(bytes, deadline);
    while (!bytes.empty()) {
      if (!WaitForSocket(fd_, POLLOUT, deadline)) return Status::DeadlineExceeded("could not send the request in time");
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return Status::Unavailable(ErrnoText(errno));
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }

  // Appends what arrives next to `out`; 0 when the server closed the connection.
  Result<size_t> ReadSome(std::string& out, Deadline deadline) {
    if (tls_) return tls_->Read(out, deadline);
    if (!WaitForSocket(fd_, POLLIN, deadline)) return Status::DeadlineExceeded("no answer in time");
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0) return Status::Unavailable(ErrnoText(errno));
    out.append(chunk, static_cast<size_t>(n));
    return static_cast<size_t>(n);
  }

  // The caller's socket: this one, or over TLS the end of a bridge's socket pair.
  Result<int> Release() {
    if (tls_) {
      TlsConnection tls = std::move(*tls_);
      tls_.reset();
      return std::move(tls).Bridge();
    }
    return std::exchange(fd_, -1);
  }

 private:
  int fd_ = -1;
  std::optional<TlsConnection> tls_;
};

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
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  EnsureCurlInitialized();  // OpenSSL's too
  Result<int> connected = Connect(unix_socket_, target_, where);
  if (!connected.ok()) return connected.status();
  std::optional<UpgradeLink> link;
  if (!unix_socket_ && IsHttps(target_)) {
    auto tls = TlsConnection::Handshake(*connected, tls_, HostOf(target_).host, deadline);
    if (!tls.ok()) return tls.status().WithPrefix(where + " failed");
    link.emplace(std::move(*tls));
  } else {
    link.emplace(*connected);
  }
  // Whether a plain request got nothing HTTP back because the server speaks
  // https: its answer is a TLS record (an alert), or it closed without one
  // and answers a TLS handshake.
  const bool plain_tcp = !unix_socket_ && !IsHttps(target_);
  auto tls_record = [](std::string_view bytes) {
    return bytes.size() >= 2 && (bytes[0] == 0x15 || bytes[0] == 0x16) && bytes[1] == 0x03;
  };
  const std::string use_https = where + " failed: the server speaks https: use https://";

  std::string request = method + " " + path_and_query + " HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\n"
                        "Upgrade: tcp\r\n";
  if (!bearer_token_.empty()) request += "Authorization: Bearer " + bearer_token_ + "\r\n";
  for (const std::string& header : headers) request += header + "\r\n";
  if (!body.empty()) request += "Content-Type: application/json\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  if (Status s = link->SendAll(request, deadline); !s.ok()) return s.WithPrefix(where + " failed");

  std::string received;
  size_t head_end = std::string::npos;
  while ((head_end = received.find("\r\n\r\n")) == std::string::npos) {
    if (received.size() > kMaxHead) return Status::Internal(where + ": the answer's head is over 64 KiB");
    auto read = link->ReadSome(received, deadline);
    if (!read.ok() && read.status().code() == Status::Code::kDeadlineExceeded)
      return Status::DeadlineExceeded(where + ": no answer within " + std::to_string(timeout.count()) + " ms");
    if (!read.ok()) return read.status().WithPrefix(where + " failed");
    if (*read == 0)
      return Status::Unavailable(plain_tcp && (tls_record(received) || ServerSpeaksTls(target_))
                                     ? use_https
                                     : where + " failed: the connection closed before an answer");
  }
  // The head, read by Beast's parser; its body (an error's) is read below.
  boost::beast::http::response_parser<boost::beast::http::empty_body> parser;
  parser.header_limit(static_cast<std::uint32_t>(kMaxHead));
  parser.skip(true);
  boost::beast::error_code error;
  parser.put(boost::asio::buffer(received.data(), head_end + 4), error);
  if (error || !parser.is_header_done()) {
    if (plain_tcp && tls_record(received)) return Status::Unavailable(use_https);
    return Status::Internal(where + ": the answer's head is not HTTP: " + error.message());
  }
  UpgradedConnection upgraded;
  upgraded.early = received.substr(head_end + 4);
  const auto& answer = parser.get();
  const long status = static_cast<long>(answer.result_int());
  for (const auto& field : answer)
    upgraded.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  if (status == 101 || (accept_200 && status == 200)) {
    auto fd = link->Release();
    if (!fd.ok()) return fd.status().WithPrefix(where);
    upgraded.fd = *fd;
    return upgraded;
  }
  // An error: its body, as much as comes before the deadline.
  std::string error_body = upgraded.early;
  const uint64_t length = parser.content_length().value_or(0);
  while (error_body.size() < length && error_body.size() < kMaxHttpErrorBody) {
    auto read = link->ReadSome(error_body, deadline);
    if (!read.ok() || *read == 0) break;
  }
  return StatusForHttpError(status, where + ": HTTP " + std::to_string(status) + ": " + error_body);
}

}  // namespace slotd
