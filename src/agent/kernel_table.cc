#include "agent/kernel_table.h"

#include <algorithm>
#include <functional>
#include <utility>

#include <spdlog/spdlog.h>

namespace slotd {

using nlohmann::json;

namespace {

using Place = KernelTable::Place;
using T = KernelTable::Transition;
constexpr Place kNone = std::nullopt;
constexpr Place kRunning = KernelState::kRunning;
constexpr Place kBackoff = KernelState::kBackoff;
constexpr Place kTerminating = KernelState::kTerminating;
constexpr Place kTerminated = KernelState::kTerminated;

json ExitCodeJson(std::optional<int> code) { return code ? json(*code) : json(nullptr); }

// Whether `kernel` is in a state that a call owns by being in it.
bool StateIsACalls(const Kernel& kernel) {
  return kernel.state() == KernelState::kPulling || kernel.state() == KernelState::kPreparing ||
         kernel.state() == KernelState::kTerminating;
}

}  // namespace

KernelTable::KernelTable(std::string agent_id, Mutex& mutex, std::vector<std::unique_ptr<ResourcePlugin>>& plugins,
                         EventHub& hub, const Clock& clock)
    : agent_id_(std::move(agent_id)), mutex_(mutex), plugins_(plugins), hub_(hub), clock_(clock) {}

Result<Kernel*> KernelTable::Check(Transition transition, const std::string& kernel_id, Place to) {
  const Rule& rule = RuleOf(transition);
  Kernel* kernel = Change(kernel_id);
  const Place from = kernel ? Place(kernel->state()) : kNone;
  const bool leaves = std::find(rule.from.begin(), rule.from.end(), from) != rule.from.end();
  const bool reaches = !to || std::find(rule.to.begin(), rule.to.end(), to) != rule.to.end();
  if (leaves && reaches) return kernel;
  Status refused = Status::FailedPrecondition("kernel " + kernel_id + ": \"" + rule.name + "\" from " +
                                              PlaceName(from) + (to ? " to " + PlaceName(to) : "") +
                                              " is not a transition of its lifecycle");
  spdlog::error("{}; refused", refused.message());
  return refused;
}

Status KernelTable::Claim(Kernel& kernel) {
  if (kernel.holds_resources) return Status::Ok();
  for (const auto& [plugin_name, ids] : kernel.allocation.devices) {
    bool served = std::any_of(plugins_.begin(), plugins_.end(),
                              [&, name = plugin_name](const auto& plugin) { return plugin->Name() == name; });
    if (!served && !ids.empty())
      return Status::FailedPrecondition(plugin_name + " device " + ids.front() +
                                        " is recorded, but this agent has no [resource." + plugin_name +
                                        "] section any more");
  }
  return TakeFromEachPlugin(kernel, [&](ResourcePlugin& plugin) { return plugin.Claim(kernel.id(), kernel.allocation); });
}

Status KernelTable::TakeFromEachPlugin(Kernel& kernel, const std::function<Status(ResourcePlugin&)>& take) {
  for (size_t i = 0; i < plugins_.size(); ++i) {
    if (Status s = take(*plugins_[i]); !s.ok()) {
      for (size_t j = 0; j < i; ++j) plugins_[j]->Free(kernel.id());
      return s;
    }
  }
  kernel.holds_resources = true;
  return Status::Ok();
}

void KernelTable::Free(Kernel& kernel) {
  for (auto& plugin : plugins_) plugin->Free(kernel.id());
  kernel.holds_resources = false;
}

void KernelTable::Announce(EventType type, const Kernel& kernel, json extra) {
  if (type == EventType::kKernelCondition) {
    const std::string conditions = kernel.Conditions();
    extra["condition"] = conditions.empty() ? json(nullptr) : json(conditions);
  }
  extra["agent_id"] = agent_id_;
  extra["kernel_id"] = kernel.id();
  extra["state"] = KernelStateName(kernel.state());
  extra["time"] = clock_.UnixSeconds();
  hub_.Publish(type, std::move(extra));
}

void KernelTable::Enter(Kernel& kernel, Transition transition, KernelState to, json extra) {
  if (to == KernelState::kRunning && transition != T::kStopFailed) {
    // Its container (re)started: its health is to be found again.
    kernel.health = kernel.request.health ? std::optional<HealthState>(HealthState{}) : std::nullopt;
    kernel.idle_since_ms.reset();
    ++kernel.runs;
  }
  if (to == KernelState::kRunning || to == KernelState::kWarm) kernel.running_seq = ++seq_;
  kernel.state_ = to;
  if (const std::optional<EventType> event = RuleOf(transition).event) Announce(*event, kernel, std::move(extra));
}

Kernel KernelTable::Remove(const std::string& kernel_id) {
  Kernel& kernel = kernels_.at(kernel_id);
  Free(kernel);
  Kernel final_record = std::move(kernel);
  kernels_.erase(kernel_id);
  records_.erase(kernel_id);
  before_stopping_.erase(kernel_id);
  holds_.Drop(kernel_id);
  removed_at_seq_[kernel_id] = ++seq_;
  return final_record;
}

Status KernelTable::Reserve(Kernel kernel, bool pulling) {
  const KernelState to = pulling ? KernelState::kPulling : KernelState::kPreparing;
  const std::string kernel_id = kernel.id();
  if (Result<Kernel*> k = Check(T::kReserve, kernel_id, to); !k.ok()) return k.status();
  Status allocated = TakeFromEachPlugin(kernel, [&](ResourcePlugin& plugin) {
    return plugin.Allocate(kernel_id, kernel.request.resources, kernel.allocation);
  });
  if (!allocated.ok()) return allocated;
  Kernel& added = kernels_[kernel_id] = std::move(kernel);
  Enter(added, T::kReserve, to);
  return Status::Ok();
}

Status KernelTable::Move(Transition transition, const std::string& kernel_id, KernelState to) {
  Result<Kernel*> k = Check(transition, kernel_id, to);
  if (!k.ok()) return k.status();
  Enter(**k, transition, to);
  return Status::Ok();
}

Status KernelTable::Prepared(const std::string& kernel_id) {
  return Move(T::kPrepared, kernel_id, KernelState::kPreparing);
}

Status KernelTable::Adopt(Kernel kernel, KernelState state) {
  const std::string kernel_id = kernel.id();
  if (Result<Kernel*> k = Check(T::kAdopt, kernel_id, state); !k.ok()) return k.status();
  kernel.holds_resources = false;
  if (state == KernelState::kPreparing || state == KernelState::kWarm || state == KernelState::kRunning ||
      state == KernelState::kBackoff) {
    if (Status s = Claim(kernel); !s.ok()) return s;
  }
  kernel.container_seq = ++seq_;
  Kernel& added = kernels_[kernel_id] = std::move(kernel);
  Enter(added, T::kAdopt, state);
  return Status::Ok();
}

Status KernelTable::Started(const std::string& kernel_id) { return Move(T::kStarted, kernel_id, KernelState::kRunning); }

Status KernelTable::Warmed(const std::string& kernel_id) { return Move(T::kWarmed, kernel_id, KernelState::kWarm); }

Status KernelTable::Given(const std::string& kernel_id, CreateRequest request, int64_t created_at,
                          std::optional<int64_t> deadline) {
  Result<Kernel*> k = Check(T::kGiven, kernel_id, kRunning);
  if (!k.ok()) return k.status();
  Kernel& kernel = **k;
  request.kernel_id = kernel_id;
  kernel.request = std::move(request);
  kernel.created_at = created_at;
  kernel.deadline = deadline;
  Enter(kernel, T::kGiven, KernelState::kRunning);
  return Status::Ok();
}

void KernelTable::RunAgain(Kernel& kernel, Transition transition, json extra) {
  kernel.exit_code.reset();
  kernel.reason.clear();
  kernel.terminated_at.reset();
  kernel.next_restart_at_ms.reset();
  Enter(kernel, transition, KernelState::kRunning, std::move(extra));
}

Status KernelTable::Resume(const std::string& kernel_id, const std::string& how) {
  Result<Kernel*> k = Check(T::kResumed, kernel_id, kRunning);
  if (!k.ok()) return k.status();
  Kernel& kernel = **k;
  if (Status claimed = Claim(kernel); !claimed.ok()) {
    kernel.reason = "container " + how + " on resources it does not hold: " + claimed.message();
    Enter(kernel, T::kRefused, KernelState::kError);
    return claimed;
  }
  RunAgain(kernel, T::kResumed);
  return Status::Ok();
}

Result<KernelHold> KernelTable::BeginRestart(const std::string& kernel_id) {
  const Kernel* found = Find(kernel_id);
  if (found && OwnedByACall(*found)) return Busy(*found);
  Result<Kernel*> k = Check(T::kRestartHeld, kernel_id, found ? Place(found->state()) : kNone);
  if (!k.ok()) return k.status();
  if (Status s = Claim(**k); !s.ok()) return s;
  return KernelHold(*this, kernel_id, holds_.Add(kernel_id, Act::kRestart, ""));
}

Status KernelTable::FinishRestart(KernelHold& hold, bool restarted) {
  const std::string kernel_id = hold.kernel_id();
  if (!hold.CurrentIn(*this, holds_))
    return Status::FailedPrecondition("kernel " + kernel_id + " is not being restarted");
  if (!restarted) {
    Release(hold);
    return Status::Ok();
  }
  const bool by_policy = holds_.Of(kernel_id)->act == Act::kPolicyRestart;
  const Transition transition = by_policy ? T::kPolicyRestarted : T::kRestarted;
  Result<Kernel*> k = Check(transition, kernel_id, kRunning);
  if (!k.ok()) {
    Release(hold);
    return k.status();
  }
  hold.ticket_ = 0;
  holds_.Drop(kernel_id);
  RunAgain(**k, transition, by_policy ? json{{"restarts", (*k)->restarts}} : json::object());
  return Status::Ok();
}

Status KernelTable::BackOff(const std::string& kernel_id, std::optional<int> exit_code, const std::string& reason,
                            std::optional<int64_t> terminated_at, int64_t next_restart_at_ms) {
  Result<Kernel*> k = Check(T::kBackedOff, kernel_id, kBackoff);
  if (!k.ok()) return k.status();
  Kernel& kernel = **k;
  kernel.exit_code = exit_code;
  kernel.reason = reason;
  kernel.terminated_at = terminated_at;
  kernel.next_restart_at_ms = next_restart_at_ms;
  spdlog::info("kernel {}: {}; restart {} at {} ms", kernel_id, reason, kernel.restarts + 1, next_restart_at_ms);
  Enter(kernel, T::kBackedOff, KernelState::kBackoff,
        {{"exit_code", ExitCodeJson(exit_code)},
         {"reason", reason},
         {"restarts", kernel.restarts},
         {"next_restart_at_ms", next_restart_at_ms}});
  return Status::Ok();
}

Result<KernelHold> KernelTable::BeginPolicyRestart(const std::string& kernel_id) {
  if (const Kernel* busy = Find(kernel_id); busy && OwnedByACall(*busy)) return Busy(*busy);
  if (Result<Kernel*> k = Check(T::kPolicyRestarted, kernel_id, kRunning); !k.ok()) return k.status();
  // kRestartHeld; a BACKOFF kernel holds its resources already.
  if (Result<Kernel*> k = Check(T::kRestartHeld, kernel_id, kBackoff); !k.ok()) return k.status();
  return KernelHold(*this, kernel_id, holds_.Add(kernel_id, Act::kPolicyRestart, ""));
}

Status KernelTable::Stopping(const std::string& kernel_id, const KernelHold* by) {
  if (const Kernel* busy = Find(kernel_id); busy && OwnedByACall(*busy) && !(by && by->CurrentIn(*this, holds_) && !StateIsACalls(*busy)))
    return Busy(*busy);
  Result<Kernel*> k = Check(T::kStopping, kernel_id, kTerminating);
  if (!k.ok()) return k.status();
  before_stopping_[kernel_id] = (*k)->state();
  Enter(**k, T::kStopping, KernelState::kTerminating);
  return Status::Ok();
}

Status KernelTable::StopFailed(const std::string& kernel_id) {
  auto before = before_stopping_.find(kernel_id);
  const KernelState back = before == before_stopping_.end() ? KernelState::kRunning : before->second;
  Result<Kernel*> k = Check(T::kStopFailed, kernel_id, back);
  if (!k.ok()) return k.status();
  before_stopping_.erase(kernel_id);
  Enter(**k, T::kStopFailed, back);
  return Status::Ok();
}

Status KernelTable::Terminated(const std::string& kernel_id, std::optional<int> exit_code, const std::string& reason,
                               std::optional<int64_t> terminated_at) {
  Result<Kernel*> k = Check(T::kTerminated, kernel_id, kTerminated);
  if (!k.ok()) return k.status();
  Kernel& kernel = **k;
  Free(kernel);
  before_stopping_.erase(kernel_id);
  kernel.exit_code = exit_code;
  kernel.reason = reason;
  kernel.terminated_at = terminated_at;
  kernel.next_restart_at_ms.reset();
  spdlog::info("kernel {} terminated: {}", kernel_id, reason);
  Enter(kernel, T::kTerminated, KernelState::kTerminated,
        {{"exit_code", ExitCodeJson(exit_code)},
         {"reason", reason},
         {"terminated_at", terminated_at ? json(*terminated_at) : json(nullptr)}});
  return Status::Ok();
}

Result<Kernel> KernelTable::Deleted(const std::string& kernel_id, std::optional<int> exit_code) {
  Result<Kernel*> k = Check(T::kDeleted, kernel_id, kNone);
  if (!k.ok()) return k.status();
  Kernel final_record = Remove(kernel_id);
  if (!final_record.exit_code) final_record.exit_code = exit_code;
  if (final_record.reason.empty()) final_record.reason = "deleted";
  final_record.state_ = KernelState::kTerminated;
  Announce(*RuleOf(T::kDeleted).event, final_record, {{"reason", "deleted"}});
  return final_record;
}

Status KernelTable::Forget(const std::string& kernel_id, const std::string& reason) {
  if (Result<Kernel*> k = Check(T::kForgotten, kernel_id, kNone); !k.ok()) return k.status();
  const Kernel final_record = Remove(kernel_id);
  Announce(*RuleOf(T::kForgotten).event, final_record, {{"reason", reason}});
  return Status::Ok();
}

Status KernelTable::Abandon(const std::string& kernel_id) {
  if (Result<Kernel*> k = Check(T::kAbandoned, kernel_id, kNone); !k.ok()) return k.status();
  Remove(kernel_id);
  return Status::Ok();
}

Kernel* KernelTable::Change(const std::string& kernel_id) {
  records_.erase(kernel_id);
  auto it = kernels_.find(kernel_id);
  return it == kernels_.end() ? nullptr : &it->second;
}

const Kernel* KernelTable::Find(const std::string& kernel_id) const {
  auto it = kernels_.find(kernel_id);
  return it == kernels_.end() ? nullptr : &it->second;
}

std::shared_ptr<const std::string> KernelTable::Record(const Kernel& kernel) const {
  std::shared_ptr<const std::string>& record = records_[kernel.id()];
  if (!record)
    record = std::make_shared<const std::string>(
        kernel.ToJson().dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace));
  return record;
}

