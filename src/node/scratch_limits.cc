#include "node/scratch_limits.h"

#include <fcntl.h>
#include <linux/dqblk_xfs.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/quota.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include "common/subprocess.h"
#include "common/units.h"
#include "common/unique_fd.h"

namespace slotd {

namespace {

// quotactl_fd(2), which glibc 2.36 does not wrap.
int QuotactlFd(int fd, unsigned cmd, int id, void* addr) {
  return static_cast<int>(::syscall(SYS_quotactl_fd, fd, cmd, id, addr));
}

// `path`, or its nearest parent that exists.
std::string NearestExisting(std::string path) {
  struct stat st{};
  while (!path.empty() && ::stat(path.c_str(), &st) != 0) {
    const size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return path.empty() ? "/" : path;
}

// True when `name` is an executable in PATH or in /sbin or /usr/sbin (where
// mkfs lives, and which a service's PATH may lack).
bool ProgramExists(const std::string& name) {
  std::string path = ::getenv("PATH") ? ::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin";
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

Status ProjectQuotaEnforced(const std::string& dir) {
  const std::string existing = NearestExisting(dir);
  UniqueFd fd(::open(existing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return Status::FailedPrecondition("cannot open " + existing + " to read its quotas: " + ErrnoText(errno));
  fs_quota_statv state{};
  state.qs_version = FS_QSTATV_VERSION1;
  if (QuotactlFd(fd.get(), QCMD(Q_XGETQSTATV, PRJQUOTA), 0, &state) != 0) {
    const int error = errno;
    if (error == ENOSYS)
      return Status::FailedPrecondition("this kernel has no quota support (it needs CONFIG_QUOTA and Linux 5.14 or "
                                        "later for quotactl_fd)");
    return Status::FailedPrecondition("the filesystem of " + existing + " keeps no project quotas (" +
                                      ErrnoText(error) + "); mount it with project quotas (XFS: -o prjquota; ext4 "
                                      "made with -O quota,project: -o prjquota)");
  }
  if (!(state.qs_flags & FS_QUOTA_PDQ_ACCT))
    return Status::FailedPrecondition("the filesystem of " + existing + " keeps no project quotas; mount it with "
                                      "project quotas (XFS: -o prjquota; ext4 made with -O quota,project: -o prjquota)");
  if (!(state.qs_flags & FS_QUOTA_PDQ_ENFD))
    return Status::FailedPrecondition("the filesystem of " + existing + " counts project quotas but does not enforce "
                                      "them; mount it with -o prjquota rather than pqnoenforce");
  return Status::Ok();
}

Status LimitByProjectQuota(int dir_fd, const std::string& dir, uint64_t bytes) {
  struct stat st{};
  if (::fstat(dir_fd, &st) != 0)
    return Status::FailedPrecondition("cannot read " + dir + " to limit it: " + ErrnoText(errno));
  // Project 0 is "no project"; ids are 32 bits.
  if (st.st_ino == 0 || st.st_ino >= std::numeric_limits<uint32_t>::max())
    return Status::FailedPrecondition("cannot limit " + dir + " by a project quota: its inode number " +
                                      std::to_string(st.st_ino) + " does not fit a project id");
  const auto project = static_cast<uint32_t>(st.st_ino);
  fsxattr attributes{};
  if (::ioctl(dir_fd, FS_IOC_FSGETXATTR, &attributes) != 0)
    return Status::FailedPrecondition("cannot read the project of " + dir + ": " + ErrnoText(errno));
  attributes.fsx_projid = project;
  attributes.fsx_xflags |= FS_XFLAG_PROJINHERIT;
  if (::ioctl(dir_fd, FS_IOC_FSSETXATTR, &attributes) != 0)
    return Status::FailedPrecondition("cannot give " + dir + " project id " + std::to_string(project) + ": " +
                                      ErrnoText(errno) + "; its filesystem needs project support (ext4: -O project)");
  if_dqblk limit{};
  limit.dqb_bhardlimit = limit.dqb_bsoftlimit = (bytes + 1023) / 1024;  // in 1 KiB blocks
  limit.dqb_valid = QIF_BLIMITS;
  if (QuotactlFd(dir_fd, QCMD(Q_SETQUOTA, PRJQUOTA), static_cast<int>(project), &limit) != 0)
    return Status::FailedPrecondition("cannot set the project quota of " + dir + " (project " +
                                      std::to_string(project) + "): " + ErrnoText(errno));
  return Status::Ok();
}

Status LoopImagesPossible() {
  if (::access("/dev/loop-control", R_OK | W_OK) != 0)
    return Status::FailedPrecondition("no usable /dev/loop-control (" + ErrnoText(errno) +
                                      "): load the loop module or run the agent where it can reach loop devices");
  if (!ProgramExists("mkfs.ext4"))
    return Status::FailedPrecondition("mkfs.ext4 is not installed (Debian: apt-get install e2fsprogs)");
  if (::geteuid() != 0) return Status::FailedPrecondition("the agent does not run as root, so it cannot mount images");
  return Status::Ok();
}

Status MakeScratchImage(const std::string& image, uint64_t bytes) {
  UniqueFd fd(::open(image.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return Status::Unavailable("cannot make the scratch image " + image + ": " + ErrnoText(errno));
  const bool sized = ::ftruncate(fd.get(), static_cast<off_t>(bytes)) == 0;
  const int size_error = errno;
  fd.Reset();
  Status made = sized ? Status::Ok()
                      : Status::Unavailable("cannot size the scratch image " + image + ": " + ErrnoText(size_error));
  if (made.ok()) {
    Result<std::string> mkfs = RunProgram({"mkfs.ext4", "-q", "-F", "-m", "0", "-E", "nodiscard", image},
                                          std::chrono::minutes(2));
    if (!mkfs.ok()) made = Status::Unavailable("cannot make a filesystem in the scratch image " + image + ": " +
                                               mkfs.status().message());
  }
  if (!made.ok()) ::unlink(image.c_str());
  return made;
}

Status MountScratchImage(const std::string& image, const std::string& dir) {
  auto fail = [&](const std::string& what, int error) {
    return Status::Unavailable("cannot mount the scratch image " + image + " at " + dir + ": " + what + ": " +
                               ErrnoText(error));
  };
  UniqueFd file(::open(image.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  if (!file.valid()) return fail("open", errno);
  UniqueFd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control.valid()) return fail("/dev/loop-control", errno);
  // Another process may take the free device first: then ask again.
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int number = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (number < 0) return fail("no free loop device", errno);
    const std::string device = "/dev/loop" + std::to_string(number);
    UniqueFd loop(::open(device.c_str(), O_RDWR | O_CLOEXEC));
    if (!loop.valid()) return fail(device, errno);
    loop_config config{};
    config.fd = static_cast<uint32_t>(file.get());
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;  // the device goes with the last unmount
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), image.c_str(), LO_NAME_SIZE - 1);
    if (::ioctl(loop.get(), LOOP_CONFIGURE, &config) != 0) {
      if (errno == EBUSY) continue;
      return fail("configuring " + device, errno);
    }
    if (::mount(device.c_str(), dir.c_str(), "ext4", MS_NOSUID | MS_NODEV, "") != 0) {
      const int error = errno;
      ::ioctl(loop.get(), LOOP_CLR_FD, 0);
      return fail("mount of " + device, error);
    }
    ::rmdir((dir + "/lost+found").c_str());  // fsck's, not the kernel's
    return Status::Ok();
  }
  return fail("no free loop device after 16 tries", EBUSY);
}

bool IsMountPoint(const std::string& dir) {
  struct stat self{}, parent{};
  if (::lstat(dir.c_str(), &self) != 0 || ::stat((dir + "/..").c_str(), &parent) != 0) return false;
  return self.st_dev != parent.st_dev;
}

Result<uint64_t> FreeBytes(const std::string& dir) {
  const std::string existing = NearestExisting(dir);
  struct statvfs fs{};
  if (::statvfs(existing.c_str(), &fs) != 0)
    return Status::Unavailable("cannot read the free space of " + existing + ": " + ErrnoText(errno));
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

std::vector<std::string> ScratchProblems(const Config& config) {
  const ContainerConfig& c = config.container;
  std::vector<std::string> problems;
  if (c.scratch_type == ScratchType::kHostFile) {
    if (c.scratch_size == 0)
      problems.push_back("container.scratch-size: scratch-type = \"hostfile\" needs a size for the kernels that ask "
                         "for none, e.g. scratch-size = \"10g\"");
    if (Status possible = LoopImagesPossible(); !possible.ok())
      problems.push_back("container.scratch-type: \"hostfile\" needs loop-mounted images, and this node cannot: " +
                         possible.message() + "; or choose scratch-type hostdir or tmpfs");
  } else if (c.scratch_type == ScratchType::kHostDir && c.scratch_size > 0) {
    if (Status quota = ProjectQuotaEnforced(ScratchRoot(config)); !quota.ok())
      problems.push_back("container.scratch-size: a hostdir scratch is limited by project quotas, and " +
                         ScratchRoot(config) + " has none: " + quota.message() +
                         "; or set scratch-size = 0 (no limit), or choose scratch-type hostfile or tmpfs");
  }
  return problems;
}

std::string ScratchAbilities(const Config& config) {
  const std::string root = ScratchRoot(config);
  const Status quota = ProjectQuotaEnforced(root), loop = LoopImagesPossible();
  const std::string uses =
      config.container.scratch_size == 0
          ? std::string(config.container.scratch_type == ScratchType::kTmpfs ? " (a tmpfs of its memory" : " (no limit")
          : " (" + FormatSize(config.container.scratch_size);
  return "scratch limits on this node for " + root + ": hostdir by project quota: " +
         (quota.ok() ? "yes" : "no, " + quota.message()) + "; hostfile (loop-mounted ext4 images): " +
         (loop.ok() ? "yes" : "no, " + loop.message()) + "; tmpfs: yes. This config uses " +
         WordOf(ScratchTypeWords(), config.container.scratch_type) + uses + " unless a kernel asks for resources.scratch)";
}

}  // namespace slotd
