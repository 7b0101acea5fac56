// AuditLog: one JSON line for each API request that changes something and
// for each one refused (docs/security.md "Audit trail"), in
// <var-base-path>/audit.log (mode 0600): when it was, who asked (name,
// role, how), the method, the route pattern, the kernel id, the HTTP status
// and the time taken. Never a token, a request body or a header: what a
// client sends stays out of it, but the kernel id of the path.
//
// When the file passes its size bound it becomes audit.log.1 (the older
// ones audit.log.2 and .3; the oldest dropped) and a new file begins. A
// line that cannot be written is counted and logged once, never fatal.
//
// Thread-safety: Record may be called from any thread at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/mutex.h"
#include "common/status.h"
#include "config/choices.h"

namespace slotd {

// One audited request.
struct AuditEntry {
  int64_t time_ms = 0;            // when it arrived, Unix ms
  std::string caller;             // the token's name, certificate CN, "unix-socket"; "" when unknown
  std::optional<Role> role;       // nullopt when no credential was known
  std::string via;                // "token", "certificate", "unix socket", ""
  std::string peer;               // the client's address, "" on the unix socket
  std::string method;             // "POST"
  std::string route;              // the route pattern, "/v1/kernels/{id}"; the path when none matched
  std::string kernel_id;          // the {id} of a kernel route, "" otherwise
  int status = 0;                 // the answer's HTTP status
  int64_t duration_ms = 0;        // from arrival to the answer (for a stream or exec: its end)
};

// The JSON line of `entry`, without its newline. Bytes that are not UTF-8
// are replaced, so every line parses.
std::string AuditLine(const AuditEntry& entry);

class AuditLog {
 public:
  // Kept in `path`; rotated past `max_bytes`.
  AuditLog(std::string path, uint64_t max_bytes);
  ~AuditLog();

  // Opens (or creates, 0600) the file for appending. Errors name the file.
  Status Open() EXCLUDES(mutex_);
  // Appends the line of `entry`, rotating first when the file is full.
  void Record(const AuditEntry& entry) EXCLUDES(mutex_);
  // Lines that could not be written since start.
  uint64_t Failures() const EXCLUDES(mutex_);

 private:
  // Renames audit.log.N to .N+1 (dropping the oldest), the file to .1, and
  // opens a new one.
  void Rotate() REQUIRES(mutex_);

  const std::string path_;
  const uint64_t max_bytes_;
  mutable Mutex mutex_;
  int fd_ GUARDED_BY(mutex_) = -1;
  uint64_t size_ GUARDED_BY(mutex_) = 0;
  uint64_t failures_ GUARDED_BY(mutex_) = 0;
};

}  // namespace slotd
