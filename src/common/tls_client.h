// TLS for HttpClient's https:// targets (OpenSSL): what an https client
// trusts and how it proves itself (TlsClientOptions), the checks of one
// handshake and what a failed one means in words (TlsPeerCheck), and the
// connection HttpClient::Upgrade makes itself (TlsConnection), which it hands
// to its caller as a plain socket served by a bridge thread.
#pragma once

#include <openssl/types.h>  // SSL_CTX and X509_STORE_CTX only: http_client.h includes this header

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace slotd {

// How an https client checks the server and proves itself.
struct TlsClientOptions {
  std::string ca_file;      // PEM CAs that sign the server's certificate; empty: the system's store
  std::string cert_file;    // PEM client certificate (mutual TLS); empty: none
  std::string key_file;     // its private key; empty: in cert_file
  std::string fingerprint;  // the server certificate's SHA-256, "AB:CD:..." (colons and case optional):
                            // pinned instead of a CA and host name check
  // What the message of a failed handshake calls the settings above, so
  // that it says what to change: slotctl's "--cacert", "--cert and --key".
  std::string ca_setting = "the CA file";
  std::string cert_setting = "a client certificate and key";
};

// Whether `text` is a SHA-256 fingerprint: 32 hex pairs, with or without ':'
// between them, in either case.
bool IsSha256Fingerprint(std::string_view text);

// Waits until `fd` is ready for `events` (poll's POLLIN, POLLOUT) before
// `deadline`; false past it, or when poll fails.
bool WaitForSocket(int fd, short events, std::chrono::steady_clock::time_point deadline);

// The checks of one connection's handshake that OpenSSL's own do not make,
// and the words for a failed handshake. One per connection attempt; it must
// outlive the handshake it checks.
class TlsPeerCheck {
 public:
  // Checks a server reached as `host` (a name or an IP address) as `options` say.
  TlsPeerCheck(const TlsClientOptions& options, std::string host);

  // With a pinned fingerprint, makes `ctx` accept exactly a leaf certificate
  // of that SHA-256 and refuse any other (no CA or host name check then);
  // without one, changes nothing. Refuses renegotiation either way, so that
  // the check runs only in the handshake this object outlives.
  void Install(SSL_CTX* ctx);

  // What went wrong, in words, for a handshake (`in_handshake`) or a read or
  // write after it that failed with OpenSSL's (or curl's) text `detail`: an
  // unknown CA, a certificate for another host, an expired one, a client
  // certificate wanted or refused (TLS 1.3 says so after the handshake), a
  // fingerprint other than the pinned one, a server that answers the
  // handshake in plain HTTP (or, after it, sends what is not TLS). "" when
  // `detail` is none of these.
  std::string Explain(std::string_view detail, bool in_handshake) const;

 private:
  // OpenSSL's verify callback of a pinned connection.
  static int VerifyPinned(int preverify_ok, X509_STORE_CTX* store);

  TlsClientOptions options_;
  std::string host_;
  std::string pinned_;  // options_.fingerprint as "AB:CD:..."; empty: not pinned
  std::string seen_;    // the fingerprint of a leaf that was refused for not being pinned_
};

// A TLS client connection that HttpClient::Upgrade made itself. Its socket
// is non-blocking; each call waits for it until `deadline`.
class TlsConnection {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // Speaks TLS as a client over `fd` (a connected TCP socket, taken even on
  // failure) to the server reached as `host`, checked as `options` say: its
  // certificate signed by options.ca_file's CAs (or the system's) and naming
  // `host` (SNI sent for a name), or matching the pinned fingerprint; the
  // client certificate sent when given; TLS 1.2 at least. kUnavailable with
  // TlsPeerCheck's words when the handshake fails; kInvalidArgument naming
  // the file when a CA, certificate or key file cannot be used;
  // kDeadlineExceeded past `deadline`.
  static Result<TlsConnection> Handshake(int fd, const TlsClientOptions& options, const std::string& host,
                                         Deadline deadline);

  TlsConnection(TlsConnection&&) noexcept;
  TlsConnection& operator=(TlsConnection&&) = delete;
  TlsConnection(const TlsConnection&) = delete;
  ~TlsConnection();

  // Sends all of `bytes`. kUnavailable when the connection fails,
  // kDeadlineExceeded past `deadline`.
  Status Write(std::string_view bytes, Deadline deadline);
  // Appends what arrives next to `out` and returns how many bytes; 0 when the
  // server ended the connection. Errors as for Write (a client certificate
  // the server refused after the handshake shows here, in TLS 1.3).
  Result<size_t> Read(std::string& out, Deadline deadline);

  // Hands the connection to a thread of its own, which copies plaintext
  // between it and one end of a socket pair until either side closes, and
  // returns the other end: a blocking socket that behaves like the TCP
  // connection itself. A shutdown(SHUT_WR) of it reaches the server as TLS's
  // close_notify; the server ending the connection ends the copying and
  // closes the pair's end, so its reader sees the end. kInternal when no
  // socket pair or thread can be had.
  Result<int> Bridge() &&;

 private:
  struct State;
  explicit TlsConnection(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

// Whether the server connected to on `fd` (a TCP socket, closed here)
// answers a TLS handshake, its certificate unchecked, within a second:
// for the message of a plain HTTP request that got no HTTP answer.
bool AnswersTlsHandshake(int fd);

}  // namespace slotd
