// Converger: brings the kernel table in line with what the engine reports,
// as the pure decisions of model/reconcile.h say: each event of the
// owner-filtered stream (OnEngineEvent), and each list of the owned
// containers (Relist, and Restore at the agent's start). It adopts
// unknown containers, ends dead kernels, resumes those started outside
// slotd, forgets vanished ones, stops intruders on others' resources,
// finishes the starts an agent stopped between create and start left, and
// checks drifted containers (CheckDrift). The stops it asks for are queued
// (KernelEnds); a restore waits for them before the agent serves.
//
// Thread-safety: every method may be called from any thread; each takes
// the store's lock itself and calls the engine without it.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/engine_health.h"
#include "agent/kernel_ends.h"
#include "agent/kernel_files.h"
#include "agent/kernel_store.h"
#include "agent/kernel_users.h"
#include "agent/shared_core_pool.h"
#include "agent/warm_kernels.h"
#include "common/clock.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "model/reconcile.h"

namespace slotd {

class Converger {
 public:
  // Every reference must outlive it.
  Converger(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
            SharedCorePool& shared_pool, KernelFiles& files, KernelUsers& users, WarmKernels& warm, KernelEnds& ends,
            EngineHealth& engine_health);

  // Lists the owned containers and converges the kernel table on them:
  // adopts unknown ones, ends dead kernels and frees them, forgets vanished
  // ones, stops intruders, checks paused containers for drift, removes the
  // files of no kernel. Frees nothing when the list fails.
  Status Relist() EXCLUDES(store_.mutex) { return Converge(/*at_start=*/false); }
  // Relist at the agent's start, from `listed` (the engine's containers as
  // listed just before; unset: listed now): unreadable labels, resources
  // the config no longer gives and a warm kernel that cannot be removed are
  // errors naming the kernel and what to do, and it returns once the
  // intruders it found are stopped.
  Status Restore(std::optional<std::vector<ContainerInfo>> listed) EXCLUDES(store_.mutex) {
    return Converge(/*at_start=*/true, std::move(listed));
  }
  // Applies one event of the owner-filtered engine stream. Returns true when
  // the event names an owned container the agent does not know, so a relist
  // should run to adopt it.
  bool OnEngineEvent(const EngineEvent& event) EXCLUDES(store_.mutex);
  // Inspects a RUNNING kernel's container (unlocked) and sets its condition
  // to what differs from its allocation: paused, cpuset, memory limit; emits
  // kernel_condition when that changes.
  void CheckDrift(const std::string& kernel_id, const std::string& container_id) EXCLUDES(store_.mutex);

 private:
  // Relist and Restore: one list of the engine (`listed`, or asked for now),
  // decided and applied; `at_start` for Restore.
  Status Converge(bool at_start, std::optional<std::vector<ContainerInfo>> listed = std::nullopt)
      EXCLUDES(store_.mutex);
  // OnEngineEvent without the StopIntruders that follows it.
  bool ApplyEngineEvent(const EngineEvent& event) EXCLUDES(store_.mutex);
  // reconcile::DecideOnEvent for `kernel` (nullptr: unknown).
  reconcile::EventStep EventStepFor(const Kernel* kernel, const EngineEvent& event) const REQUIRES(store_.mutex);
  // reconcile::DecideOnContainer for a listed container.
  reconcile::Step StepFor(const ContainerInfo& info, uint64_t list_seq) const REQUIRES(store_.mutex);
  // Applies a "die" event (EventStep::kCheckDeath): ended as its restart
  // policy says, unless the engine says the container already runs again
  // or the kernel changed meanwhile. Inspects without the lock.
  void ConfirmDeath(const std::string& kernel_id, const EngineEvent& event) EXCLUDES(store_.mutex);
  // Re-takes a terminated kernel's allocation because its container runs
  // again (`how`); ERROR with the reason when another kernel holds part of
  // it (or the config no longer allows it), and queued for StopIntruders.
  void Resume(const std::string& kernel_id, const std::string& how) REQUIRES(store_.mutex);
  // Queues the stops of the containers found running on resources their
  // kernels do not hold (started behind the agent's back onto another
  // kernel's cores, say): TERMINATED "stopped by slotd: ..."
  // (KernelEnds::StopIntruder).
  void StopIntruders() EXCLUDES(store_.mutex);
  // The owned containers `mine` of a list asked for at `list_seq` whose step
  // needs their exit code, inspected (unlocked), by container id.
  std::map<std::string, ContainerInfo> InspectEnded(const std::vector<ContainerInfo>& mine, uint64_t list_seq)
      EXCLUDES(store_.mutex);
  // What applying a list leaves for Converge to do without the lock.
  struct Applied {
    std::vector<std::string> never_started;                    // kernels adopted PREPARING, to start
    std::vector<std::pair<std::string, std::string>> to_check;  // (kernel, container) whose drift to check
  };
  // Applies each step of the list `mine` (the ended ones `inspected`) and
  // forgets the kernels whose container is not in it.
  Status ApplyList(const std::vector<ContainerInfo>& mine, const std::map<std::string, ContainerInfo>& inspected,
                   uint64_t list_seq, bool at_start, Applied& applied) REQUIRES(store_.mutex);
  // Adopts an unknown container (one of the kAdopt* steps; `inspected`: the
  // container as inspected, when it was). A created one becomes PREPARING
  // with its resources and its kernel id goes into `never_started`; a
  // running one RUNNING, or ERROR queued for StopIntruders when a newer
  // kernel holds its resources. A warm pool's kernel never given that no
  // pool keeps is not adopted (WarmKernels::Keeps).
  Status Adopt(reconcile::Step step, const ContainerInfo& info, const ContainerInfo* inspected, bool at_start,
               std::vector<std::string>& never_started) REQUIRES(store_.mutex);
  // Adopt's running container whose allocation cannot be claimed
  // (`claimed`): ERROR, and stopped (StopIntruders) when a newer kernel holds
  // it; refused at start, else ERROR, when the config no longer gives it.
  Status AdoptRefused(Kernel kernel, const ContainerInfo& info, const Status& claimed, bool at_start)
      REQUIRES(store_.mutex);
  // Logs, once per container and state, a container in a state this agent
  // does not know (reconcile::IsKnownState), which keeps what it holds.
  void ReportUnknownState(const ContainerInfo& info) REQUIRES(store_.mutex);
  // Starts the containers of kernels adopted PREPARING by Adopt: RUNNING
  // when the engine starts them, else TERMINATED "never started: <why>" with
  // no exit code and nothing held. Starts without the lock.
  void FinishStarts(const std::vector<std::string>& kernel_ids) EXCLUDES(store_.mutex);

  const Config& config_;
  ContainerEngine& engine_;
  const Clock& clock_;
  KernelStore& store_;
  SharedCorePool& shared_pool_;
  KernelFiles& files_;
  KernelUsers& users_;
  WarmKernels& warm_;
  KernelEnds& ends_;
  EngineHealth& engine_health_;

  std::vector<std::pair<std::string, std::string>> intruders_ GUARDED_BY(store_.mutex);  // (kernel, container) to stop
  // "<container id> <state>" of the unknown states reported; emptied past the bound.
  static constexpr size_t kMaxUnknownStatesReported = 1024;
  std::set<std::string> unknown_states_reported_ GUARDED_BY(store_.mutex);
};

}  // namespace slotd
