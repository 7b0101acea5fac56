// What another process on this host is allowed: the pid behind a unix
// socket and that process's resource limits, from /proc.
//
// Thread-safety: free functions without state; safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace slotd {

// The pid of the process that listens on the unix socket `path` (its peer
// credentials, SO_PEERCRED); 0 when it cannot be known (no such socket, or
// the listener is in another pid namespace).
pid_t UnixSocketListenerPid(const std::string& path);

// The hard limit on the line of /proc/`pid`/limits that starts with `row`
// ("Max open files", "Max processes"); nothing when it is unlimited or
// cannot be read.
std::optional<int64_t> ProcessHardLimit(pid_t pid, std::string_view row);

}  // namespace slotd
