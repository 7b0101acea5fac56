#include "agent/scratch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

namespace slotd {

namespace fs = std::filesystem;

namespace {

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

ScratchStore::ScratchStore(std::string root) : root_(std::move(root)) {}

Result<std::string> ScratchStore::Prepare(const std::string& kernel_id, std::optional<Owner> owner) {
  MutexLock lock(mutex_);
  const std::string path = root_ + "/" + kernel_id;
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec)
    return Status::Unavailable("cannot make the scratch directory " + path + ": " + ec.message() +
                               "; check [container] scratch-root and the agent's rights there");
  if (Status given = Own(path, owner.value_or(Owner{static_cast<int64_t>(::geteuid()), static_cast<int64_t>(::getegid())}));
      !given.ok())
    return given;
  return path;
}

Status ScratchStore::GiveTo(const std::string& kernel_id, Owner owner) {
  MutexLock lock(mutex_);
  return Own(root_ + "/" + kernel_id, owner);
}

Status ScratchStore::Remove(const std::string& kernel_id) {
  MutexLock lock(mutex_);
  const std::string path = root_ + "/" + kernel_id;
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return Status::Unavailable("cannot remove the scratch directory " + path + ": " + ec.message());
  return Status::Ok();
}

void ScratchStore::Collect(const std::function<std::set<std::string>()>& known_ids) {
  MutexLock lock(mutex_);
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) return;
  const std::set<std::string> known = known_ids();
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (known.count(name)) continue;
    std::error_code removed;
    fs::remove_all(it->path(), removed);
    if (removed)
      spdlog::warn("cannot remove {}, a scratch directory of no kernel of this agent: {}", it->path().string(),
                   removed.message());
    else
      spdlog::info("removed {}, a scratch directory of no kernel of this agent", it->path().string());
  }
}

}  // namespace slotd
