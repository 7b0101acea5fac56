// TestEtcd: a real single-member etcd (Debian's etcd-server) on free
// 127.0.0.1 ports, with its data under a temporary directory; started and
// stopped by pid. Stop and Start again keep the data and the ports, as a
// restarted etcd server would. With certificates, its client URL is https
// and it takes only clients whose certificate its CA signed.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/tls_client.h"
#include "integration/harness.h"
#include "testing/tls_fixtures.h"

namespace slotd::testing {

class TestEtcd {
 public:
  TestEtcd();       // starts it; ASSERT on started()
  // Starts it serving https with `certs`' "server" certificate and asking
  // every client for one signed by `certs`' "ca" (--client-cert-auth).
  // `certs` must outlive it.
  explicit TestEtcd(const TestCertificates& certs);
  ~TestEtcd();      // SIGKILLs it
  TestEtcd(const TestEtcd&) = delete;
  TestEtcd& operator=(const TestEtcd&) = delete;

  // Starts it again after Stop (same data, same ports); false when it does not answer.
  bool Start();
  // SIGKILLs it: its clients' connections are refused until Start.
  void Stop();

  // Turns on etcd's authentication with the user root and `password` (etcdctl,
  // from etcd-client) of an etcd without certificates; false with etcdctl's
  // error in `error`.
  bool EnableAuth(const std::string& password, std::string& error);

  bool started() const { return pid_ > 0; }
  std::string log() const;
  // Its client URL, "http://127.0.0.1:<port>" (with certificates "https://...").
  const std::string& url() const { return url_; }
  // What a client it takes trusts and shows: the CA, and the "client"
  // certificate and key; nothing without certificates.
  TlsClientOptions client_tls() const;

 private:
  TempDir dir_;
  const TestCertificates* certs_ = nullptr;  // with TLS
  std::string url_;
  std::string peer_url_;
  pid_t pid_ = -1;
};

}  // namespace slotd::testing
