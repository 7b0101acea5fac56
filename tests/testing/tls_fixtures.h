// TLS for tests: certificates made by the openssl command line (ECDSA
// P-256) in a temporary directory, and `openssl s_server` serving HTTPS
// with them on a loopback port it picks itself.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "testing/temp_tree.h"

namespace slotd::testing {

// A test's certificates, each `<name>.crt` with its key `<name>.key` in one
// temporary directory, removed with it.
class TestCertificates {
 public:
  // Makes the CA "ca" and, signed by it, "server" (for IP 127.0.0.1 and
  // DNS localhost) and "client"; ADD_FAILURE with openssl's words when one
  // cannot be made.
  TestCertificates();

  // Makes a self-signed CA `name`; false with openssl's words in error().
  bool MakeCa(const std::string& name);
  // Makes `name` signed by the CA `ca`, with the subjectAltName `san`
  // ("IP:127.0.0.1,DNS:localhost"); false with openssl's words in error().
  bool Issue(const std::string& name, const std::string& ca, const std::string& san);

  std::string Cert(const std::string& name) const { return dir_.root() + "/" + name + ".crt"; }
  std::string Key(const std::string& name) const { return dir_.root() + "/" + name + ".key"; }
  const std::string& dir() const { return dir_.root(); }
  // What openssl said when a certificate could not be made.
  const std::string& error() const { return error_; }
  // The SHA-256 fingerprint of `name`.crt as `openssl x509 -fingerprint
  // -sha256` prints it ("AB:CD:..."); "" when it cannot be read.
  std::string Fingerprint(const std::string& name);

 private:
  // Runs openssl with `args` and waits for it; its output goes to `out`
  // when given. False, with its words in error_, when it fails.
  bool Openssl(const std::vector<std::string>& args, std::string* out = nullptr);

  TempTree dir_{"slotd-tls"};
  std::string error_;
};

// `openssl s_server -www` on 127.0.0.1, at the port it picks, with `args`
// (-cert, -key, ...): one connection at a time, each answered with an HTML
// page of the session. SIGKILLed by pid when it goes.
class OpensslServer {
 public:
  // Starts it and waits (up to 10 s) until it listens; ADD_FAILURE with its
  // output when it does not.
  explicit OpensslServer(const std::vector<std::string>& args);
  ~OpensslServer();
  OpensslServer(const OpensslServer&) = delete;
  OpensslServer& operator=(const OpensslServer&) = delete;

  bool started() const { return port_ > 0; }
  int port() const { return port_; }
  // "https://127.0.0.1:<port>".
  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  // What it printed.
  std::string log() const;

 private:
  TempTree dir_{"slotd-s-server"};
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace slotd::testing