void KernelTable::SetContainer(const std::string& kernel_id, const std::string& container_id) {
  if (Kernel* kernel = Change(kernel_id)) {
    kernel->container_id = container_id;
    kernel->container_seq = ++seq_;
  }
}

bool KernelTable::OwnedByACall(const Kernel& kernel) const {
  return StateIsACalls(kernel) || holds_.Of(kernel.id()) != nullptr;
}

Status KernelTable::Busy(const Kernel& kernel) const {
  const KernelHolds::Entry* hold = holds_.Of(kernel.id());
  const std::string doing = hold && !StateIsACalls(kernel) ? KernelHolds::Doing(*hold) : KernelStateName(kernel.state());
  return Status::FailedPrecondition("kernel " + kernel.id() + " is busy (" + doing + "); retry when that finishes");
}

Result<KernelHold> KernelTable::Hold(const std::string& kernel_id, Act act, std::string why) {
  const Kernel* kernel = Find(kernel_id);
  if (!kernel) return Status::NotFound("kernel " + kernel_id + " is not known to agent " + agent_id_);
  if (OwnedByACall(*kernel)) return Busy(*kernel);
  return KernelHold(*this, kernel_id, holds_.Add(kernel_id, act, std::move(why)));
}

void KernelTable::Release(KernelHold& hold) {
  const std::string kernel_id = hold.kernel_id();
  const bool current = hold.CurrentIn(*this, holds_);
  hold.ticket_ = 0;
  if (!current) return;
  const KernelState state = Find(kernel_id)->state();
  if (holds_.Of(kernel_id)->act == Act::kRestart && state != KernelState::kRunning && state != KernelState::kBackoff) {
    if (Result<Kernel*> k = Check(T::kRestartUnheld, kernel_id, Place(state)); k.ok()) Free(**k);
  }
  holds_.Drop(kernel_id);
}

reconcile::Known KernelTable::KnownOf(const Kernel& kernel) const {
  return {kernel.container_id, kernel.state(), OwnedByACall(kernel), kernel.container_seq, kernel.running_seq};
}

std::optional<uint64_t> KernelTable::ForgottenAt(const std::string& kernel_id) const {
  auto it = removed_at_seq_.find(kernel_id);
  if (it == removed_at_seq_.end()) return std::nullopt;
  return it->second;
}

void KernelTable::DropForgottenUpTo(uint64_t seq) {
  std::erase_if(removed_at_seq_, [&](const auto& entry) { return entry.second <= seq; });
}

}  // namespace slotd
