// KernelTable: the agent's kernels, and the one home of their lifecycle.
// Every change of a kernel's state is one method here (a Transition); each
// checks the change against the table of legal transitions (Rules), takes or
// frees the kernel's resources through the plugins, and publishes the one
// event its rule names. An illegal change is refused (kFailedPrecondition,
// logged) and changes nothing. No other code assigns Kernel::state.
//
// One call at a time acts on a kernel. The states a call passes through
// (PULLING and PREPARING: its create, or the relist that finishes it;
// TERMINATING: its stop) are owned by being in them. Any other act on a
// kernel (a restart, a warm kernel given to a create or removed, a stop the
// agent causes for its restart policy) holds it with a KernelHold, the one
// record of it. Both make OwnedByACall true: events and relists leave such
// a kernel alone, and other calls wait for it or are refused (Busy).
//
// Not thread-safe: the agent holds its mutex around every call, the same
// mutex that guards the plugins this table claims from and frees to.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "agent/event_hub.h"
#include "agent/kernel_holds.h"
#include "model/kernel.h"
#include "model/kernel_rules.h"
#include "model/reconcile.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "resources/plugin.h"

namespace slotd {

class KernelTable {
 public:
  // The kernel's state machine (model/kernel_rules.h).
  using Transition = KernelTransition;
  using Place = KernelPlace;
  using Rule = KernelRule;

  using Act = KernelHolds::Act;

  // `mutex` is the lock every caller holds (a KernelHold's destructor takes
  // it); `plugins` are guarded by it. All must outlive the table, as must
  // `hub` and `clock`.
  KernelTable(std::string agent_id, Mutex& mutex, std::vector<std::unique_ptr<ResourcePlugin>>& plugins,
              EventHub& hub, const Clock& clock);

  // ---- Transitions. Each refuses (kFailedPrecondition) what its rule does not allow.

  // kReserve: adds `kernel` (its request, times and NUMA node set) PULLING
  // when `pulling`, else PREPARING, with an allocation from every plugin;
  // the plugins' refusal (kResourceExhausted, ...) when one has no room.
  Status Reserve(Kernel kernel, bool pulling);
  // kPrepared.
  Status Prepared(const std::string& kernel_id);
  // kAdopt: adds `kernel`, rebuilt from its container, in `state`. PREPARING
  // and RUNNING claim its recorded allocation first and return the plugins'
  // refusal, adding nothing, when they cannot.
  Status Adopt(Kernel kernel, KernelState state);
  // kStarted.
  Status Started(const std::string& kernel_id);
  // kWarmed.
  Status Warmed(const std::string& kernel_id);
  // kGiven: the WARM kernel becomes RUNNING as `request` (its id the
  // kernel's), created at `created_at` with `deadline`.
  Status Given(const std::string& kernel_id, CreateRequest request, int64_t created_at,
               std::optional<int64_t> deadline);
  // kResumed, or kRefused with `why_refused` and the claim's refusal in its
  // reason when the allocation cannot be claimed again. Returns the claim's
  // status (OK: RUNNING).
  Status Resume(const std::string& kernel_id, const std::string& why_refused);
  // kRestartHeld: holds a settled or running kernel for RestartKernel,
  // claiming its allocation (the plugins' refusal when it cannot); Busy
  // when a call owns it. Its state does not change.
  Result<KernelHold> BeginRestart(const std::string& kernel_id);
  // kRestartHeld for a BACKOFF kernel that its restart policy restarts
  // (it holds its resources already); Busy when a call owns it.
  Result<KernelHold> BeginPolicyRestart(const std::string& kernel_id);
  // Ends `hold` (BeginRestart's or BeginPolicyRestart's): when
  // `restarted`, kRestarted, or kPolicyRestarted (its event carrying the
  // kernel's `restarts`, which the caller has set); otherwise
  // kRestartUnheld, as Release. A BACKOFF kernel whose policy restart
  // failed stays BACKOFF for the caller to decide again.
  Status FinishRestart(KernelHold& hold, bool restarted);
  // kBackedOff: the kernel's container ended (`exit_code`, `reason`, at
  // `terminated_at`) and its restart policy starts it again at
  // `next_restart_at_ms`; it keeps its resources.
  Status BackOff(const std::string& kernel_id, std::optional<int> exit_code, const std::string& reason,
                 std::optional<int64_t> terminated_at, int64_t next_restart_at_ms);
  // kStopping; the state before is kept for StopFailed. Busy when a call
  // owns the kernel, unless that call is `by` (the caller's own hold).
  Status Stopping(const std::string& kernel_id, const KernelHold* by = nullptr);
  // kStopFailed.
  Status StopFailed(const std::string& kernel_id);
  // kTerminated, with its exit code, reason and when it ended (unset: not known).
  Status Terminated(const std::string& kernel_id, std::optional<int> exit_code, const std::string& reason,
                    std::optional<int64_t> terminated_at);
  // kDeleted: returns the final record, TERMINATED, with `exit_code` unless
  // it had one, reason "deleted" unless it had one, and holding nothing.
  Result<Kernel> Deleted(const std::string& kernel_id, std::optional<int> exit_code);
  // kForgotten, the event saying `reason`.
  Status Forget(const std::string& kernel_id, const std::string& reason);
  // kAbandoned.
  Status Abandon(const std::string& kernel_id);

