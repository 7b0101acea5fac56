#include "api/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <spdlog/spdlog.h>

#include "api/responses.h"

namespace slotd {
namespace {

// How many rotated files are kept beside the current one.
constexpr int kKeptFiles = 3;

// "2026-12-06T01:02:03.456Z".
std::string UtcText(int64_t unix_ms) {
  const time_t seconds = static_cast<time_t>(unix_ms / 1000);
  tm utc{};
  ::gmtime_r(&seconds, &utc);
  char text[40];
  const size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  std::snprintf(text + n, sizeof text - n, ".%03dZ", static_cast<int>(unix_ms % 1000));
  return text;
}

}  // namespace

std::string AuditLine(const AuditEntry& e) {
  nlohmann::json line = {{"time", UtcText(e.time_ms)},
                         {"caller", e.caller.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.caller)},
                         {"role", e.role ? nlohmann::json(WordOf(RoleWords(), *e.role)) : nlohmann::json(nullptr)},
                         {"via", e.via.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.via)},
                         {"peer", e.peer.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.peer)},
                         {"method", e.method},
                         {"route", e.route},
                         {"kernel_id", e.kernel_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.kernel_id)},
                         {"status", e.status},
                         {"outcome", e.status < 400 ? "done" : (e.status == 401 || e.status == 403 ? "refused" : "failed")},
                         {"duration_ms", e.duration_ms}};
  return DumpJson(line);
}

AuditLog::AuditLog(std::string path, uint64_t max_bytes) : path_(std::move(path)), max_bytes_(max_bytes) {}

AuditLog::~AuditLog() {
  MutexLock lock(mutex_);
  if (fd_ >= 0) ::close(fd_);
}

Status AuditLog::Open() {
  MutexLock lock(mutex_);
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return Status::Unavailable("cannot open the audit log " + path_ + ": " + std::strerror(errno) +
                               "; var-base-path must be writable by the agent");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Unavailable("the audit log " + path_ + " is not a regular file; remove what is there");
  }
  ::fchmod(fd, 0600);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  size_ = static_cast<uint64_t>(st.st_size);
  return Status::Ok();
}

void AuditLog::Rotate() {
  ::close(fd_);
  fd_ = -1;
  for (int n = kKeptFiles - 1; n >= 1; --n)
    std::rename((path_ + "." + std::to_string(n)).c_str(), (path_ + "." + std::to_string(n + 1)).c_str());
  std::rename(path_.c_str(), (path_ + ".1").c_str());
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  size_ = 0;
}

void AuditLog::Record(const AuditEntry& entry) {
  const std::string line = AuditLine(entry) + "\n";
  MutexLock lock(mutex_);
  if (fd_ >= 0 && size_ > 0 && size_ + line.size() > max_bytes_) Rotate();
  const ssize_t written = fd_ >= 0 ? ::write(fd_, line.data(), line.size()) : -1;
  if (written == static_cast<ssize_t>(line.size())) {
    size_ += line.size();
    return;
  }
  if (failures_++ == 0)
    spdlog::error("the audit log {} cannot be written ({}): requests go on, unaudited, until it can", path_,
                  written < 0 ? std::strerror(errno) : "a short write");
}

uint64_t AuditLog::Failures() const {
  MutexLock lock(mutex_);
  return failures_;
}

}  // namespace slotd
