#include "common/tls_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <system_error>
#include <thread>
#include <utility>

#include "common/thread_name.h"

namespace slotd {
namespace {

// The most plaintext the bridge holds in each direction.
constexpr size_t kBridgeBuffer = 64 * 1024;
// The longest the bridge's poll waits before looking at both sides again.
constexpr int kBridgeTickMs = 1000;

// "AB:CD:..." of 32 bytes.
std::string HexPairs(const unsigned char* bytes, size_t size) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string text;
  for (size_t i = 0; i < size; ++i) {
    if (i > 0) text += ':';
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 0xF];
  }
  return text;
}

// `text` (IsSha256Fingerprint) as "AB:CD:..."; "" when it is not one.
std::string NormalizedFingerprint(std::string_view text) {
  std::string digits;
  for (const char c : text) {
    if (c == ':') continue;
    if (!std::isxdigit(static_cast<unsigned char>(c))) return "";
    digits += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  if (digits.size() != 64) return "";
  std::string pairs;
  for (size_t i = 0; i < digits.size(); i += 2) pairs += (i > 0 ? ":" : "") + digits.substr(i, 2);
  return pairs;
}

std::string LeafFingerprint(X509* cert) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (X509_digest(cert, EVP_sha256(), digest, &size) != 1) return "";
  return HexPairs(digest, size);
}

// The index of the TlsPeerCheck in an SSL_CTX's extra data.
int PeerCheckIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

bool IsIpAddress(const std::string& host) {
  unsigned char address[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), address) == 1 || inet_pton(AF_INET6, host.c_str(), address) == 1;
}

bool Contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// OpenSSL's reasons for the last failure on this thread, and the
// certificate check's when it failed: "error:...:certificate verify failed:
// unable to get local issuer certificate".
std::string OpenSslFailure(const SSL* ssl) {
  std::string text;
  while (const unsigned long error = ERR_get_error()) {
    char reason[256];
    ERR_error_string_n(error, reason, sizeof reason);
    text += (text.empty() ? "" : "; ") + std::string(reason);
  }
  if (ssl != nullptr) {
    const long verified = SSL_get_verify_result(ssl);
    if (verified != X509_V_OK)
      text += (text.empty() ? "" : ": ") + std::string(X509_verify_cert_error_string(verified));
  }
  return text;
}

// Blocks SIGPIPE on the calling thread while it lives: OpenSSL writes to its
// socket with write(), which raises SIGPIPE when the server is gone. A
// SIGPIPE raised meanwhile is taken back before the old mask returns.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~SigpipeBlocked() {
    if (!was_pending_) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const timespec now{0, 0};
      while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t old_;
  bool was_pending_ = false;
};

// Loads the CAs of `options` (the system's when none) into `ctx`.
// kInvalidArgument naming the file and OpenSSL's reason when they cannot be read.
Status LoadCas(SSL_CTX* ctx, const TlsClientOptions& options) {
  const bool loaded = options.ca_file.empty()
                            ? SSL_CTX_set_default_verify_paths(ctx) == 1
                            : SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) == 1;
  if (loaded) return Status::Ok();
  return Status::InvalidArgument("cannot read the CA certificates of " +
                                 (options.ca_file.empty() ? "the system" : options.ca_file) + " (" +
                                 options.ca_setting + "): " + OpenSslFailure(nullptr));
}

// Loads the client certificate of `options`, when it has one, into `ctx`.
// kInvalidArgument naming the file and OpenSSL's reason when it cannot be used.
Status LoadClientCertificate(SSL_CTX* ctx, const TlsClientOptions& options) {
  if (options.cert_file.empty()) return Status::Ok();
  const std::string& key = options.key_file.empty() ? options.cert_file : options.key_file;
  if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) != 1)
    return Status::InvalidArgument("cannot read the client certificate " + options.cert_file + " (" +
                                   options.cert_setting + "): " + OpenSslFailure(nullptr));
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1)
    return Status::InvalidArgument("cannot use the private key " + key + " with the client certificate " +
                                   options.cert_file + " (" + options.cert_setting + "): " + OpenSslFailure(nullptr));
  return Status::Ok();
}

}  // namespace

bool IsSha256Fingerprint(std::string_view text) { return !NormalizedFingerprint(text).empty(); }

bool WaitForSocket(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

TlsPeerCheck::TlsPeerCheck(const TlsClientOptions& options, std::string host)
    : options_(options), host_(std::move(host)), pinned_(NormalizedFingerprint(options.fingerprint)) {}

void TlsPeerCheck::Install(SSL_CTX* ctx) {
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  if (options_.fingerprint.empty()) return;
  SSL_CTX_set_ex_data(ctx, PeerCheckIndex(), this);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, &TlsPeerCheck::VerifyPinned);
}

