#include "agent/scratch_store.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

#include "common/unique_fd.h"
#include "node/scratch_limits.h"

namespace slotd {

namespace fs = std::filesystem;

namespace {

// The directory of markers under the root; a kernel id never starts with a dot.
constexpr char kMarkers[] = ".slotd-made";
// The directory of hostfile scratch images under the root.
constexpr char kImages[] = ".slotd-images";
constexpr char kImageSuffix[] = ".ext4";

// Gives the directory `path` to `owner`, mode 0700.
Status Own(const std::string& path, ScratchStore::Owner owner) {
  if (::chown(path.c_str(), static_cast<uid_t>(owner.uid), static_cast<gid_t>(owner.gid)) != 0 ||
      ::chmod(path.c_str(), 0700) != 0)
    return Status::Unavailable("cannot give the scratch directory " + path + " to uid " + std::to_string(owner.uid) +
                               " gid " + std::to_string(owner.gid) + ": " +
                               std::error_code(errno, std::generic_category()).message() +
                               "; giving a kernel's scratch to its user needs an agent that runs as root");
  return Status::Ok();
}

}  // namespace

ScratchStore::ScratchStore(std::string root, ScratchKind kind) : root_(std::move(root)), kind_(kind) {}

std::string ScratchStore::ImageOf(const std::string& kernel_id) const {
  return root_ + "/" + kImages + "/" + kernel_id + kImageSuffix;
}

std::string ScratchStore::MarkerOf(const std::string& kernel_id) const {
  return root_ + "/" + kMarkers + "/" + kernel_id;
}

Status ScratchStore::Mark(const std::string& kernel_id) const {
  const std::string marker = MarkerOf(kernel_id);
  std::error_code ec;
  fs::create_directories(root_ + "/" + kMarkers, ec);
  const int fd = ec ? -1 : ::open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || ::close(fd) != 0)
    return Status::Unavailable("cannot mark the scratch directory " + root_ + "/" + kernel_id + " as the agent's (" +
                               marker + "): " + (ec ? ec : std::error_code(errno, std::generic_category())).message() +
                               "; check [container] scratch-root and the agent's rights there");
  return Status::Ok();
}

Status ScratchStore::Limit(const std::string& kernel_id, const std::string& path, uint64_t limit_bytes) const {
  if (kind_ == ScratchKind::kHostDir) {
    if (limit_bytes == 0) return Status::Ok();
    UniqueFd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dir.valid())
      return Status::Unavailable("cannot open the scratch directory " + path + ": " +
                                 std::error_code(errno, std::generic_category()).message());
    return LimitByProjectQuota(dir.get(), path, limit_bytes);
  }
  if (IsMountPoint(path)) return Status::Ok();  // mounted already: a kernel the agent adopts
  const std::string image = ImageOf(kernel_id);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(image, ec))) {
    if (limit_bytes == 0)
      return Status::FailedPrecondition("a hostfile scratch needs a size: set [container] scratch-size or ask for "
                                        "resources.scratch");
    fs::create_directories(root_ + "/" + kImages, ec);
    if (ec) return Status::Unavailable("cannot make " + root_ + "/" + kImages + ": " + ec.message());
    if (Status made = MakeScratchImage(image, limit_bytes); !made.ok()) return made;
  }
  return MountScratchImage(image, path);
}

Result<std::string> ScratchStore::Prepare(const std::string& kernel_id, Owner owner, uint64_t limit_bytes) {
  MutexLock lock(mutex_);
  const std::string path = root_ + "/" + kernel_id;
  // The marker first: a directory is never without it, whatever stops the agent.
  if (Status marked = Mark(kernel_id); !marked.ok()) return marked;
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec)
    return Status::Unavailable("cannot make the scratch directory " + path + ": " + ec.message() +
                               "; check [container] scratch-root and the agent's rights there");
  if (Status limited = Limit(kernel_id, path, limit_bytes); !limited.ok()) return limited;
  if (Status given = Own(path, owner); !given.ok()) return given;
  return path;
}

Status ScratchStore::Remove(const std::string& kernel_id) {
  MutexLock lock(mutex_);
  return RemoveLocked(kernel_id);
}

Status ScratchStore::RemoveLocked(const std::string& kernel_id) {
  const std::string path = root_ + "/" + kernel_id;
  // Detached, not recursive: the image's filesystem goes with its last user.
  if (IsMountPoint(path) && ::umount2(path.c_str(), MNT_DETACH) != 0)
    return Status::Unavailable("cannot unmount the scratch image of kernel " + kernel_id + " from " + path + ": " +
                               std::error_code(errno, std::generic_category()).message());
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return Status::Unavailable("cannot remove the scratch directory " + path + ": " + ec.message());
  fs::remove(ImageOf(kernel_id), ec);
  if (ec) return Status::Unavailable("cannot remove the scratch image " + ImageOf(kernel_id) + ": " + ec.message());
  fs::remove(MarkerOf(kernel_id), ec);  // the directory is gone, so is its marker
  return Status::Ok();
}

void ScratchStore::Collect(const std::function<std::set<std::string>()>& known_ids) {
  MutexLock lock(mutex_);
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return;
  const std::set<std::string> known = known_ids();
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;  // the markers (no kernel id starts with a dot)
    std::error_code status_ec;
    const bool marked = fs::exists(fs::symlink_status(MarkerOf(name), status_ec));
    if (known.count(name)) {
      // A kernel's directory made by an earlier version: the agent's from now on.
      const bool plain_directory = fs::symlink_status(it->path(), status_ec).type() == fs::file_type::directory;
      if (!marked && plain_directory && Mark(name).ok())
        spdlog::info("marked {}, the scratch directory of kernel {}, as the agent's", it->path().string(), name);
      continue;
    }
    if (!marked) {
      if (reported_.insert(name).second)
        spdlog::warn("kept {} in the scratch root: the agent did not make it (it has no marker in {}/{}), so it "
                     "never removes it; if it is a leftover scratch directory of an earlier slotd, remove it by hand",
                     it->path().string(), root_, kMarkers);
      continue;
    }
    if (Status removed = RemoveLocked(name); !removed.ok()) {
      spdlog::warn("cannot remove {}, a scratch directory of no kernel of this agent: {}", it->path().string(),
                   removed.message());
      continue;
    }
    spdlog::info("removed {}, a scratch directory of no kernel of this agent", it->path().string());
  }
  // Images of known kernels that are not mounted (the node rebooted) are
  // mounted again, before their containers can start again on the bare
  // directory; images whose directory is gone (the agent stopped between
  // the two removals) go.
  for (fs::directory_iterator it(root_ + "/" + kImages, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    const size_t suffix = file.size() - std::min(file.size(), sizeof kImageSuffix - 1);
    const std::string name = file.substr(0, suffix), dir = root_ + "/" + name;
    if (file.substr(suffix) != kImageSuffix) continue;
    if (known.count(name)) {
      std::error_code is_dir;
      if (!fs::is_directory(fs::symlink_status(dir, is_dir)) || IsMountPoint(dir)) continue;
      if (Status mounted = MountScratchImage(it->path().string(), dir); mounted.ok())
        spdlog::info("mounted the scratch image of kernel {} again at {}", name, dir);
      else
        spdlog::warn("kernel {}: {}", name, mounted.message());
      continue;
    }
    if (fs::exists(dir)) continue;
    std::error_code removed;
    fs::remove(it->path(), removed);
    if (!removed) fs::remove(MarkerOf(name), removed);
    if (!removed) spdlog::info("removed {}, the scratch image of no kernel of this agent", it->path().string());
  }
}

}  // namespace slotd