  // ---- What is not a change of state.

  // The kernel, or nullptr, to read.
  const Kernel* Find(const std::string& kernel_id) const;
  // The kernel, or nullptr, to change. Callers may change what is not its
  // state, its resources or its container (conditions, the oom count). Its
  // Record is dropped, to be made again when next asked for; the pointer is
  // for the caller's hold of the agent's lock only.
  Kernel* Change(const std::string& kernel_id);
  // `kernel`'s record as the API shows it (Kernel::ToJson, as text), made at
  // its first ask after each Change and shared until the next. `kernel` must
  // be in the table.
  std::shared_ptr<const std::string> Record(const Kernel& kernel) const;
  const std::map<std::string, Kernel>& All() const { return kernels_; }
  // Records the container a create made for `kernel_id` (and when, for the reconcile decisions).
  void SetContainer(const std::string& kernel_id, const std::string& container_id);
  // ---- Holds.

  // Holds `kernel_id` for `act` (`why`: a kEnd's reason, else empty).
  // kNotFound when it is not in the table; Busy when a call owns it.
  Result<KernelHold> Hold(const std::string& kernel_id, Act act, std::string why = "");
  // Gives `hold` back now; nothing when it was given back already or its
  // kernel was removed. A restart's hold gives back what BeginRestart
  // claimed unless the kernel is RUNNING or BACKOFF (kRestartUnheld).
  void Release(KernelHold& hold);
  // Who holds which kernel (its Released condition is what a delete waits on).
  const KernelHolds& holds() const { return holds_; }
  // Whether a call acts on `kernel` now (its state is a call's, or a call
  // holds it), so that no other call, event or relist may change it. The
  // one test of it.
  bool OwnedByACall(const Kernel& kernel) const;
  // The refusal of a call on a kernel OwnedByACall.
  Status Busy(const Kernel& kernel) const;
  // Publishes `type` about `kernel`, with `extra`, the agent, the kernel's id
  // and state and the time: for events that are not a change of state. A
  // kernel_condition (after one of its conditions changed) also carries its
  // conditions now (Kernel::Conditions; null when none).
  void Announce(EventType type, const Kernel& kernel, nlohmann::json extra = nlohmann::json::object());

  // ---- What the reconcile decisions need.
  reconcile::Known KnownOf(const Kernel& kernel) const;
  // The mutation sequence: bumped by each container recorded or forgotten.
  uint64_t Seq() const { return seq_; }
  // When a kernel of `kernel_id` was last removed from the table, if it was.
  std::optional<uint64_t> ForgottenAt(const std::string& kernel_id) const;
  // Drops the removals at or before `seq` (a relist that began after them has seen them).
  void DropForgottenUpTo(uint64_t seq);

 private:
  // The kernel of `kernel_id` when `transition` may leave its place (and, when
  // `to` is set, reach `to`); otherwise the refusal, logged.
  Result<Kernel*> Check(Transition transition, const std::string& kernel_id, Place to);
  // Claims `kernel`'s allocation from every plugin (all or nothing).
  Status Claim(Kernel& kernel);
  // `take` from each plugin in turn; on a refusal, gives back what the
  // plugins before it took and returns it. Then `kernel` holds its resources.
  Status TakeFromEachPlugin(Kernel& kernel, const std::function<Status(ResourcePlugin&)>& take);
  // A transition that only changes the state: checked, entered.
  Status Move(Transition transition, const std::string& kernel_id, KernelState to);
  // RUNNING by `transition`, its exit code, reason, end and next restart
  // cleared; the event carries `extra`.
  void RunAgain(Kernel& kernel, Transition transition, nlohmann::json extra = nlohmann::json::object());
  // Gives `kernel`'s allocation back to every plugin.
  void Free(Kernel& kernel);
  // Removes `kernel_id` from the table, freeing what it holds.
  Kernel Remove(const std::string& kernel_id);
  // Sets `kernel`'s state to `to` and publishes the rule's event (if any) with `extra`.
  void Enter(Kernel& kernel, Transition transition, KernelState to, nlohmann::json extra = nlohmann::json::object());
  friend class KernelHold;  // its destructor takes mutex_ and calls Release

  const std::string agent_id_;
  Mutex& mutex_;
  std::vector<std::unique_ptr<ResourcePlugin>>& plugins_;
  EventHub& hub_;
  const Clock& clock_;
  std::map<std::string, Kernel> kernels_;
  // kernel id -> its Record; an entry is dropped by every way to change the kernel (Change, Remove).
  mutable std::unordered_map<std::string, std::shared_ptr<const std::string>> records_;
  std::map<std::string, KernelState> before_stopping_;  // kernel id -> its state before kStopping
  KernelHolds holds_;
  std::map<std::string, uint64_t> removed_at_seq_;       // kernel id -> seq when removed
  uint64_t seq_ = 0;
};

// "PULLING", ..., or "(none)".

}  // namespace slotd
