// Reconcile: the pure decision of what the agent does about what the engine
// shows it — each container of a relist, each event of the stream — given
// what it knows of its kernels. No engine, no lock, no clock: the agent core
// gathers the facts, asks here, and applies the answer (Converger::Relist,
// Agent::Restore, Converger::OnEngineEvent). Tested from a table of cases in
// tests/unit/reconcile_test.cc.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/kernel.h"
#include "model/container.h"

namespace slotd::reconcile {

// What the agent knows of one kernel, as far as the decisions need it.
struct Known {
  std::string container_id;
  KernelState state = KernelState::kPreparing;
  // A create, delete or restart acts on the kernel now: nothing else may change it.
  bool owned_by_call = false;
  // The agent's mutation sequence when the kernel's container appeared.
  uint64_t container_seq = 0;
  // The agent's mutation sequence when the kernel last became RUNNING or
  // WARM (a start, a restart, an adoption): a list asked for before it may show its
  // container as it was before that start.
  uint64_t running_seq = 0;
};

// What to do about one container of a relist.
enum class Step {
  kNothing,        // the picture already agrees, or a call owns the kernel, or it is an older container of its id
  kUnlabelled,     // carries the owner label but no kernel id: log it and leave it alone
  kResume,         // known TERMINATED or ERROR, its container runs again: re-take its allocation
  kMarkExited,     // known RUNNING or WARM, its container stopped: TERMINATED with the exit code, resources freed
  kAdoptCreated,   // unknown, created and never started: adopt PREPARING with its allocation, then start it
  kAdoptRunning,   // unknown, running: adopt RUNNING with its allocation
  kAdoptExited,    // unknown, stopped: adopt TERMINATED with the exit code, holding nothing
  kSkipForgotten,  // unknown, but its kernel was forgotten after the list was asked for: being removed
};

// Whether applying `step` needs the container's exit code (which only an
// inspect gives; a list does not).
bool NeedsExitCode(Step step);

// Whether the engine's state string may mean the container's processes
// exist, so that it holds its resources: every state but those that say
// they ended ("exited", "dead"; Podman's "stopped") or never began
// ("created"; Podman's "configured", "initialized"). A state this agent does
// not know counts (Podman's "stopping" is a container whose processes still
// run): never taken for an end.
bool IsRunningState(const std::string& state);

// Whether `state` is one of the container states this agent knows (Docker's
// and Podman's); the agent reports any other it meets.
bool IsKnownState(const std::string& state);

// Whether the drift of kernel `known`'s container `container_id` (paused,
// cpuset, memory limit changed outside slotd) may be checked now: it is the
// kernel's own container, the kernel RUNNING, and no call owns it.
bool MayCheckDrift(const Known& known, const std::string& container_id);

// The step for one listed container of this agent. `known` is the kernel its
// kernel-id label names, or nullptr; `forgotten_at_seq` is when the agent
// forgot a kernel of that id, if it did; `list_seq` is the agent's mutation
// sequence when the list was asked for.
Step DecideOnContainer(const ContainerInfo& info, const Known* known, std::optional<uint64_t> forgotten_at_seq,
                       uint64_t list_seq);

// The kernels whose containers vanished: known, not owned by a call, their
// container there before the list was asked for (`list_seq`) and not in it.
std::vector<std::string> Vanished(const std::map<std::string, Known>& known,
                                  const std::set<std::string>& listed_container_ids, uint64_t list_seq);

// The order in which a list's containers are adopted: newest created first
// (ties by kernel id, then container id). The agent never gives a resource to
// two kernels at once, so when two running containers claim one resource the
// newer got it from the agent and the older was started again behind its
// back: adopting newest first lets the rightful holder claim it.
std::vector<ContainerInfo> AdoptionOrder(std::vector<ContainerInfo> listed);

// What to do about one event of the owner-filtered engine stream.
enum class EventStep {
  kNothing,     // not this agent's, not about a known kernel's current container, or a call owns it
  kRelist,      // names a kernel the agent does not know: relist to adopt it
  kCheckDeath,  // "die" of a settled kernel: confirm with an inspect, then TERMINATED and freed
  kCheckDrift,  // pause, unpause, update: inspect and compare with the allocation
  kNoteOom,     // the kernel ran out of memory: its coming death says so
  kResume,      // its container was started outside slotd: re-take its allocation
  kForget,      // its container was removed outside slotd (destroy; Podman: remove): free and forget the kernel
};

// The kernel id an event of `agent_id`'s containers names; nullopt for any
// other event (another owner's, not a container's, no kernel id).
std::optional<std::string> KernelIdOfEvent(const EngineEvent& event, const std::string& agent_id);

// The actions DecideOnEvent acts on: the agent asks the engine for these
// alone (not, say, the three events of each exec).
extern const std::vector<std::string> kEventActions;

// The step for an event naming a kernel (see KernelIdOfEvent); `known` is
// that kernel or nullptr.
EventStep DecideOnEvent(const EngineEvent& event, const Known* known);

// A shared kernel the restore adopted, as it stands once the restore has
// brought the shared kernels onto the pool (SharedCorePool::Converge).
struct AdoptedShared {
  std::string kernel_id;
  std::string container_id;
  int millis = 0;          // its quota
  std::string cpuset;      // the cores its container runs on as last known (Kernel::applied_cpuset); empty: unknown
  std::string not_moved;   // why its cores could not follow the pool (Kernel::pool_condition); empty: they did
};

// Whether the agent may start with the shared kernels it adopted: never
// with one on a core that is not its own. kFailedPrecondition naming each
// such kernel, what it runs on and the remedy, when the agent has no shared
// pool (`pool` empty: every core of `allowed` held exclusively) while it
// holds a shared kernel, or a shared kernel's container runs on a core
// outside `allowed` (it could not be moved into the pool), or where it runs
// is unknown; OK otherwise. A pool smaller than the quotas it holds is no
// refusal: they run on the pool, and new shared kernels wait.
Status CheckAdoptedShared(const std::vector<int>& allowed, const std::vector<int>& pool,
                          const std::vector<AdoptedShared>& shared);

}  // namespace slotd::reconcile
