// KernelFiles: what the agent keeps for a kernel outside its container: its
// scratch (ScratchStore), the binds its mounts are staged at (MountStage),
// and the record of a warm kernel given to a create (WarmClaims). One owner,
// so that a kernel's files are made and removed in one place.
//
// Thread-safety: every method may be called from any thread; none is called
// under the store's lock (each does file I/O).
#pragma once

#include <functional>
#include <set>
#include <string>

#include "agent/mount_stage.h"
#include "agent/scratch_store.h"
#include "agent/warm_pool.h"
#include "common/status.h"
#include "config/config.h"

namespace slotd {

class KernelFiles {
 public:
  // `config` must outlive it: the scratch root and type, [agent]
  // ipc-base-path (the mounts' stage) and var-base-path (the claims).
  explicit KernelFiles(const Config& config);
  KernelFiles(const KernelFiles&) = delete;
  KernelFiles& operator=(const KernelFiles&) = delete;

  // Removes every file of `kernel_id`, logging what fails.
  void Remove(const std::string& kernel_id);
  // Removes the scratch and staged binds of every kernel `keep` does not
  // name (asked after the files are listed, so a kernel made meanwhile
  // keeps its own).
  void Collect(const std::function<std::set<std::string>()>& keep);
  // Ok while the scratch root's filesystem has [container] scratch-min-free
  // free; kResourceExhausted ("insufficient scratch space", both sizes and
  // what to do) below it.
  Status CheckScratchRoom() const;
  // Ok when a hostdir scratch can be given a size (the scratch root
  // enforces project quotas) or the scratch is not hostdir; otherwise why not.
  const Status& scratch_quota() const { return scratch_quota_; }

  ScratchStore& scratch() { return scratch_; }
  MountStage& mounts() { return mount_stage_; }
  WarmClaims& claims() { return claims_; }

 private:
  const Config& config_;
  ScratchStore scratch_;
  const Status scratch_quota_;
  MountStage mount_stage_;
  WarmClaims claims_;
};

}  // namespace slotd
