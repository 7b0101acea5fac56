// CgroupReader: a container's measures (cpu time, memory, pids, I/O) read
// straight from the cgroup of one of its processes, on cgroup v1, v2 and
// hybrid hosts.
//
// The cgroup mounts are learnt once, at construction, from
// <root>/proc/self/mountinfo. A process's cgroup directories are found
// through <root>/proc/<pid>/cgroup (Locate), and then read as often as
// wanted: locate once per container, then read its CgroupFiles many times.
// A reading goes through a stack buffer and parses without allocating (a
// cpuset list too long for a string's own buffer aside), so it costs
// microseconds; kept open, a file costs one pread and no path lookup.
//
// Thread-safety: every method is const and keeps no mutable state, so a
// const CgroupReader (or CgroupFiles) may be used from any number of threads
// at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/unique_fd.h"

namespace slotd {

// The measures of one cgroup at one moment. A measure whose file is missing
// (controller not mounted, not enabled on v2, or not offered by the kernel)
// is 0.
struct CgroupSample {
  // CPU time used by every task of the cgroup, in nanoseconds, since it was
  // created. v1: cpuacct.usage; v2: cpu.stat "usage_usec" x 1000.
  uint64_t cpu_usage_ns = 0;
  // Memory charged to the cgroup, page cache included, in bytes.
  // v1: memory.usage_in_bytes; v2: memory.current.
  uint64_t memory_used_bytes = 0;
  // The memory limit in bytes; 0: unlimited. v1: memory.limit_in_bytes (a
  // value of 2^62 or more, like 9223372036854771712, means unlimited);
  // v2: memory.max ("max" means unlimited).
  uint64_t memory_limit_bytes = 0;
  // The page cache part of memory_used_bytes, in bytes (subtract it for the
  // "used" figure docker stats shows). v1: memory.stat "total_cache" (the
  // hierarchy), else "cache"; v2: memory.stat "file".
  uint64_t memory_cache_bytes = 0;
  // Processes of the cgroup the kernel's OOM killer has killed for lack of
  // its memory, since the cgroup was created: the engine's own word where it
  // sends none (Podman). v1: memory.oom_control "oom_kill"; v2: memory.events
  // "oom_kill".
  uint64_t oom_kills = 0;
  // Tasks (threads included) in the cgroup. v1 and v2: pids.current.
  uint64_t pids = 0;
  // The cores the cgroup's tasks may run on, as its cpuset.cpus lists them
  // ("0-3,8"), read because an engine's inspect may not show a change made
  // beside it (Podman's update); empty: not read, or not restricted there.
  std::string cpuset_cpus;
  // Bytes read from and written to block devices, summed over devices.
  // v1: "Read" and "Write" lines of the first blkio file that exists of
  // blkio.throttle.io_service_bytes_recursive (the cgroup and its children),
  // blkio.throttle.io_service_bytes (older kernels) and
  // blkio.io_service_bytes_recursive (CFQ/BFQ accounting);
  // v2: io.stat "rbytes=" and "wbytes=".
  uint64_t io_read_bytes = 0;
  uint64_t io_write_bytes = 0;
};

// How a host mounts its cgroups, as its mountinfo lists them.
enum class CgroupLayout {
  kNone,    // no cgroup file system at all
  kV1,      // v1 hierarchies only (systemd's "legacy" layout)
  kHybrid,  // v1 controller hierarchies beside a cgroup2 one (systemd's "hybrid" layout)
  kV2,      // the unified (cgroup2) hierarchy only
};

// One controller's directory for one process.
struct CgroupDir {
  std::string path;      // absolute, under the reader's root; empty: not found
  bool unified = false;  // true: a cgroup v2 directory (v2 file names apply)
};

// Where one process's measures live. Copyable; valid until the process's
// cgroup is removed (its container is gone), after which Read says so.
struct CgroupPaths {
  CgroupDir cpu;     // v1: the cpuacct hierarchy (also when co-mounted with cpu)
  CgroupDir memory;  // v1: memory
  CgroupDir pids;    // v1: pids
  CgroupDir io;      // v1: blkio
  CgroupDir cpuset;  // v1: cpuset
};

// Whether every directory of `paths` that was found (one at least) is
// container `container_id`'s: engines name a container's cgroups by its id
// ("/docker/<id>", "docker-<id>.scope", "libpod-<id>.scope"). Not so for a
// pid that a container's ended process left and another process took
// since: a host process sits in the root cpuset, whose cpuset.cpus is every
// core, never the kernel's.
bool CgroupPathsName(const CgroupPaths& paths, std::string_view container_id);

// The count of processes of memory cgroup `memory` killed for lack of its
// memory (v1: memory.oom_control "oom_kill"; v2: memory.events "oom_kill";
// 0 where the line is missing). Errors: kNotFound when the file cannot be
// read: the cgroup is gone. Thread-safe.
Result<uint64_t> ReadOomKills(const CgroupDir& memory);
// The same count read from `fd`, that cgroup's OomKillsFile kept open: it
// reads the cgroup the file was opened in, and kNotFound once that cgroup is
// removed, even where a new cgroup has been made at the same path since (a
// container restarted). Thread-safe.
Result<uint64_t> ReadOomKillsAt(int fd);

// Which measures a reading takes.
enum class CgroupMeasures {
  kAll,
  // What a sweep shows live: cpu time (for its rate and the idle windows),
  // memory use and pids (a fork bomb's growth). The memory cache, I/O, the
  // memory limit, the OOM kill count and the cpuset are left 0 and empty.
  kLive,
};

// The measure files of one process's cgroups (from CgroupReader::Locate),
// named once and then read again and again. Kept open, each file is read
// with pread from its start: no path lookup per reading, which on cgroup v1
// is most of what a reading costs. Not kept open (the caller's budget of
// open files is spent, or the files are not on cgroupfs, as in a test's fake
// tree), each reading opens, reads and closes them.
// A kept file of a cgroup removed since (its container ended, or was
// restarted into a new cgroup) no longer reads (ENODEV on cgroupfs), so a
// reading of a gone cgroup is kNotFound either way. Move-only; closes its
// files when destroyed.
class CgroupFiles {
 public:
  // The files of `paths`; with `keep_open` and on cgroupfs, each one that
  // exists is opened now (a file the process cannot open now, for want of
  // descriptors, is opened per reading instead).
  CgroupFiles(const CgroupPaths& paths, bool keep_open);
  CgroupFiles(CgroupFiles&&) noexcept;
  CgroupFiles& operator=(CgroupFiles&&) noexcept;
  ~CgroupFiles();

