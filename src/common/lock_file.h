// LockFile: an exclusive advisory lock (flock) held for the life of the
// object. The holder's pid is written into the file so that a refused
// process can name it. The kernel drops the lock when the holder dies, even
// by SIGKILL, so a stale file never blocks anyone.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"

namespace slotd {

class LockFile {
 public:
  // Takes the lock at `path` (created with mode 0600 if missing) without
  // waiting. kFailedPrecondition when another live process holds it, naming
  // that process's pid; kUnavailable when the file cannot be opened.
  static Result<std::unique_ptr<LockFile>> Acquire(const std::string& path);

  // Like Acquire, but waits up to `timeout` for a holder to let go.
  static Result<std::unique_ptr<LockFile>> AcquireWaiting(const std::string& path, std::chrono::milliseconds timeout);

  // Whether a live process holds the lock at `path` now (false when the file
  // does not exist). Takes and drops a shared lock to find out.
  static bool IsHeld(const std::string& path);
  ~LockFile();  // releases the lock

  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;

 private:
  explicit LockFile(int fd) : fd_(fd) {}
  const int fd_;
};

// Creates the directory `path` and its parents when missing; errors name the path.
Status MakeDirs(const std::string& path);

}  // namespace slotd
