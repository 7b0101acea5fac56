#include "common/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>

namespace slotd {

Result<std::unique_ptr<LockFile>> LockFile::Acquire(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::Unavailable("cannot open lock file " + path + ": " + strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    ::close(fd);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return Status::FailedPrecondition(path + " is locked by another running process (pid " + pid + ")");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    std::string err = strerror(errno);
    ::close(fd);
    return Status::Unavailable("cannot write pid to lock file " + path + ": " + err);
  }
  return std::unique_ptr<LockFile>(new LockFile(fd));
}

Result<std::unique_ptr<LockFile>> LockFile::AcquireWaiting(const std::string& path,
                                                          std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    auto lock = Acquire(path);
    if (lock.ok() || lock.status().code() != Status::Code::kFailedPrecondition ||
        std::chrono::steady_clock::now() >= deadline)
      return lock;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool LockFile::IsHeld(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
  ::close(fd);  // drops the shared lock if it was taken
  return held;
}

LockFile::~LockFile() { ::close(fd_); }

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::Unavailable("cannot create directory " + path + ": " + ec.message());
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::Unavailable(path + " exists but is not a directory");
  return Status::Ok();
}

}  // namespace slotd