  // How many descriptors this holds open.
  size_t OpenFiles() const;

  // Reads `which` measures; a missing measure file leaves that measure 0.
  // Errors: kNotFound when not one measure file could be read: the cgroup
  // has been removed, its container is gone.
  Result<CgroupSample> Read(CgroupMeasures which) const;

 private:
  struct File;  // one measure file: its path, and its descriptor when kept open
  enum Slot : size_t { kCpu, kMemoryUsed, kMemoryLimit, kMemoryStat, kOomKills, kPids, kCpuset, kIo, kSlots };
  // Calls on_line for each line of the file in `slot`; whether it could be read.
  template <typename OnLine>
  bool ForEachLineOf(Slot slot, OnLine&& on_line) const;
  // Reads the number the file in `slot` holds (or the word "max", read as 0)
  // into `value`; whether the file could be read.
  bool ReadNumber(Slot slot, uint64_t& value) const;

  std::unique_ptr<File[]> files_;  // kSlots of them
  bool cpu_unified_ = false, memory_unified_ = false, io_unified_ = false;
  std::string some_dir_;  // a directory of the cgroup, for the message when it is gone
};

class CgroupReader {
 public:
  // Learns the cgroup mounts from <root>/proc/self/mountinfo. `root` is "/"
  // on a real host; tests pass a directory holding a fake proc/ and
  // sys/fs/cgroup/ tree. When mountinfo cannot be read or lists no cgroup
  // mount, every Locate fails with kFailedPrecondition saying so.
  explicit CgroupReader(std::string root = "/");

