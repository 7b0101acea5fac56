// HttpClient: a small HTTP/1.1 client on libcurl, for the Docker Engine API
// (over its unix socket), for etcd, and for slotctl talking to an agent
// (unix socket or TCP, plain or https). Two kinds of call: Request (one
// exchange, the whole body returned) and Stream (a long-lived response
// delivered chunk by chunk until the caller stops it); and Upgrade, which
// turns a connection into a raw stream.
//
// Thread-safety: a const HttpClient may be used from any number of threads at
// once; every call uses a curl handle of its own while it runs. Request and
// RequestStreamed keep a few handles between calls (copies of a client share
// them), each with its connection open, so that a later call need not
// connect again; a handle unused for 5 s is closed at a later call. Stream
// and Upgrade always connect anew. SetBearerToken and SetTls
// must not run concurrently with calls.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/tls_client.h"

namespace slotd {

// The most of an error answer's body kept and quoted in a Status message.
inline constexpr size_t kMaxHttpErrorBody = 64 * 1024;

// One complete HTTP response. Any status code counts as a response; only
// transport failures are errors.
struct HttpResponse {
  long status = 0;
  std::string body;
};

// A connection handed over by an HTTP upgrade: raw bytes both ways.
struct UpgradedConnection {
  int fd = -1;  // a connected, blocking socket (over https, one end of a socket pair); the caller closes it
  std::vector<std::pair<std::string, std::string>> headers;  // of the answer
  std::string early;  // bytes that came after the answer's head: the start of the stream

  // The first header named `name` (case-insensitively); "" when absent.
  std::string Header(std::string_view name) const;
};

class CurlHandlePool;  // http_client.cc

class HttpClient {
 public:
  // A client for the server listening on the unix socket `socket_path`.
  static HttpClient Unix(std::string socket_path);
  // A client for the server at `base_url` ("http://127.0.0.1:6001", or
  // "https://..." for TLS, checked as SetTls says; a trailing "/" is ignored).
  static HttpClient Tcp(std::string base_url);

  // Sends "Authorization: Bearer <token>" with every later call; empty: none.
  void SetBearerToken(std::string token);

  // How later calls to an https:// base URL check the server and prove
  // themselves (without it: the system's CAs, no client certificate). They
  // connect anew: no connection kept from before is reused. Failures of the
  // handshake are kUnavailable saying what was wrong (TlsPeerCheck::Explain);
  // a CA, certificate or key file that cannot be used is kInvalidArgument
  // naming it.
  void SetTls(TlsClientOptions options);

  // Where this client connects, for messages: "unix socket /run/x.sock" or
  // the base URL.
  const std::string& Describe() const { return description_; }

  // Sends `method` (GET, POST, PUT, DELETE, ...) to `path_and_query`
  // ("/v1/kernels?x=1"; the caller escapes it, see UrlEncode) and waits for
  // the whole response. A non-empty `body` is sent as application/json; POST,
  // PUT and PATCH always carry a Content-Length (0 for no body).
  // `headers` ("Name: value") are sent besides the client's own.
  // Errors: kUnavailable when the server cannot be reached or the connection
  // breaks (the message names the target and curl's reason, or says that
  // the server speaks https to an http:// URL, or plain HTTP to https://);
  // kDeadlineExceeded when the exchange takes longer than `timeout`.
  Result<HttpResponse> Request(const std::string& method, const std::string& path_and_query,
                               const std::string& body = "",
                               std::chrono::milliseconds timeout = std::chrono::seconds(60),
                               const std::vector<std::string>& headers = {}) const;

  // Like Request, but hands the body of a 2xx response to `on_chunk` piece by
  // piece instead of keeping it (the returned body is empty then; a non-2xx
  // body is kept, up to 64 KiB, for the error message). `on_chunk` returning
  // false aborts the transfer: kUnavailable. So does `stop`, when given,
  // becoming true (noticed within about a second, also while no data flows).
  Result<HttpResponse> RequestStreamed(const std::string& method, const std::string& path_and_query,
                                       const std::string& body, std::chrono::milliseconds timeout,
                                       const std::function<bool(std::string_view chunk)>& on_chunk,
                                       const std::atomic<bool>* stop = nullptr,
                                       const std::vector<std::string>& headers = {}) const;

