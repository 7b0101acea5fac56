// KernelUsers: who a kernel's processes run as. The user is decided once,
// at create, as numbers ([container] kernel-uid and kernel-gid, else the
// image's USER resolved through the image's own /etc/passwd and /etc/group,
// read from a container made from the image for this alone and never
// started), and checked against the kernel's first process after every
// start. Root, or root's group, only with [container] allow-root.
//
// Thread-safety: every method may be called from any thread; the cache of
// users already read is its own (ResolvedUsers). Never called under the
// store's lock: it calls the engine.
#pragma once

#include <optional>
#include <string>

#include "agent/resolved_users.h"
#include "common/status.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "model/image_user.h"
#include "model/kernel.h"

namespace slotd {

class KernelUsers {
 public:
  // `config` ([container]) and `engine` must outlive it; `agent_id` names
  // the containers it makes to read images' users.
  KernelUsers(std::string agent_id, const ContainerConfig& config, ContainerEngine& engine);

  // The user, as numbers, that every process of `request`'s kernel runs as,
  // at every start, restart and exec: kernel-uid and kernel-gid, else
  // `image`'s user resolved through the image's own files (once per image
  // id and user). kPermissionDenied when that is uid 0 or gid 0 and
  // allow-root is false.
  Result<RunAs> Decide(const CreateRequest& request, const ImageInfo& image);
  // Removes the containers made to read images' users that an earlier run
  // of this agent left behind (label kUserProbe; one list of the engine,
  // filtered by it); failures are logged.
  void RemoveProbes();
  // Whether the process `pid`, the first of kernel `kernel_id`, runs as the
  // kernel may (IdsProblem: as `run_as` decided at create, and not as root
  // or root's group without allow-root). kPermissionDenied saying which;
  // OK when the process is gone.
  Status VerifyIds(const std::string& kernel_id, int pid, const std::optional<RunAs>& run_as) const;
  // After a start of a kernel's container that the create did not make (a
  // restart, or a start of one adopted unstarted): VerifyIds of its first
  // process. When that fails the container is killed at once, and the
  // refusal returned is for the caller to make the kernel's end (never one
  // a restart mends: KernelEnd::final).
  Status VerifyRestarted(const std::string& kernel_id, const std::string& container_id,
                         const std::optional<RunAs>& run_as);

 private:
  // `user` (the image's Config.User) of image `image` (`info`) resolved
  // through the image's files, read from a container made from it for this
  // (UserProbeName of `kernel_id`, never started, removed at once); once
  // per image id and user. No user (root) needs no files.
  Result<RunAs> ReadImageUser(const std::string& kernel_id, const std::string& image, const ImageInfo& info,
                              const std::string& user);

  const std::string agent_id_;
  const ContainerConfig& config_;
  ContainerEngine& engine_;
  ResolvedUsers resolved_;  // image users already read from images' files
};

}  // namespace slotd