  // How the host mounts its cgroups. A v1 hierarchy counts only with a
  // controller the reader measures (cpu, cpuacct, memory, pids, blkio,
  // cpuset): systemd's own "name=systemd" hierarchy alone is not one.
  CgroupLayout Layout() const;

  // Of the v1 controllers the reader measures (cpuacct, memory, pids,
  // blkio, cpuset), those no v1 hierarchy has, in that order. Meaningful on
  // a v1 or hybrid host, where engines make their containers' cgroups in
  // the v1 hierarchies only.
  std::vector<std::string> UnmountedV1Controllers() const;
  // The v1 controllers whose files the reader reads (cpu time is cpuacct's).
  static constexpr const char* kMeasuredV1Controllers[] = {"cpuacct", "memory", "pids", "blkio", "cpuset"};

  // Finds the cgroup directories of process `pid` (a pid of the reader's pid
  // namespace). Each controller comes from its v1 hierarchy when one is
  // mounted; from the v2 (unified) hierarchy otherwise, as on a pure v2 host
  // or for a controller a hybrid host has moved to v2.
  // Errors: kInvalidArgument for pid <= 0; kNotFound "process N is gone" when
  // <root>/proc/<pid>/cgroup does not exist; kFailedPrecondition when none of
  // the process's hierarchies is mounted where this reader can see it;
  // kUnavailable when the file cannot be read for another reason.
  Result<CgroupPaths> Locate(int pid) const;

  // Every measure at `paths` (from Locate), each file opened, read and
  // closed: for a single reading. Errors: those of CgroupFiles::Read.
  Result<CgroupSample> Read(const CgroupPaths& paths) const;

  // Locate(pid), then Read: for a single reading. Errors: those of both.
  Result<CgroupSample> Read(int pid) const;

  // The 64-hex-digit id of the container that process `pid` runs in, found
  // in its cgroup path: "/docker/<id>" (cgroupfs driver),
  // "/system.slice/docker-<id>.scope" (systemd driver; any "<prefix>-<id>.scope"
  // is accepted), and nested paths, where the innermost id wins (a container
  // inside an agent's container). Errors: kNotFound when the process is gone
  // or belongs to no container; kInvalidArgument and kUnavailable as Locate.
  Result<std::string> ContainerIdOfPid(int pid) const;

  // The pid that process `pid` has inside its innermost pid namespace: the
  // last field of the "NSpid:" line of <root>/proc/<pid>/status (equal to
  // `pid` for a process of the reader's namespace). Errors: kNotFound when
  // the process is gone; kFailedPrecondition when the kernel has no NSpid
  // field (Linux < 4.1): per-process attribution is then unavailable;
  // kInvalidArgument and kUnavailable as Locate.
  Result<int> NamespacePid(int pid) const;

 private:
  // One mounted cgroup hierarchy, from one line of mountinfo.
  struct Mount {
    std::string point;  // where it is mounted, prefixed with root_
    std::string root;   // the hierarchy path mounted there ("/" usually)
    bool unified = false;
    std::vector<std::string> controllers;  // v1 only: "cpu", "cpuacct", ...
  };

  // Whether a v1 hierarchy is mounted with `controller`.
  bool HasV1Controller(std::string_view controller) const;

  // The directory of cgroup `path` (as in /proc/<pid>/cgroup) in the first
  // mount of the given kind and v1 controller that holds it; empty when none.
  std::string Resolve(bool unified, const std::string& controller, const std::string& path) const;

  // <root_>proc/<pid>/<name>, or the error for a bad pid.
  Result<std::string> ProcPath(int pid, const char* name) const;

  // Constant after construction.
  std::string root_;           // ends with "/"
  std::vector<Mount> mounts_;  // every cgroup and cgroup2 mount, in mountinfo order
};

}  // namespace slotd