int TlsPeerCheck::VerifyPinned(int, X509_STORE_CTX* store) {
  auto* ssl = static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  auto* check = ssl == nullptr
                    ? nullptr
                    : static_cast<TlsPeerCheck*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), PeerCheckIndex()));
  if (check == nullptr) return 0;
  // Only the leaf counts: the chain above it, and whoever signed it, do not.
  if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;
  const std::string seen = LeafFingerprint(X509_STORE_CTX_get_current_cert(store));
  if (!check->pinned_.empty() && seen == check->pinned_) {
    X509_STORE_CTX_set_error(store, X509_V_OK);
    return 1;
  }
  check->seen_ = seen;
  X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
  return 0;
}

std::string TlsPeerCheck::Explain(std::string_view detail, bool in_handshake) const {
  if (!seen_.empty())
    return "the server's certificate fingerprint is " + seen_ + ", not the pinned " +
           (pinned_.empty() ? options_.fingerprint : pinned_);
  if (Contains(detail, "wrong version number") || Contains(detail, "packet length too long"))
    return in_handshake ? "the server speaks plain HTTP: use http://"
                        : "the server sent bytes that are not TLS after the handshake (wrong version number)";
  if (Contains(detail, "unable to get local issuer certificate") || Contains(detail, "self-signed certificate") ||
      Contains(detail, "self signed certificate") || Contains(detail, "unable to get issuer certificate") ||
      Contains(detail, "unable to verify the first certificate"))
    return "the server's certificate is signed by a CA not in " +
           (options_.ca_file.empty() ? "the system's trusted CAs" : options_.ca_file) +
           " (unknown CA): give the CA that signed it with " + options_.ca_setting;
  if (Contains(detail, "hostname mismatch") || Contains(detail, "IP address mismatch") ||
      Contains(detail, "subject name matches target host") || Contains(detail, "does not match target host"))
    return "the server's certificate does not name host " + host_ +
           " (name mismatch): connect to it by a name its certificate has";
  if (Contains(detail, "certificate has expired")) return "the server's certificate has expired";
  if (Contains(detail, "certificate is not yet valid"))
    return "the server's certificate is not yet valid: check this machine's clock and the server's";
  const bool cert_alert = Contains(detail, "alert certificate required") || Contains(detail, "alert bad certificate") ||
                          Contains(detail, "alert unknown ca") || Contains(detail, "alert certificate unknown") ||
                          Contains(detail, "alert unsupported certificate") ||
                          Contains(detail, "alert certificate revoked") ||
                          Contains(detail, "alert certificate expired") || Contains(detail, "alert access denied") ||
                          Contains(detail, "alert decrypt error");
  if (options_.cert_file.empty() && (cert_alert || Contains(detail, "alert handshake failure")))
    return "the server asked for a client certificate and none was given (give one with " + options_.cert_setting +
           ")";
  if (cert_alert) {
    const size_t alert = detail.find("alert ");
    return "the server refused the client certificate " + options_.cert_file + " (" +
           std::string(detail.substr(alert + 6, detail.find_first_of(",;:)", alert) - alert - 6)) +
           "): give one signed by a CA the server trusts with " + options_.cert_setting;
  }
  return "";
}

// ---- TlsConnection

