#include "model/reconcile.h"

#include <algorithm>
#include <tuple>

#include "common/units.h"

namespace slotd::reconcile {

namespace {

// A kernel that no call owns and whose last word is that it ended (waiting
// for its restart policy or not) or that it could not hold its resources:
// news about its container changes it.
bool Settled(const Known& known) {
  return !known.owned_by_call && (known.state == KernelState::kBackoff || known.state == KernelState::kTerminated ||
                                  known.state == KernelState::kError);
}

}  // namespace

bool MayCheckDrift(const Known& known, const std::string& container_id) {
  return known.container_id == container_id && known.state == KernelState::kRunning && !known.owned_by_call;
}

bool NeedsExitCode(Step step) { return step == Step::kMarkExited || step == Step::kAdoptExited; }

namespace {

// States that say a container's processes are gone or never began: Docker's
// "exited", "dead" and "created"; Podman's "stopped", "configured" and
// "initialized" where its compatible API passes them through.
const std::set<std::string>& EndedStates() {
  static const std::set<std::string> ended = {"exited", "dead", "created", "stopped", "configured", "initialized"};
  return ended;
}

}  // namespace

bool IsRunningState(const std::string& state) { return EndedStates().count(state) == 0; }

bool IsKnownState(const std::string& state) {
  static const std::set<std::string> holding = {"running", "paused", "restarting", "removing", "stopping"};
  return EndedStates().count(state) > 0 || holding.count(state) > 0;
}

Step DecideOnContainer(const ContainerInfo& info, const Known* known, std::optional<uint64_t> forgotten_at_seq,
                       uint64_t list_seq) {
  if (info.labels.count(label::kKernelId) == 0) return Step::kUnlabelled;
  const bool running = IsRunningState(info.state);
  if (known) {
    if (known->container_id != info.id || known->owned_by_call) return Step::kNothing;
    if (running && Settled(*known)) return Step::kResume;
    if (!running && (known->state == KernelState::kRunning || known->state == KernelState::kWarm))
      return known->running_seq > list_seq ? Step::kNothing : Step::kMarkExited;  // a list older than its start
    return Step::kNothing;
  }
  if (forgotten_at_seq && *forgotten_at_seq > list_seq) return Step::kSkipForgotten;
  if (info.state == "created") return Step::kAdoptCreated;
  return running ? Step::kAdoptRunning : Step::kAdoptExited;
}

std::vector<std::string> Vanished(const std::map<std::string, Known>& known,
                                  const std::set<std::string>& listed_container_ids, uint64_t list_seq) {
  std::vector<std::string> vanished;
  for (const auto& entry : known) {
    const Known& k = entry.second;
    if (!k.owned_by_call && k.container_seq <= list_seq && listed_container_ids.count(k.container_id) == 0)
      vanished.push_back(entry.first);
  }
  return vanished;
}

std::vector<ContainerInfo> AdoptionOrder(std::vector<ContainerInfo> listed) {
  auto key = [](const ContainerInfo& info) {
    auto kid = info.labels.find(label::kKernelId);
    return std::make_tuple(-info.created_unix, kid == info.labels.end() ? std::string() : kid->second, info.id);
  };
  std::stable_sort(listed.begin(), listed.end(),
                   [&](const ContainerInfo& a, const ContainerInfo& b) { return key(a) < key(b); });
  return listed;
}

std::optional<std::string> KernelIdOfEvent(const EngineEvent& event, const std::string& agent_id) {
  if (event.type != "container") return std::nullopt;
  auto owner = event.attributes.find(label::kOwner);
  if (owner == event.attributes.end() || owner->second != agent_id) return std::nullopt;  // never ours to touch
  auto kid = event.attributes.find(label::kKernelId);
  if (kid == event.attributes.end()) return std::nullopt;
  return kid->second;
}

// "remove" is Podman's name for Docker's "destroy".
const std::vector<std::string> kEventActions = {"create", "start",   "die",     "oom",    "update",
                                                "pause",  "unpause", "destroy", "remove"};

EventStep DecideOnEvent(const EngineEvent& event, const Known* known) {
  const std::string& action = event.action;
  if (!known) return action == "create" || action == "start" ? EventStep::kRelist : EventStep::kNothing;
  if (known->container_id != event.id) return EventStep::kNothing;  // an older container of a reused id
  if (action == "oom") return EventStep::kNoteOom;
  if (known->owned_by_call) return EventStep::kNothing;
  if (action == "die") {
    const KernelState state = known->state;
    return state == KernelState::kRunning || state == KernelState::kWarm || state == KernelState::kError
               ? EventStep::kCheckDeath
               : EventStep::kNothing;
  }
  if (action == "update" || action == "pause" || action == "unpause")
    return MayCheckDrift(*known, event.id) ? EventStep::kCheckDrift : EventStep::kNothing;
  if (action == "start") return Settled(*known) ? EventStep::kResume : EventStep::kNothing;
  if (action == "destroy" || action == "remove") return EventStep::kForget;
  return EventStep::kNothing;
}

Status CheckAdoptedShared(const std::vector<int>& allowed, const std::vector<int>& pool,
                          const std::vector<AdoptedShared>& shared) {
  if (shared.empty()) return Status::Ok();
  const std::string allowed_text = allowed.empty() ? "none" : FormatCoreList(allowed);
  std::string problems;
  int64_t millis = 0;
  for (const AdoptedShared& k : shared) {
    millis += k.millis;
    const std::string which = "\n  kernel " + k.kernel_id + " (container " + k.container_id.substr(0, 12) + ", " +
                              FormatMillicores(k.millis) + " of shared cpu): ";
    if (pool.empty()) {
      problems += which + (k.cpuset.empty() ? "no core of this agent to run on" : "runs on cores " + k.cpuset);
      continue;
    }
    if (k.cpuset.empty()) {
      problems += which + "the cores it runs on could not be read" + (k.not_moved.empty() ? "" : ": " + k.not_moved);
      continue;
    }
    Result<std::vector<int>> cores = ParseCoreList(k.cpuset);
    std::vector<int> outside;
    for (int core : cores.ok() ? *cores : std::vector<int>{})
      if (!std::binary_search(allowed.begin(), allowed.end(), core)) outside.push_back(core);
    if (!cores.ok() || !outside.empty())
      problems += which + "runs on cores " + k.cpuset + ", " +
                  (cores.ok() ? "of which " + FormatCoreList(outside) + " are not" : "which are not all") +
                  " this agent's, and could not be moved into its shared pool (" + FormatCoreList(pool) + ")" +
                  (k.not_moved.empty() ? "" : ": " + k.not_moved);
  }
  if (problems.empty()) return Status::Ok();
  const std::string why = pool.empty() ? "this agent has no shared pool for them: every core of its allowed-cores (" +
                                             allowed_text + ") is held by an exclusive kernel or none is allowed"
                                       : "their cores are not this agent's (allowed-cores " + allowed_text + ")";
  return Status::FailedPrecondition(
      "shared kernels cannot be restored: " + why + ", and no core may be in the hands of two agents:" + problems +
      "\n  Give this agent cores for them in [resource] allowed-cores (" + FormatMillicores(millis) +
      " of quota needs " + std::to_string((millis + 999) / 1000) +
      " core(s) no exclusive kernel holds), or remove those containers (docker rm -f ID), then start the agent again");
}

}  // namespace slotd::reconcile
