#include "stats/cgroup.h"

#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <string_view>
#include <utility>

#include "stats/text_files.h"

namespace slotd {
namespace {

// A v1 memory limit this large is the kernel's "no limit" (PAGE_COUNTER_MAX
// in bytes, 9223372036854771712 with 4 KiB pages); no machine has 4 EiB.
constexpr uint64_t kUnlimitedMemoryFloor = uint64_t{1} << 62;

// The blkio files of a v1 cgroup that may hold its byte counts, best first.
constexpr const char* kBlkioFiles[] = {
    "blkio.throttle.io_service_bytes_recursive",
    "blkio.throttle.io_service_bytes",
    "blkio.io_service_bytes_recursive",
};

// The file `name` in directory `dir`, composed in a stack buffer.
class FilePath {
 public:
  FilePath(const std::string& dir, const char* name) {
    const size_t name_size = std::strlen(name);
    if (dir.size() + 1 + name_size + 1 > sizeof(path_)) return;  // stays "": open fails
    std::memcpy(path_, dir.data(), dir.size());
    path_[dir.size()] = '/';
    std::memcpy(path_ + dir.size() + 1, name, name_size + 1);
  }
  const char* c_str() const { return path_; }

 private:
  char path_[4096] = "";
};

// The file of a memory cgroup whose "oom_kill" line counts its processes
// killed for lack of memory.
const char* OomKillsFile(bool unified) { return unified ? "memory.events" : "memory.oom_control"; }

// For a "key value" line whose key is `key`, stores the value and returns true.
bool KeyedValue(std::string_view line, std::string_view key, uint64_t& value) {
  if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ' ') return false;
  return ParseNumber(line.substr(key.size() + 1), value);
}

// Adds the number after `field` ("<space>name=") in `line`, if any, to `total`.
void AddFieldValue(std::string_view line, std::string_view field, uint64_t& total) {
  const size_t at = line.find(field);
  uint64_t value = 0;
  if (at != std::string_view::npos && ParseNumber(line.substr(at + field.size()), value)) total += value;
}

// Whether `text` is a 64-digit lowercase hexadecimal container id.
bool IsContainerId(std::string_view text) {
  if (text.size() != 64) return false;
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// The container id in one component of a cgroup path: "<id>" or
// "<prefix>-<id>.scope"; empty when there is none.
std::string_view ContainerIdInComponent(std::string_view component) {
  if (component.ends_with(".scope")) component.remove_suffix(6);
  const size_t dash = component.rfind('-');
  if (dash != std::string_view::npos) component.remove_prefix(dash + 1);
  return IsContainerId(component) ? component : std::string_view();
}

// The innermost container id in cgroup path `path`; empty when there is none.
std::string_view ContainerIdInPath(std::string_view path) {
  std::string_view innermost;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view component = path.substr(0, slash);
    const std::string_view id = ContainerIdInComponent(component);
    if (!id.empty()) innermost = id;
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return innermost;
}

// One line of /proc/<pid>/cgroup: "hierarchy-id:controller,list:/path".
struct MembershipLine {
  std::string_view controllers;  // empty for the v2 line "0::/path"
  std::string_view path;
};

bool ParseMembershipLine(std::string_view line, MembershipLine& out) {
  const size_t first = line.find(':');
  if (first == std::string_view::npos) return false;
  const size_t second = line.find(':', first + 1);
  if (second == std::string_view::npos) return false;
  out.controllers = line.substr(first + 1, second - first - 1);
  out.path = line.substr(second + 1);
  return !out.path.empty() && out.path[0] == '/';
}

// Whether comma-separated `list` holds `item`.
bool ListHas(std::string_view list, std::string_view item) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    if (list.substr(0, comma) == item) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// Undoes mountinfo's octal escapes ("\040" for a space).
std::string Unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size() && text[i + 1] >= '0' && text[i + 1] <= '3' &&
        text[i + 2] >= '0' && text[i + 2] <= '7' && text[i + 3] >= '0' && text[i + 3] <= '7') {
      out += static_cast<char>((text[i + 1] - '0') * 64 + (text[i + 2] - '0') * 8 + (text[i + 3] - '0'));
      i += 3;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The status for a /proc file of `pid` that could not be opened (errno `error`).
Status ProcFileError(int pid, const std::string& path, int error) {
  if (error == ENOENT || error == ESRCH) return Status::NotFound("process " + std::to_string(pid) + " is gone");
  return Status::Unavailable("cannot read " + path + ": " + std::strerror(error));
}

}  // namespace

CgroupReader::CgroupReader(std::string root) : root_(std::move(root)) {
  if (root_.empty() || root_.back() != '/') root_ += '/';
  const std::string mountinfo = root_ + "proc/self/mountinfo";
  // "36 35 98:0 /root /mnt/point rw,noatime master:1 - cgroup cgroup rw,cpu,cpuacct"
  ForEachLine(mountinfo.c_str(), [this](std::string_view line) {
    const size_t separator = line.find(" - ");
    if (separator == std::string_view::npos) return;
    std::string_view head[5];
    std::string_view tail[3];
    if (SplitFields(line.substr(0, separator), head, 5) < 5) return;
    if (SplitFields(line.substr(separator + 3), tail, 3) < 3) return;
    Mount mount;
    if (tail[0] == "cgroup2") {
      mount.unified = true;
    } else if (tail[0] == "cgroup") {
      std::string_view options = tail[2];
      while (!options.empty()) {
        const size_t comma = options.find(',');
        mount.controllers.emplace_back(options.substr(0, comma));
        if (comma == std::string_view::npos) break;
        options.remove_prefix(comma + 1);
      }
    } else {
      return;
    }
    const std::string point = Unescape(head[4]);
    mount.point = root_ + (point.empty() ? point : point.substr(1));
    if (mount.point.size() > 1 && mount.point.back() == '/') mount.point.pop_back();
    mount.root = Unescape(head[3]);
    mounts_.push_back(std::move(mount));
  });
}

bool CgroupReader::HasV1Controller(std::string_view controller) const {
  for (const Mount& mount : mounts_)
    for (const std::string& c : mount.controllers)
      if (c == controller) return true;
  return false;
}

CgroupLayout CgroupReader::Layout() const {
  const bool unified = std::any_of(mounts_.begin(), mounts_.end(), [](const Mount& m) { return m.unified; });
  bool v1 = HasV1Controller("cpu");
  for (const char* controller : kMeasuredV1Controllers) v1 = v1 || HasV1Controller(controller);
  if (v1) return unified ? CgroupLayout::kHybrid : CgroupLayout::kV1;
  return unified ? CgroupLayout::kV2 : CgroupLayout::kNone;
}

std::vector<std::string> CgroupReader::UnmountedV1Controllers() const {
  std::vector<std::string> unmounted;
  for (const char* controller : kMeasuredV1Controllers)
    if (!HasV1Controller(controller)) unmounted.emplace_back(controller);
  return unmounted;
}

std::string CgroupReader::Resolve(bool unified, const std::string& controller, const std::string& path) const {
  for (const Mount& mount : mounts_) {
    if (mount.unified != unified) continue;
    if (!unified) {
      bool has = false;
      for (const std::string& c : mount.controllers) has = has || c == controller;
      if (!has) continue;
    }
    std::string_view relative = path;
    if (mount.root != "/") {
      if (!relative.starts_with(mount.root)) continue;
      relative.remove_prefix(mount.root.size());
      if (!relative.empty() && relative[0] != '/') continue;  // "/a/bc" is not under "/a/b"
    }
    if (relative == "/") relative = {};
    return mount.point + std::string(relative);
  }
  return {};
}

Result<std::string> CgroupReader::ProcPath(int pid, const char* name) const {
  if (pid <= 0) return Status::InvalidArgument("pid " + std::to_string(pid) + " is not a process id");
  return root_ + "proc/" + std::to_string(pid) + "/" + name;
}

Result<CgroupPaths> CgroupReader::Locate(int pid) const {
  Result<std::string> file = ProcPath(pid, "cgroup");
  if (!file.ok()) return file.status();
  // The process's cgroup per wanted v1 controller, and its v2 cgroup.
  std::string cpuacct, memory, pids, blkio, cpuset, unified;
  const int error = ForEachLine(file->c_str(), [&](std::string_view line) {
    MembershipLine member;
    if (!ParseMembershipLine(line, member)) return;
    if (member.controllers.empty()) {
      unified.assign(member.path);
      return;
    }
    if (ListHas(member.controllers, "cpuacct")) cpuacct.assign(member.path);
    if (ListHas(member.controllers, "memory")) memory.assign(member.path);
    if (ListHas(member.controllers, "pids")) pids.assign(member.path);
    if (ListHas(member.controllers, "blkio")) blkio.assign(member.path);
    if (ListHas(member.controllers, "cpuset")) cpuset.assign(member.path);
  });
  if (error != 0) return ProcFileError(pid, *file, error);
  // A process that has ended and awaits its parent is moved to the root of
  // every hierarchy: what would be read there is the whole host's (every
  // core in cpuset.cpus), never a container's.
  const std::string* const found[] = {&cpuacct, &memory, &pids, &blkio, &cpuset, &unified};
  if (std::all_of(std::begin(found), std::end(found), [](const std::string* p) { return p->empty() || *p == "/"; }))
    return Status::NotFound("process " + std::to_string(pid) +
                            " is in no container's cgroup (each of its cgroups is the root, as for a process that "
                            "has ended)");

  const std::string unified_dir = unified.empty() ? std::string() : Resolve(true, "", unified);
  // A controller's v1 directory when its v1 hierarchy is mounted, else the v2 one.
  auto pick = [&](const char* controller, const std::string& v1_path) {
    CgroupDir dir;
    if (!v1_path.empty()) dir.path = Resolve(false, controller, v1_path);
    if (dir.path.empty() && !unified_dir.empty()) dir = {unified_dir, true};
    return dir;
  };
  CgroupPaths paths{pick("cpuacct", cpuacct), pick("memory", memory), pick("pids", pids), pick("blkio", blkio),
                    pick("cpuset", cpuset)};
  if (paths.cpu.path.empty() && paths.memory.path.empty() && paths.pids.path.empty() && paths.io.path.empty()) {
    if (mounts_.empty()) {
      return Status::FailedPrecondition("no cgroup filesystem is listed in " + root_ +
                                        "proc/self/mountinfo: mount cgroupfs (v1 or v2) to get container stats");
    }
    return Status::FailedPrecondition("none of the cgroups of process " + std::to_string(pid) +
                                      " is under a cgroup mount listed in " + root_ +
                                      "proc/self/mountinfo (an agent in a container needs the host's cgroup tree)");
  }
  return paths;
}

bool CgroupPathsName(const CgroupPaths& paths, std::string_view container_id) {
  if (container_id.empty()) return false;
  bool found = false;
  for (const CgroupDir* dir : {&paths.cpu, &paths.memory, &paths.pids, &paths.io, &paths.cpuset}) {
    if (dir->path.empty()) continue;
    if (dir->path.find(container_id) == std::string::npos) return false;
    found = true;
  }
  return found;
}

Result<uint64_t> ReadOomKills(const CgroupDir& memory) {
  const char* name = OomKillsFile(memory.unified);
  uint64_t kills = 0;
  const FilePath path(memory.path, name);
  if (int error = ForEachLine(path.c_str(), [&](std::string_view line) { KeyedValue(line, "oom_kill", kills); }))
    return Status::NotFound(memory.path + "/" + name + " cannot be read (" + ErrnoText(error) +
                            "): the cgroup is gone");
  return kills;
}

Result<uint64_t> ReadOomKillsAt(int fd) {
  uint64_t kills = 0;
  if (int error = ForEachLineAt(fd, [&](std::string_view line) { KeyedValue(line, "oom_kill", kills); },
                                FileEnd::kShortRead))
    return Status::NotFound("the out-of-memory counter of a cgroup cannot be read (" + ErrnoText(error) +
                            "): the cgroup is gone");
  return kills;
}

struct CgroupFiles::File {
  std::string path;  // empty: the measure has no directory, or its file does not exist
  UniqueFd fd;       // kept open; invalid: opened per reading
};

CgroupFiles::CgroupFiles(const CgroupPaths& paths, bool keep_open)
    : files_(std::make_unique<File[]>(kSlots)),
      cpu_unified_(paths.cpu.unified),
      memory_unified_(paths.memory.unified),
      io_unified_(paths.io.unified) {
  for (const CgroupDir* dir : {&paths.cpu, &paths.memory, &paths.pids, &paths.io})
    if (some_dir_.empty()) some_dir_ = dir->path;
  // Only cgroupfs makes a kept file of a removed cgroup stop reading; on
  // any other filesystem (a test's fake tree) it would read stale values.
  struct statfs fs {};
  keep_open = keep_open && ::statfs(some_dir_.c_str(), &fs) == 0 &&
              (fs.f_type == CGROUP_SUPER_MAGIC || fs.f_type == CGROUP2_SUPER_MAGIC);
  // The file `name` of `dir` in `slot`, opened when kept; false when it does not exist.
  auto name = [&](Slot slot, const CgroupDir& dir, const char* file) {
    if (dir.path.empty()) return false;
    File& f = files_[slot];
    f.path = dir.path + "/" + file;
    if (!keep_open) return ::access(f.path.c_str(), F_OK) == 0;
    f.fd = UniqueFd(OpenReadOnly(f.path.c_str()));
    if (f.fd.valid() || (errno != ENOENT && errno != ENOTDIR)) return true;  // EMFILE and the like: per reading
    f.path.clear();
    return false;
  };
  const bool v2_memory = paths.memory.unified;
  name(kCpu, paths.cpu, cpu_unified_ ? "cpu.stat" : "cpuacct.usage");
  name(kMemoryUsed, paths.memory, v2_memory ? "memory.current" : "memory.usage_in_bytes");
  name(kMemoryLimit, paths.memory, v2_memory ? "memory.max" : "memory.limit_in_bytes");
  name(kMemoryStat, paths.memory, "memory.stat");
  name(kOomKills, paths.memory, OomKillsFile(v2_memory));
  name(kPids, paths.pids, "pids.current");
  name(kCpuset, paths.cpuset, "cpuset.cpus");
  if (io_unified_) {
    name(kIo, paths.io, "io.stat");
  } else {
    for (const char* file : kBlkioFiles)
      if (name(kIo, paths.io, file)) break;
  }
}

CgroupFiles::CgroupFiles(CgroupFiles&&) noexcept = default;
CgroupFiles& CgroupFiles::operator=(CgroupFiles&&) noexcept = default;
CgroupFiles::~CgroupFiles() = default;

size_t CgroupFiles::OpenFiles() const {
  size_t open = 0;
  for (size_t slot = 0; slot < kSlots; ++slot) open += files_[slot].fd.valid() ? 1 : 0;
  return open;
}

template <typename OnLine>
bool CgroupFiles::ForEachLineOf(Slot slot, OnLine&& on_line) const {
  const File& file = files_[slot];
  if (file.path.empty()) return false;
  if (file.fd.valid()) return ForEachLineAt(file.fd.get(), on_line, FileEnd::kShortRead) == 0;
  return ForEachLine(file.path.c_str(), on_line) == 0;
}

bool CgroupFiles::ReadNumber(Slot slot, uint64_t& value) const {
  bool first = true;
  return ForEachLineOf(slot, [&](std::string_view line) {
    uint64_t parsed = 0;
    if (std::exchange(first, false) && ParseNumber(line, parsed)) value = parsed;
  });
}

Result<CgroupSample> CgroupFiles::Read(CgroupMeasures which) const {
  CgroupSample sample;
  bool any_file = false;

  if (cpu_unified_) {
    uint64_t usec = 0;
    any_file |= ForEachLineOf(kCpu, [&](std::string_view line) { KeyedValue(line, "usage_usec", usec); });
    sample.cpu_usage_ns = usec * 1000;
  } else {
    any_file |= ReadNumber(kCpu, sample.cpu_usage_ns);
  }

  any_file |= ReadNumber(kMemoryUsed, sample.memory_used_bytes);
  any_file |= ReadNumber(kPids, sample.pids);

  if (which == CgroupMeasures::kAll) {
    if (memory_unified_) {
      any_file |= ForEachLineOf(kMemoryStat,
                                [&](std::string_view line) { KeyedValue(line, "file", sample.memory_cache_bytes); });
    } else {
      uint64_t cache = 0, total_cache = 0;
      bool has_total = false;
      any_file |= ForEachLineOf(kMemoryStat, [&](std::string_view line) {
        KeyedValue(line, "cache", cache);
        has_total = KeyedValue(line, "total_cache", total_cache) || has_total;
      });
      sample.memory_cache_bytes = has_total ? total_cache : cache;
    }
    any_file |= ReadNumber(kMemoryLimit, sample.memory_limit_bytes);  // v2 "max" reads as 0
    if (sample.memory_limit_bytes >= kUnlimitedMemoryFloor) sample.memory_limit_bytes = 0;
    any_file |= ForEachLineOf(kOomKills, [&](std::string_view line) { KeyedValue(line, "oom_kill", sample.oom_kills); });
    ForEachLineOf(kCpuset, [&](std::string_view line) {
      if (sample.cpuset_cpus.empty()) sample.cpuset_cpus.assign(line.substr(0, line.find_last_not_of(" \t\r") + 1));
    });
    if (io_unified_) {
      // "8:0 rbytes=1 wbytes=2 rios=3 wios=4 dbytes=0 dios=0", one line per device.
      any_file |= ForEachLineOf(kIo, [&](std::string_view line) {
        AddFieldValue(line, " rbytes=", sample.io_read_bytes);
        AddFieldValue(line, " wbytes=", sample.io_write_bytes);
      });
    } else {
      // "8:0 Read 4096", "8:0 Write 512", ... per device, then "Total 4608".
      any_file |= ForEachLineOf(kIo, [&](std::string_view line) {
        const size_t space = line.find(' ');
        if (space == std::string_view::npos) return;
        uint64_t value = 0;
        if (KeyedValue(line.substr(space + 1), "Read", value)) sample.io_read_bytes += value;
        if (KeyedValue(line.substr(space + 1), "Write", value)) sample.io_write_bytes += value;
      });
    }
  }

  if (!any_file) return Status::NotFound("cgroup " + some_dir_ + " is gone (its container or process has exited)");
  return sample;
}

Result<CgroupSample> CgroupReader::Read(const CgroupPaths& paths) const {
  return CgroupFiles(paths, /*keep_open=*/false).Read(CgroupMeasures::kAll);
}

Result<CgroupSample> CgroupReader::Read(int pid) const {
  Result<CgroupPaths> paths = Locate(pid);
  if (!paths.ok()) return paths.status();
  return Read(*paths);
}

Result<std::string> CgroupReader::ContainerIdOfPid(int pid) const {
  Result<std::string> file = ProcPath(pid, "cgroup");
  if (!file.ok()) return file.status();
  std::string id;
  std::string first_path;  // for the message when there is no id
  const int error = ForEachLine(file->c_str(), [&](std::string_view line) {
    MembershipLine member;
    if (!id.empty() || !ParseMembershipLine(line, member)) return;
    if (first_path.empty()) first_path.assign(member.path);
    id.assign(ContainerIdInPath(member.path));
  });
  if (error != 0) return ProcFileError(pid, *file, error);
  if (id.empty()) {
    return Status::NotFound("process " + std::to_string(pid) + " belongs to no container (its cgroup is " +
                            (first_path.empty() ? std::string("unknown") : first_path) + ")");
  }
  return id;
}

Result<int> CgroupReader::NamespacePid(int pid) const {
  Result<std::string> file = ProcPath(pid, "status");
  if (!file.ok()) return file.status();
  // "NSpid:\t4242\t17\t1": the pid in each nested namespace, outermost first.
  int innermost = 0;
  bool found = false;
  const int error = ForEachLine(file->c_str(), [&](std::string_view line) {
    if (found || !line.starts_with("NSpid:")) return;
    line.remove_prefix(6);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    const size_t blank = line.find_last_of(" \t");
    const std::string_view last = blank == std::string_view::npos ? line : line.substr(blank + 1);
    found = std::from_chars(last.data(), last.data() + last.size(), innermost).ec == std::errc() && innermost > 0;
  });
  if (error != 0) return ProcFileError(pid, *file, error);
  if (!found) {
    return Status::FailedPrecondition(
        "per-process attribution unavailable: this kernel has no NSpid field (Linux < 4.1)");
  }
  return innermost;
}

}  // namespace slotd