  // Sends `method` `path_and_query` with `body` (JSON, when not empty)
  // asking to turn the connection into a raw stream (Connection: Upgrade,
  // Upgrade: tcp, and `headers`) and returns the connection once the server
  // answered 101 (or 200 with `accept_200`: older Docker engines answer so).
  // Another status is the error StatusForHttpError gives, with the body;
  // kUnavailable when the server cannot be reached; kDeadlineExceeded when
  // the answer's head takes longer than `timeout`. Over https the handshake
  // is made here (TlsConnection) and the connection handed over through a
  // bridge thread: UpgradedConnection::fd behaves as the plain socket would.
  Result<UpgradedConnection> Upgrade(const std::string& method, const std::string& path_and_query,
                                     const std::string& body, const std::vector<std::string>& headers,
                                     std::chrono::milliseconds timeout, bool accept_200 = false) const;

  // Sends a request and delivers the body of a 2xx response as it arrives:
  // `on_connected` is called once, when the response headers have arrived
  // (before any chunk, even if no body byte ever comes), then `on_chunk` for
  // each piece of the body, split wherever the network split it. No timeout.
  // Returns OK when `stop` becomes true (noticed within ~100 ms, also while no
  // data flows) or when `on_chunk` returns false; kUnavailable when the
  // connection fails, breaks or the server ends the body; for a non-2xx
  // status, the status StatusForHttpError gives, with the response body in
  // the message (on_connected is not called then). With `end_is_ok`, the
  // server ending the body is OK too (a response that is long, not endless).
  // The callbacks run on the calling thread. `headers` as for Request.
  Status Stream(const std::string& method, const std::string& path_and_query,
                const std::string& body, const std::function<void()>& on_connected,
                const std::function<bool(std::string_view chunk)>& on_chunk,
                const std::atomic<bool>& stop, bool end_is_ok = false,
                const std::vector<std::string>& headers = {}) const;

 private:
  HttpClient(bool unix_socket, std::string target, std::string description);

  // Request and RequestStreamed: a 2xx body goes to `on_chunk`, or, when it
  // is null, into `whole_body`, sized from its declared length up front; a
  // non-2xx body's start is the returned body. A non-null `stop` aborts it
  // once true.
  Result<HttpResponse> Transfer(const std::string& method, const std::string& path_and_query,
                                const std::string& body, std::chrono::milliseconds timeout,
                                const std::function<bool(std::string_view chunk)>* on_chunk, std::string* whole_body,
                                const std::atomic<bool>* stop, const std::vector<std::string>& headers) const;

  bool unix_socket_;  // true: target_ is a socket path; false: a base URL
  std::string target_;
  std::string description_;  // see Describe()
  std::string bearer_token_;
  TlsClientOptions tls_;  // for an https:// target_
  // Idle curl handles with their connections, shared by the copies of this client.
  std::shared_ptr<CurlHandlePool> idle_handles_;
};

// Maps an HTTP error status to a Status carrying `message`: 400 ->
// kInvalidArgument, 401/403 -> kFailedPrecondition, 404 -> kNotFound, 409 ->
// kConflict, 422 -> kResourceExhausted, 503 -> kUnavailable, 504 ->
// kDeadlineExceeded, anything else -> kInternal.
Status StatusForHttpError(long http_status, std::string message);

// Percent-encodes everything but unreserved characters (RFC 3986: A-Z a-z
// 0-9 - . _ ~), for one query value or path segment.
std::string UrlEncode(std::string_view text);

// Decodes %XX escapes (and, with `plus_is_space`, '+' as a space, as in a
// query); a malformed escape stays as written. Any bytes may come out.
std::string PercentDecode(std::string_view text, bool plus_is_space = false);

}  // namespace slotd
