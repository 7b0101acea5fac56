#include "agent/mount_stage.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

namespace slotd {
namespace {

namespace fs = std::filesystem;

// The flags of the filesystem under `fd` that a bind of it keeps (a bind
// remount that left them out would clear them).
unsigned long KeptFlags(int fd) {
  struct statvfs vfs {};
  if (::fstatvfs(fd, &vfs) != 0) return 0;
  unsigned long flags = 0;
  if (vfs.f_flag & ST_RDONLY) flags |= MS_RDONLY;
  if (vfs.f_flag & ST_NOEXEC) flags |= MS_NOEXEC;
  if (vfs.f_flag & ST_NOATIME) flags |= MS_NOATIME;
  if (vfs.f_flag & ST_NODIRATIME) flags |= MS_NODIRATIME;
  if (vfs.f_flag & ST_RELATIME) flags |= MS_RELATIME;
  return flags;
}

}  // namespace

MountStage::MountStage(std::string root) : root_(std::move(root)) {}

Result<std::vector<Mount>> MountStage::Bind(const std::string& kernel_id, const std::vector<ResolvedMount>& mounts) {
  if (mounts.empty()) return std::vector<Mount>();
  MutexLock lock(mutex_);
  if (Status removed = RemoveLocked(kernel_id); !removed.ok()) return removed;  // a bind left by an earlier try
  Result<std::vector<Mount>> binds = BindLocked(kernel_id, mounts);
  if (!binds.ok()) {
    if (Status removed = RemoveLocked(kernel_id); !removed.ok())
      spdlog::error("kernel {}: {}", kernel_id, removed.message());
  }
  return binds;
}

Result<std::vector<Mount>> MountStage::BindLocked(const std::string& kernel_id,
                                                  const std::vector<ResolvedMount>& mounts) {
  auto failed = [](const std::string& what, int error) {
    return Status::Unavailable(what + ": " + ErrnoText(error) +
                               (error == EPERM ? "; binding a kernel's mounts needs an agent that runs as root" : ""));
  };
  const std::string dir = root_ + "/" + kernel_id;
  if (::mkdir(root_.c_str(), 0700) != 0 && errno != EEXIST) return failed("cannot make " + root_, errno);
  if (::mkdir(dir.c_str(), 0700) != 0) return failed("cannot make " + dir, errno);
  std::vector<Mount> binds;
  for (size_t i = 0; i < mounts.size(); ++i) {
    const ResolvedMount& mount = mounts[i];
    const std::string path = dir + "/" + std::to_string(i);
    if (mount.is_directory) {
      if (::mkdir(path.c_str(), 0700) != 0) return failed("cannot make " + path, errno);
    } else {
      const int made = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
      if (made < 0) return failed("cannot make " + path, errno);
      ::close(made);
    }
    const std::string source = "/proc/self/fd/" + std::to_string(mount.source.get());
    if (::mount(source.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0)
      return failed("cannot bind " + mount.path + " onto " + path, errno);
    const unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | KeptFlags(mount.source.get()) |
                                (mount.read_only ? MS_RDONLY : 0);
    if (::mount(nullptr, path.c_str(), nullptr, flags, nullptr) != 0)
      return failed("cannot make the bind of " + mount.path + " at " + path + " nosuid, nodev" +
                        (mount.read_only ? ", read-only" : ""),
                    errno);
    binds.push_back({Mount::Type::kBind, path, mount.target, mount.read_only, 0});
  }
  return binds;
}

Status MountStage::Remove(const std::string& kernel_id) {
  MutexLock lock(mutex_);
  return RemoveLocked(kernel_id);
}

Status MountStage::RemoveLocked(const std::string& kernel_id) {
  const std::string dir = root_ + "/" + kernel_id;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return Status::Ok();
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string path = it->path().string();
    // Unbind every layer (a bind made twice is two); EINVAL: nothing bound there any more.
    while (::umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
    }
    if (errno != EINVAL && errno != ENOENT)
      return Status::Unavailable("cannot unbind " + path + ", a mount of kernel " + kernel_id + ": " + ErrnoText(errno));
    // Never recursive: an entry that is somehow still bound is refused (EBUSY), not emptied.
    if (::remove(path.c_str()) != 0 && errno != ENOENT)
      return Status::Unavailable("cannot remove " + path + ", a mount of kernel " + kernel_id + ": " + ErrnoText(errno));
  }
  if (::rmdir(dir.c_str()) != 0 && errno != ENOENT)
    return Status::Unavailable("cannot remove " + dir + ", the mounts of kernel " + kernel_id + ": " + ErrnoText(errno));
  return Status::Ok();
}

void MountStage::Collect(const std::function<std::set<std::string>()>& known_ids) {
  MutexLock lock(mutex_);
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return;
  const std::set<std::string> known = known_ids();
  std::vector<std::string> leftovers;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!known.count(name)) leftovers.push_back(name);
  }
  for (const std::string& name : leftovers) {
    if (Status s = RemoveLocked(name); !s.ok())
      spdlog::warn("the mounts of {}, no kernel of this agent, stay: {}", name, s.message());
    else
      spdlog::info("removed the mounts of {}, no kernel of this agent", name);
  }
}

}  // namespace slotd
