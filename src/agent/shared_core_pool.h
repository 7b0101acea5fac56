// SharedCorePool: the cores of the agent's shared kernels. Every shared
// kernel runs on the same cores, the shared pool: the agent's allowed cores
// that no exclusive kernel holds, as the cpu plugin gives them now. When an
// exclusive kernel takes cores, or frees them, the pool changes, and this
// brings every shared kernel's container onto it (the engine's cpuset
// update), whether the kernel runs yet or not; a kernel whose container
// cannot follow (Podman has no update) carries the reason as its condition
// until one succeeds. At start it also holds the agent to never keeping a
// shared kernel on a core it no longer owns (CheckAdopted).
//
// Thread-safety: its state is guarded by the store's mutex (the kernels to
// look at next by a leaf lock of its own); one convergence
// runs at a time (converging_, taken before the store's mutex, never inside
// it), with the engine calls made without the store's mutex.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "agent/kernel_store.h"
#include "common/mutex.h"
#include "common/status.h"
#include "engine/container_engine.h"

namespace slotd {

class SharedCorePool {
 public:
  // `store` and `engine` must outlive it; `allowed_cores`: [resource] allowed-cores.
  SharedCorePool(KernelStore& store, ContainerEngine& engine, std::vector<int> allowed_cores);

  // Gives the container of each shared kernel that holds its quota
  // (running, warm, still starting, waiting for a restart) the pool as it is
  // now where its cores (Kernel::applied_cpuset) differ. When it returns,
  // every such container the store knows runs on the pool of its start or a
  // later one. Called after an exclusive create takes its cores (before its
  // container starts), before a shared kernel's container starts, after
  // failed creates, deletes, relists and the restore.
  void Converge() EXCLUDES(store_.mutex, converging_);
  // Has the next Converge look at `kernel_id` even when the pool has not
  // changed: its container was just made (its spec's pool may be older), or
  // it holds its quota again (a resume).
  void Check(const std::string& kernel_id) EXCLUDES(to_check_mutex_);
  // At start, once Converge has moved the adopted shared kernels:
  // reconcile::CheckAdoptedShared of every shared kernel holding its quota
  // (the agent refuses to start, naming them, when one runs on a core that
  // is not its own).
  Status CheckAdopted() const EXCLUDES(store_.mutex);

 private:
  // The pool's cores as the cpu plugin gives them now ("1-3"); empty: no pool.
  std::string PoolNow() const REQUIRES(store_.mutex);

  KernelStore& store_;
  ContainerEngine& engine_;
  std::vector<int> allowed_;  // sorted
  // The pool as Converge last brought every shared kernel's container that
  // holds its quota to it; when the pool differs, every shared kernel is
  // looked at, otherwise only those of to_check_. So a create or delete
  // that leaves the pool as it is costs no walk over every kernel.
  std::string converged_pool_ GUARDED_BY(store_.mutex);
  // A leaf lock: callers of Check hold the store's mutex (which this class
  // cannot name as theirs), and Converge takes it inside the store's.
  Mutex to_check_mutex_ ACQUIRED_AFTER(store_.mutex);
  std::set<std::string> to_check_ GUARDED_BY(to_check_mutex_);  // kernel ids
  // Held by Converge for its whole run.
  Mutex converging_ ACQUIRED_BEFORE(store_.mutex);
};

}  // namespace slotd
