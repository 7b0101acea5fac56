// A request's mounts, checked against the operator's [container]
// mount-allow before anything is allocated, and opened so that what was
// checked is what the kernel gets.
//
// A source is found beneath the allowed directory that holds it, one path
// component at a time, never following a symbolic link there: a link (or a
// directory swapped for one while the agent looks) is refused, not followed.
// What comes out is an open descriptor of the source, so a later swap of a
// name cannot change it; MountStage (agent/mount_stage.h) binds that
// descriptor where the engine takes it from.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "model/kernel.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "config/config.h"
#include "config/local_checks.h"

namespace slotd {

// One mount of a request, its source opened.
struct ResolvedMount {
  UniqueFd source;         // an O_PATH descriptor of the source
  std::string path;        // where the source is on the host (for messages and logs)
  bool is_directory = false;
  dev_t device = 0;        // the source's device and inode: what the kernel must see at `target`
  ino_t inode = 0;
  std::string target;      // where the kernel sees it
  bool read_only = false;
};

// How many entries of a source directory are looked at for sockets, FIFOs
// and device nodes before it is mounted; past that the rest is not looked at
// (a warning is logged). Mount points under the source are not entered: the
// kernel does not get them.
inline constexpr size_t kMaxScannedEntries = 100000;

// The mounts of `requested`, in order, each source opened. Refusals name the
// mount ("mounts[1].source: ...") and say what is allowed:
//  - kPermissionDenied (403): a source outside every `allowed` directory, or
//    reached through a symbolic link beneath it; a read-write mount of a
//    directory allowed read-only; a source that is, holds or lies in one of
//    `protected_paths` (AgentOwnPaths); a source that is, or holds, a
//    socket, FIFO or device node; a target over /, /proc, /sys, /dev, the
//    kernel's scratch (/home/work), or /etc itself or a file the engine
//    provides there (/etc/hosts, /etc/hostname, /etc/resolv.conf);
//  - kInvalidArgument (400): a source that does not exist on the node.
Result<std::vector<ResolvedMount>> ResolveMounts(const std::vector<RequestedMount>& requested,
                                                 const std::vector<MountAllow>& allowed,
                                                 const std::vector<OwnPath>& protected_paths);

// Checks that what process `pid` (a kernel's PID 1) sees at each mount's
// target is the source that was opened (same device and inode).
// kPermissionDenied naming the first that differs; OK when the process is
// gone (nothing runs to see anything).
Status VerifyMounted(int pid, const std::vector<ResolvedMount>& mounts);

}  // namespace slotd
