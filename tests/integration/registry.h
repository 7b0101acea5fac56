// TestRegistry: a real image registry (Debian's docker-registry) on a free
// 127.0.0.1 port, with its storage under a temporary directory and, when
// given a user, htpasswd authentication; started and stopped by pid. Images
// reach it through the engine at $DOCKER_HOST and the docker command line.
#pragma once

#include <sys/types.h>

#include <string>

#include "integration/harness.h"

namespace slotd::testing {

class TestRegistry {
 public:
  // Starts the registry; with a non-empty `user`, pulls and pushes need
  // `user` and `password` (bcrypt htpasswd). ASSERT on started().
  explicit TestRegistry(std::string user = "", std::string password = "");
  ~TestRegistry();  // SIGKILLs it (after SIGCONT when paused)
  TestRegistry(const TestRegistry&) = delete;
  TestRegistry& operator=(const TestRegistry&) = delete;

  // Whether it answers; log() says why not.
  bool started() const { return pid_ > 0; }
  std::string log() const;
  // "127.0.0.1:<port>": the registry part of its images' names.
  const std::string& host() const { return host_; }

  // Pushes a new image as <host>/<name_tag>: the test image plus a layer of
  // `bytes` random bytes, so that its content is its own. The engine keeps
  // no copy of it afterwards: a kernel of it is of an image never seen on
  // the node. Returns its id in the registry's digest terms ("sha256:..."),
  // or "" after ADD_FAILURE.
  std::string PushNewImage(const std::string& name_tag, size_t bytes);

  // Writes, at `path`, a docker login file with `user`:`password` for this
  // registry (for [container] registry-auth-file).
  void WriteAuthFile(const std::string& path, const std::string& user, const std::string& password) const;

  void Pause();   // SIGSTOP: connections are accepted by the kernel but never answered
  void Resume();  // SIGCONT
  void Stop();    // SIGKILL: connections are refused

 private:
  // Runs the docker command line against $DOCKER_HOST with this registry's login.
  CommandResult Docker(const std::vector<std::string>& args) const;

  TempDir dir_;
  std::string user_;
  std::string password_;
  std::string host_;
  pid_t pid_ = -1;
  bool paused_ = false;
};

}  // namespace slotd::testing
