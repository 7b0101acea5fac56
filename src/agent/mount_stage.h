// MountStage: where the engine takes each kernel's mounts from. A mount's
// source, opened by ResolveMounts, is bound (by its descriptor, not its
// name) onto <root>/<kernel-id>/<n>, a path only the agent can change, and
// the engine is given that path: renaming or replacing the source's name
// afterwards (a symbolic link swapped in by another kernel) changes nothing
// the kernel gets. The binds are nosuid and nodev, read-only for read-only
// mounts, and not recursive (a mount under the source is not passed on).
// They stay while the kernel does (a restart of its container binds them
// again) and go with it.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "agent/mounts.h"
#include "common/mutex.h"
#include "common/status.h"
#include "engine/container_engine.h"

namespace slotd {

class MountStage {
 public:
  // `root`: an agent-private directory (<ipc-base-path>/mounts); made when first needed.
  explicit MountStage(std::string root);

  // Binds each of `mounts` under <root>/<kernel_id>/ and returns the bind
  // mounts to give the engine, in order. kUnavailable naming the path and
  // the error when a bind fails (binding needs CAP_SYS_ADMIN: an agent that
  // runs as root); then nothing of `kernel_id`'s stays bound.
  Result<std::vector<Mount>> Bind(const std::string& kernel_id, const std::vector<ResolvedMount>& mounts)
      EXCLUDES(mutex_);

  // Unbinds and removes `kernel_id`'s binds; none is fine. Never removes
  // anything that is still bound: the kernel's data stays where it is.
  Status Remove(const std::string& kernel_id) EXCLUDES(mutex_);

  // Removes the binds of every kernel not in what `known_ids` returns
  // (called with this stage's lock held, so a Bind cannot slip between).
  void Collect(const std::function<std::set<std::string>()>& known_ids) EXCLUDES(mutex_);

 private:
  // Bind's work; on failure the caller removes what was made.
  Result<std::vector<Mount>> BindLocked(const std::string& kernel_id, const std::vector<ResolvedMount>& mounts)
      REQUIRES(mutex_);
  Status RemoveLocked(const std::string& kernel_id) REQUIRES(mutex_);

  const std::string root_;
  Mutex mutex_;  // orders Bind against Collect
};

}  // namespace slotd
