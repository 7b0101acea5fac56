// TestEtcd: a real single-member etcd (Debian's etcd-server) on free
// 127.0.0.1 ports, with its data under a temporary directory; started and
// stopped by pid. Stop and Start again keep the data and the ports, as a
// restarted etcd server would.
#pragma once

#include <sys/types.h>

#include <string>

#include "integration/harness.h"

namespace slotd::testing {

class TestEtcd {
 public:
  TestEtcd();       // starts it; ASSERT on started()
  ~TestEtcd();      // SIGKILLs it
  TestEtcd(const TestEtcd&) = delete;
  TestEtcd& operator=(const TestEtcd&) = delete;

  // Starts it again after Stop (same data, same ports); false when it does not answer.
  bool Start();
  // SIGKILLs it: its clients' connections are refused until Start.
  void Stop();

  // Turns on etcd's authentication with the user root and `password` (etcdctl,
  // from etcd-client); false with etcdctl's error in `error`.
  bool EnableAuth(const std::string& password, std::string& error);

  bool started() const { return pid_ > 0; }
  std::string log() const;
  // Its client URL, "http://127.0.0.1:<port>".
  const std::string& url() const { return url_; }

 private:
  TempDir dir_;
  std::string url_;
  std::string peer_url_;
  pid_t pid_ = -1;
};

}  // namespace slotd::testing