struct TlsConnection::State {
  State(const TlsClientOptions& options, std::string host, int socket)
      : check(options, std::move(host)), fd(socket) {}
  ~State() {
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
    if (fd >= 0) ::close(fd);
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  // The words for a failed handshake (`in_handshake`), read or write:
  // TlsPeerCheck's, else OpenSSL's.
  Status Failure(int rc, int error, bool in_handshake) {
    const int saved_errno = errno;
    const std::string detail = OpenSslFailure(ssl);
    std::string words = check.Explain(detail, in_handshake);
    if (words.empty()) {
      if (error == SSL_ERROR_SYSCALL && detail.empty())
        words = rc == 0 || saved_errno == 0 ? "the server closed the connection" : ErrnoText(saved_errno);
      else
        words = "TLS failed: " + detail;
    }
    return Status::Unavailable(words);
  }

  TlsPeerCheck check;
  int fd = -1;
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
};

TlsConnection::TlsConnection(std::unique_ptr<State> state) : state_(std::move(state)) {}
TlsConnection::TlsConnection(TlsConnection&&) noexcept = default;
TlsConnection::~TlsConnection() = default;

Result<TlsConnection> TlsConnection::Handshake(int fd, const TlsClientOptions& options, const std::string& host,
                                               Deadline deadline) {
  auto state = std::make_unique<State>(options, host, fd);
  ERR_clear_error();
  state->ctx = SSL_CTX_new(TLS_client_method());
  if (state->ctx == nullptr) return Status::Internal("cannot make a TLS context: " + OpenSslFailure(nullptr));
  SSL_CTX_set_min_proto_version(state->ctx, TLS1_2_VERSION);
  const bool pinned = !options.fingerprint.empty();
  if (!pinned) {
    if (Status s = LoadCas(state->ctx, options); !s.ok()) return s;
    SSL_CTX_set_verify(state->ctx, SSL_VERIFY_PEER, nullptr);
  }
  if (Status s = LoadClientCertificate(state->ctx, options); !s.ok()) return s;
  state->check.Install(state->ctx);
  state->ssl = SSL_new(state->ctx);
  if (state->ssl == nullptr || SSL_set_fd(state->ssl, fd) != 1)
    return Status::Internal("cannot make a TLS connection: " + OpenSslFailure(nullptr));
  SSL_set_mode(state->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_options(state->ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (!pinned && SSL_set1_host(state->ssl, host.c_str()) != 1)
    return Status::InvalidArgument("\"" + host + "\" is not a host name a certificate can be checked against");
  if (!IsIpAddress(host)) SSL_set_tlsext_host_name(state->ssl, host.c_str());
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);

  const SigpipeBlocked quiet;
  while (true) {
    ERR_clear_error();
    const int rc = SSL_connect(state->ssl);
    if (rc == 1) break;
    const int error = SSL_get_error(state->ssl, rc);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return state->Failure(rc, error, true);
    if (!WaitForSocket(fd, error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline))
      return Status::DeadlineExceeded("no TLS handshake in time");
  }
  return TlsConnection(std::move(state));
}

Status TlsConnection::Write(std::string_view bytes, Deadline deadline) {
  const SigpipeBlocked quiet;
  while (!bytes.empty()) {
    ERR_clear_error();
    const int n = SSL_write(state_->ssl, bytes.data(), static_cast<int>(std::min<size_t>(bytes.size(), 1 << 20)));
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    const int error = SSL_get_error(state_->ssl, n);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return state_->Failure(n, error, false);
    if (!WaitForSocket(state_->fd, error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline))
      return Status::DeadlineExceeded("could not send the request in time");
  }
  return Status::Ok();
}

Result<size_t> TlsConnection::Read(std::string& out, Deadline deadline) {
  const SigpipeBlocked quiet;
  while (true) {
    char chunk[4096];
    ERR_clear_error();
    const int n = SSL_read(state_->ssl, chunk, sizeof chunk);
    if (n > 0) {
      out.append(chunk, static_cast<size_t>(n));
      return static_cast<size_t>(n);
    }
    const int error = SSL_get_error(state_->ssl, n);
    if (error == SSL_ERROR_ZERO_RETURN) return size_t{0};
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return state_->Failure(n, error, false);
    if (!WaitForSocket(state_->fd, error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline))
      return Status::DeadlineExceeded("no answer in time");
  }
}

namespace {

// Whether the other end of the socket pair `local` closed it whole (not
// only shut down its sending half).
bool HungUp(int local) {
  pollfd p{local, 0, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & POLLHUP) != 0;
}

// What an SSL call that did not complete waits for: the socket's events
// to poll for, or 0 when the connection failed or ended.
short Awaited(SSL* ssl, int rc) {
  switch (SSL_get_error(ssl, rc)) {
    case SSL_ERROR_WANT_READ: return POLLIN;
    case SSL_ERROR_WANT_WRITE: return POLLOUT;
    default: return 0;
  }
}

// The bridge's loop: plaintext from the server (`ssl` over `tcp`) to
// `local`, and from `local` to the server, until the server ends the
// connection or it fails (and what the server sent has been passed on), or
// the caller closes its end of the pair (and what it sent has been passed
// on, with close_notify). The caller shutting down its sending half sends
// close_notify, and the server's answer still comes back. Nothing is
// written to the server once it ended or failed.
void RunBridge(SSL* ssl, int tcp, int local) {
  std::string to_local, to_server;
  bool server_open = true;  // the server may still send
  bool local_open = true;   // the caller may still send
  bool caller_gone = false; // the caller closed its end whole: nothing it would read
  bool close_sent = false;
  char chunk[16 * 1024];
  while (true) {
    bool progress = false;
    short tcp_events = 0;
    while (server_open && !caller_gone && to_local.size() < kBridgeBuffer) {
      ERR_clear_error();
      const int n = SSL_read(ssl, chunk, static_cast<int>(std::min(sizeof chunk, kBridgeBuffer - to_local.size())));
      if (n > 0) {
        to_local.append(chunk, static_cast<size_t>(n));
        progress = true;
        continue;
      }
      tcp_events |= Awaited(ssl, n);
      if (tcp_events == 0) server_open = false;  // close_notify, the connection's end, or its failure
      break;
    }
    if (!to_local.empty() && !caller_gone) {
      const ssize_t n = ::send(local, to_local.data(), to_local.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        to_local.erase(0, static_cast<size_t>(n));
        progress = true;
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        caller_gone = true;
      }
    }
    if (!server_open) {
      if (to_local.empty() || caller_gone) return;
      pollfd p{local, POLLOUT, 0};  // what the server sent, passed on before the end
      if (::poll(&p, 1, kBridgeTickMs) < 0 && errno != EINTR) return;
      continue;
    }
    if (local_open && to_server.size() < kBridgeBuffer) {
      const ssize_t n = ::recv(local, chunk, std::min(sizeof chunk, kBridgeBuffer - to_server.size()), MSG_DONTWAIT);
      if (n > 0) {
        to_server.append(chunk, static_cast<size_t>(n));
        progress = true;
      } else if (n == 0) {
        local_open = false;
        caller_gone = HungUp(local);
        progress = true;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        local_open = false;
        caller_gone = true;
      }
    }
    while (!to_server.empty()) {
      ERR_clear_error();
      const int n = SSL_write(ssl, to_server.data(), static_cast<int>(to_server.size()));
      if (n <= 0) {
        const short awaited = Awaited(ssl, n);
        if (awaited == 0) return;  // the connection failed: nothing more reaches the server
        tcp_events |= awaited;
        break;
      }
      to_server.erase(0, static_cast<size_t>(n));
      progress = true;
    }
    if (!local_open && to_server.empty() && !close_sent) {
      ERR_clear_error();
      const int rc = SSL_shutdown(ssl);
      if (rc >= 0) {
        close_sent = true;
        progress = true;
      } else if (const short awaited = Awaited(ssl, rc); awaited != 0) {
        tcp_events |= awaited;
      } else {
        return;
      }
    }
    if (caller_gone && close_sent) return;
    if (progress) continue;
    const short local_events = static_cast<short>((local_open && to_server.size() < kBridgeBuffer ? POLLIN : 0) |
                                                  (!to_local.empty() ? POLLOUT : 0));
    pollfd fds[2] = {{tcp_events != 0 ? tcp : -1, tcp_events, 0}, {caller_gone ? -1 : local, local_events, 0}};
    if (::poll(fds, 2, kBridgeTickMs) < 0 && errno != EINTR) return;
    if ((fds[1].revents & POLLHUP) != 0 && !local_open) caller_gone = true;
  }
}

}  // namespace

Result<int> TlsConnection::Bridge() && {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return Status::Internal("cannot make a socket pair for the TLS connection: " + ErrnoText(errno));
  ::fcntl(pair[1], F_SETFL, ::fcntl(pair[1], F_GETFL) | O_NONBLOCK);
  try {
    std::thread([state = std::move(state_), local = pair[1]] {
      NameThisThread("tls-bridge");
      sigset_t pipe;  // SIGPIPE of OpenSSL's writes stays pending on this thread, which ends with it
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
      RunBridge(state->ssl, state->fd, local);
      ::close(local);
    }).detach();
  } catch (const std::system_error& e) {
    ::close(pair[0]);
    ::close(pair[1]);
    return Status::Internal(std::string("cannot start the TLS connection's thread: ") + e.what());
  }
  return pair[0];
}

bool AnswersTlsHandshake(int fd) {
  struct Probe {
    ~Probe() {
      if (ssl != nullptr) SSL_free(ssl);
      if (ctx != nullptr) SSL_CTX_free(ctx);
      ::close(fd);
    }
    int fd;
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL* ssl = nullptr;
  } probe{fd};
  if (probe.ctx == nullptr) return false;
  SSL_CTX_set_verify(probe.ctx, SSL_VERIFY_NONE, nullptr);
  probe.ssl = SSL_new(probe.ctx);
  if (probe.ssl == nullptr || SSL_set_fd(probe.ssl, fd) != 1) return false;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const SigpipeBlocked quiet;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (true) {
    ERR_clear_error();
    const int rc = SSL_connect(probe.ssl);
    if (rc == 1) return true;
    const short awaited = Awaited(probe.ssl, rc);
    if (awaited == 0 || !WaitForSocket(fd, awaited, deadline)) break;
  }
  // A certificate or an alert came back: TLS, though this handshake went no further.
  return SSL_get0_peer_certificate(probe.ssl) != nullptr || Contains(OpenSslFailure(nullptr), "alert");
}

}  // namespace slotd
