#include "agent/mounts.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "agent/scratch_store.h"
#include "common/paths.h"

namespace slotd {
namespace {

namespace fs = std::filesystem;

// The directories of the container no mount may cover or enter.
constexpr const char* kProtectedTargets[] = {"/proc", "/sys", "/dev", kScratchTarget};
// What the engine itself mounts in every container: a mount there would
// make the start fail, or hide what the engine provides.
constexpr const char* kEngineTargets[] = {"/etc", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf"};

using Inode = std::pair<dev_t, ino_t>;

// "/srv/datasets (ro), /srv/shared (rw)", or "none" when nothing is allowed.
std::string Allowed(const std::vector<MountAllow>& allowed) {
  std::string text;
  for (const MountAllow& entry : allowed) text += (text.empty() ? "" : ", ") + entry.path + " (" + entry.mode + ")";
  return text.empty() ? "none ([container] mount-allow is not set)" : text;
}

Status CheckTarget(const std::string& field, const std::string& target) {
  if (target == "/")
    return Status::PermissionDenied(field + ".target: a mount may not cover the container's whole filesystem");
  for (const char* protected_dir : kProtectedTargets) {
    if (IsWithin(target, protected_dir))
      return Status::PermissionDenied(field + ".target: " + target + " is over " + protected_dir +
                                      ", which the agent provides; mount somewhere else, e.g. /data");
  }
  for (const char* engine_target : kEngineTargets) {
    if (target == engine_target)
      return Status::PermissionDenied(field + ".target: " + target +
                                      " is provided by the container engine itself; mount somewhere else, e.g. /data");
  }
  return Status::Ok();
}

// What kind of file `mode` is, when a kernel must not be given it; null otherwise.
const char* Unmountable(mode_t mode) {
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return nullptr;
}

// An allowed directory that holds the source.
struct Holder {
  std::string root;      // the entry's directory, as configured or resolved
  std::string relative;  // the source beneath it ("" for the directory itself)
  bool writable = false;
};

// The allow-list entries whose directory holds `source` (both normal paths),
// matched by the entry as written and as resolved, since an operator may
// name an allowed directory through a link of the host.
std::vector<Holder> Holders(const std::string& source, const std::vector<MountAllow>& allowed) {
  std::vector<Holder> holders;
  for (const MountAllow& entry : allowed) {
    std::error_code ec;
    const fs::path resolved = fs::canonical(entry.path, ec);
    for (const std::string& root : {NormalPath(entry.path), ec ? std::string() : resolved.string()}) {
      if (root.empty() || !IsWithin(source, root)) continue;
      std::string relative = source.substr(root.size());
      while (!relative.empty() && relative.front() == '/') relative.erase(0, 1);
      holders.push_back({root, relative, entry.mode == "rw"});
      break;
    }
  }
  return holders;
}

// Opens `holder.relative` beneath `holder.root` one component at a time with
// O_NOFOLLOW, so that no link beneath the root is followed.
Result<UniqueFd> OpenBeneath(const Holder& holder, const std::string& field, const std::string& source) {
  UniqueFd dir(::open(holder.root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid())
    return Status::InvalidArgument(field + ".source: the allowed directory " + holder.root + " cannot be opened (" +
                                   ErrnoText(errno) + "); ask the operator to check [container] mount-allow");
  std::string walked = holder.root;
  size_t begin = 0;
  while (begin < holder.relative.size()) {
    size_t end = holder.relative.find('/', begin);
    if (end == std::string::npos) end = holder.relative.size();
    const std::string name = holder.relative.substr(begin, end - begin);
    begin = end + 1;
    walked += (walked == "/" ? "" : "/") + name;
    UniqueFd next(::openat(dir.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!next.valid())
      return Status::InvalidArgument(field + ".source: " + source + " cannot be opened on this node (" + walked +
                                     ": " + ErrnoText(errno) + "); mount a directory that exists");
    struct stat st {};
    if (::fstat(next.get(), &st) != 0)
      return Status::InvalidArgument(field + ".source: " + walked + " cannot be examined: " + ErrnoText(errno));
    if (S_ISLNK(st.st_mode))
      return Status::PermissionDenied(field + ".source: " + source + " passes through a symbolic link (" + walked +
                                      "); links beneath an allowed directory are never followed: name the "
                                      "directory itself");
    if (begin < holder.relative.size() && !S_ISDIR(st.st_mode))
      return Status::InvalidArgument(field + ".source: " + walked + " is not a directory");
    dir = std::move(next);
  }
  return dir;
}

// The path `fd` names now, as the kernel of the host sees it.
std::string PathOf(int fd, const std::string& fallback) {
  std::error_code ec;
  const fs::path path = fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
  return ec ? fallback : path.string();
}

// Refuses a source that is, holds or lies in a protected path.
Status CheckProtected(const std::string& field, const ResolvedMount& mount,
                      const std::vector<OwnPath>& protected_paths) {
  for (const OwnPath& p : protected_paths) {
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(p.path, ec);
    for (const std::string& path : {NormalPath(p.path), ec ? std::string() : resolved.string()}) {
      if (path.empty()) continue;
      const bool holds = IsWithin(path, mount.path) && path != mount.path;
      const bool inside = IsWithin(mount.path, path);
      struct stat st {};
      const bool same = ::stat(path.c_str(), &st) == 0 && st.st_dev == mount.device && st.st_ino == mount.inode;
      if (!holds && !inside && !same) continue;
      const std::string how = holds ? "holds " : inside && !same ? "lies in " : "is ";
      return Status::PermissionDenied(field + ".source: " + mount.path + " " + how + p.what + " (" + p.path +
                                      "), which no kernel may reach; mount another directory");
    }
  }
  return Status::Ok();
}

// Looks through the directory `mount` for sockets, FIFOs, device nodes and
// protected files (by inode: a hard link is the file), up to
// kMaxScannedEntries entries, without entering other filesystems.
Status ScanDirectory(const std::string& field, const ResolvedMount& mount, const std::set<Inode>& protected_inodes) {
  struct Pending {
    UniqueFd dir;
    std::string relative;
  };
  std::vector<Pending> stack;
  stack.push_back({UniqueFd(::openat(mount.source.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)), ""});
  size_t seen = 0;
  while (!stack.empty()) {
    Pending pending = std::move(stack.back());
    stack.pop_back();
    if (!pending.dir.valid()) continue;
    const int listed = ::dup(pending.dir.get());
    DIR* listing = listed < 0 ? nullptr : ::fdopendir(listed);
    if (!listing) {
      if (listed >= 0) ::close(listed);
      continue;
    }
    while (const dirent* entry = ::readdir(listing)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      if (++seen > kMaxScannedEntries) {
        ::closedir(listing);
        spdlog::warn("{}: {} has more than {} entries; the rest was not looked through for sockets, FIFOs and "
                     "device nodes", field, mount.path, kMaxScannedEntries);
        return Status::Ok();
      }
      struct stat st {};
      if (::fstatat(pending.dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      const std::string relative = pending.relative + "/" + name;
      if (const char* kind = Unmountable(st.st_mode)) {
        ::closedir(listing);
        return Status::PermissionDenied(field + ".source: " + mount.path + " holds " + kind + " (" + mount.path +
                                        relative + "); a kernel could reach what is behind it, so a directory "
                                        "holding sockets, FIFOs or device nodes is never mounted");
      }
      if (protected_inodes.count({st.st_dev, st.st_ino})) {
        ::closedir(listing);
        return Status::PermissionDenied(field + ".source: " + mount.path + " holds " + mount.path + relative +
                                        ", a link to a file of the agent that no kernel may reach");
      }
      if (S_ISDIR(st.st_mode) && st.st_dev == mount.device)
        stack.push_back({UniqueFd(::openat(pending.dir.get(), name.c_str(),
                                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)),
                         relative});
    }
    ::closedir(listing);
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<ResolvedMount>> ResolveMounts(const std::vector<RequestedMount>& requested,
                                                 const std::vector<MountAllow>& allowed,
                                                 const std::vector<OwnPath>& protected_paths) {
  std::set<Inode> protected_inodes;
  for (const OwnPath& p : protected_paths) {
    struct stat st {};
    if (::stat(p.path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) protected_inodes.insert({st.st_dev, st.st_ino});
  }
  std::vector<ResolvedMount> mounts;
  for (size_t i = 0; i < requested.size(); ++i) {
    const RequestedMount& asked = requested[i];
    const std::string field = "mounts[" + std::to_string(i) + "]";
    if (Status s = CheckTarget(field, asked.target); !s.ok()) return s;
    const std::string source = NormalPath(asked.source);
    const std::vector<Holder> holders = Holders(source, allowed);
    if (holders.empty())
      return Status::PermissionDenied(field + ".source: " + source +
                                      " is not in a directory this agent lets kernels mount; allowed: " +
                                      Allowed(allowed));
    const Holder* holder = &holders.front();
    for (const Holder& h : holders)
      if (h.writable) holder = &h;
    if (!asked.read_only && !holder->writable)
      return Status::PermissionDenied(field + ": " + source + " may be mounted read-only only; set \"readonly\": true "
                                      "(allowed: " + Allowed(allowed) + ")");
    Result<UniqueFd> opened = OpenBeneath(*holder, field, source);
    if (!opened.ok()) return opened.status();
    ResolvedMount mount;
    mount.source = std::move(*opened);
    mount.target = asked.target;
    mount.read_only = asked.read_only;
    struct stat st {};
    if (::fstat(mount.source.get(), &st) != 0)
      return Status::InvalidArgument(field + ".source: " + source + " cannot be examined: " + ErrnoText(errno));
    mount.path = PathOf(mount.source.get(), source);
    mount.device = st.st_dev;
    mount.inode = st.st_ino;
    mount.is_directory = S_ISDIR(st.st_mode);
    if (const char* kind = Unmountable(st.st_mode))
      return Status::PermissionDenied(field + ".source: " + source + " is " + kind +
                                      "; a kernel could reach what is behind it, so only directories and regular "
                                      "files are mounted");
    if (Status s = CheckProtected(field, mount, protected_paths); !s.ok()) return s;
    if (protected_inodes.count({st.st_dev, st.st_ino}))
      return Status::PermissionDenied(field + ".source: " + source + " is a file of the agent that no kernel may reach");
    if (mount.is_directory) {
      if (Status s = ScanDirectory(field, mount, protected_inodes); !s.ok()) return s;
    }
    mounts.push_back(std::move(mount));
  }
  return mounts;
}

Status VerifyMounted(int pid, const std::vector<ResolvedMount>& mounts) {
  const std::string root = "/proc/" + std::to_string(pid) + "/root";
  struct stat st {};
  if (pid <= 0 || ::stat(root.c_str(), &st) != 0) return Status::Ok();  // nothing runs to see anything
  for (const ResolvedMount& mount : mounts) {
    if (::stat((root + mount.target).c_str(), &st) != 0) {
      if (::stat(root.c_str(), &st) != 0) return Status::Ok();  // it ended meanwhile
      return Status::PermissionDenied("the kernel has nothing at " + mount.target + ", where " + mount.path +
                                      " should be mounted (" + ErrnoText(errno) + ")");
    }
    if (st.st_dev != mount.device || st.st_ino != mount.inode)
      return Status::PermissionDenied("what the kernel sees at " + mount.target + " is not " + mount.path +
                                      ", which was asked for and checked; the kernel is not kept");
  }
  return Status::Ok();
}

}  // namespace slotd
