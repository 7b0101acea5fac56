// KernelEnds: how the agent's kernels end. A kernel's container ended by
// itself comes to what its restart policy says (Ended); a kernel the agent
// ends (its lifetime, idle window or drain's deadline over, a failed health
// check, an unhealthy device) is set TERMINATING and its stop queued
// (StopTerminating); so is the stop of a kernel whose restart policy is to
// follow (StopToRestart) and of an intruder (StopIntruder). Queued stops run
// on a bounded StopQueue of kStopWorkers threads, through the one
// ContainerStopper, so that a drain stops its kernels side by side and no
// loop or probe worker waits on a stop. A kernel deleted is stopped,
// removed, freed and forgotten on the caller's thread (Delete), which
// waits for it. A drain with a deadline wins over every restart.
//
// Thread-safety: every method may be called from any thread; Ended alone
// is called under the store's lock, the others take it themselves and wait
// on the engine without it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/container_stopper.h"
#include "agent/kernel_files.h"
#include "agent/kernel_store.h"
#include "agent/shared_core_pool.h"
#include "agent/stop_queue.h"
#include "common/clock.h"
#include "common/status.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "model/kernel.h"
#include "model/kernel_policy.h"

namespace slotd {

class KernelEnds {
 public:
  // Every reference must outlive it.
  KernelEnds(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
             const ContainerStopper& stopper, KernelFiles& files, SharedCorePool& shared_pool);

  // A kernel to stop: its id, its container and how it asked to be stopped.
  struct ToStop {
    std::string kernel_id;
    std::string container_id;
    StopContract contract;
  };

  // Stops and removes the kernel's container, then frees its resources,
  // removes its files and forgets it; returns the final record. A call
  // that holds the kernel (a restart, an agent-caused stop: KernelHold)
  // finishes first; a kernel being created or stopped is Busy. If the
  // engine fails, the kernel and its resources are kept and the error is
  // returned.
  Result<Kernel> Delete(const std::string& kernel_id) EXCLUDES(store_.mutex);
  // Delete, of the kernel that the caller's `held` holds.
  Result<Kernel> Delete(KernelHold& held) EXCLUDES(store_.mutex);
  // How many queued stops run at once.
  static constexpr int kStopWorkers = 4;
  // Queues the stops of `kernels`, each set TERMINATING by the caller, and
  // returns: each becomes TERMINATED with `reason`, or goes back to its
  // state before when its container cannot be stopped (logged; the
  // caller's next round tries again). `after`, when given, is called on the
  // stop's thread once each has been tried, with whether it stopped; it
  // must use only what outlives this object.
  using AfterStop = std::function<void(const std::string& kernel_id, bool stopped)>;
  void StopTerminating(std::vector<ToStop> kernels, const std::string& reason, AfterStop after = {})
      EXCLUDES(store_.mutex);
  // Queues the stop of a RUNNING kernel that the agent ends for its
  // restart policy to decide on, held by the caller's `hold` (Act::kEnd,
  // its why the end's reason): once stopped, it ends as Ended says, with
  // that reason, forced. The hold is given back after the stop, stopped or
  // not (a stop that fails is logged: the caller may try again).
  void StopToRestart(KernelHold hold, const ToStop& kernel) EXCLUDES(store_.mutex);
  // Queues the stop of an ERROR kernel's container found running on
  // resources the kernel does not hold: TERMINATED "stopped by slotd: its
  // <reason>".
  void StopIntruder(const std::string& kernel_id, const std::string& container_id) EXCLUDES(store_.mutex);
  // Returns once every stop queued so far has been tried.
  void WaitForStops() { stops_.WaitIdle(); }
  // What the end `end` of kernel `kernel_id`'s container comes to: for a
  // RUNNING or BACKOFF kernel, its restart policy (DecideOnExit) says
  // BACKOFF, keeping its resources, or TERMINATED, freeing them; any other
  // is TERMINATED.
  // `store`: the store this was built with, whose lock the caller holds
  // (named here so that the compiler checks that it is held).
  void Ended(KernelStore& store, const std::string& kernel_id, const KernelEnd& end) REQUIRES(store.mutex);

  // The drain's deadline (unix seconds; 0: none), as the devices' record
  // holds it: while set, no kernel is restarted.
  void SetDrainDeadline(int64_t deadline) { drain_deadline_ = deadline; }
  int64_t DrainDeadline() const { return drain_deadline_; }

 private:
  // Delete; `held`: the caller's hold of it, or nullptr (then it waits for any hold to be given back).
  Result<Kernel> Delete(const std::string& kernel_id, const KernelHold* held) EXCLUDES(store_.mutex);

  const Config& config_;
  ContainerEngine& engine_;
  const Clock& clock_;
  KernelStore& store_;
  const ContainerStopper& stopper_;
  KernelFiles& files_;
  SharedCorePool& shared_pool_;
  std::atomic<int64_t> drain_deadline_{0};
  // Last: destroyed first, so no queued stop outlives what it uses.
  StopQueue stops_{kStopWorkers};
};

}  // namespace slotd
