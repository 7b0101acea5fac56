// The agent's timed work on its kernels, run by the watcher's threads: the
// ends that come by themselves (a lifetime run out, an idle window over, a
// drain's deadline) and the stop they get (StopExpiredKernels,
// StopTerminating), the warning before such an end (WarnKernels), and the
// restarts a restart policy asks for (RestartDueKernels).
#include <algorithm>
#include <mutex>

#include <spdlog/spdlog.h>

#include "agent/agent.h"

namespace slotd {

std::optional<int64_t> Agent::IdleEndMs(const Kernel& kernel) const {
  if (!kernel.idle_since_ms || kernel.state() != KernelState::kRunning) return std::nullopt;
  const IdleRule rule = ResolveIdle(kernel.request.idle, config_.container);
  if (rule.idle_for.count() == 0) return std::nullopt;
  return *kernel.idle_since_ms + rule.idle_for.count();
}

void Agent::StopExpiredKernels(int64_t now) {
  std::vector<ToStop> expired, drained, idle;
  const int64_t drain_deadline = drain_deadline_;
  {
    MutexLock lock(store_.mutex);
    for (const auto& [id, kernel] : store_.table.All()) {
      const bool live = kernel.state() == KernelState::kRunning || kernel.state() == KernelState::kBackoff;
      if (!live || store_.table.OwnedByACall(kernel)) continue;
      if (kernel.deadline && *kernel.deadline <= now) {
        expired.push_back({id, kernel.container_id, kernel.request.stop});
      } else if (drain_deadline > 0 && drain_deadline <= now) {
        drained.push_back({id, kernel.container_id, kernel.request.stop});
      } else if (const std::optional<int64_t> idle_end = IdleEndMs(kernel); idle_end && *idle_end <= now * 1000) {
        idle.push_back({id, kernel.container_id, kernel.request.stop});
      }
    }
    // Each is ours until stopped, as in DeleteKernel.
    for (const std::vector<ToStop>* stopping : {&expired, &drained, &idle})
      for (const ToStop& k : *stopping) (void)store_.table.Stopping(k.kernel_id);
  }
  StopTerminating(expired, "lifetime exceeded");
  StopTerminating(drained, "drained");
  StopTerminating(idle, "idle");
}

void Agent::StopTerminating(const std::vector<ToStop>& kernels, const std::string& reason) {
  for (const auto& [kernel_id, container_id, contract] : kernels) {
    const StopOutcome stop = stopper_.Stop(container_id, contract);
    const Status& stopped = stop.stopped;
    MutexLock lock(store_.mutex);
    const Kernel* k = store_.table.Find(kernel_id);
    if (!k || k->container_id != container_id || k->state() != KernelState::kTerminating) continue;
    if (!stopped.ok() && stopped.code() != Status::Code::kNotFound) {
      spdlog::error("kernel {}: to be stopped ({}), but its container {} could not be stopped ({}); retrying",
                    kernel_id, reason, container_id, stopped.message());
      (void)store_.table.StopFailed(kernel_id);
      continue;
    }
    (void)store_.table.Terminated(kernel_id, stop.exit_code, reason, stop.ended_at);
  }
}

void Agent::WarnKernels(int64_t now) {
  struct Due {
    std::string kernel_id;
    std::string container_id;
    std::string signal;
    int64_t ends_at;  // unix seconds: the end it warns of (its lifetime's, its idle window's or the drain's)
    const char* end;  // which end that is, for the log
  };
  std::vector<Due> due;
  const int64_t drain_deadline = drain_deadline_;
  {
    MutexLock lock(store_.mutex);
    for (const auto& [id, kernel] : store_.table.All()) {
      if (kernel.warned || kernel.state() != KernelState::kRunning || store_.table.OwnedByACall(kernel)) continue;
      // Only a kernel that asked for a warning is sent one.
      const std::optional<StopWarning>& warn = kernel.request.stop.warn_before;
      if (!warn) continue;
      const int64_t before_ms = warn->before.count();
      const bool lifetime_ends = kernel.deadline && *kernel.deadline * 1000 - before_ms <= now * 1000;
      const std::optional<int64_t> idle_end = IdleEndMs(kernel);
      const bool idle_ends = idle_end && *idle_end - before_ms <= now * 1000;
      const bool drain_ends = drain_deadline > 0 && drain_deadline * 1000 - before_ms <= now * 1000;
      if (lifetime_ends) {
        due.push_back({id, kernel.container_id, warn->signal, *kernel.deadline, "its lifetime"});
      } else if (idle_ends) {
        due.push_back({id, kernel.container_id, warn->signal, (*idle_end + 999) / 1000, "its idle window"});
      } else if (drain_ends) {
        due.push_back({id, kernel.container_id, warn->signal, drain_deadline, "the drain's deadline"});
      }
    }
  }
  for (const Due& d : due) {
    {
      MutexLock naming(rename_mutex_);
      int64_t restarts;
      {
        MutexLock lock(store_.mutex);
        const Kernel* k = store_.table.Find(d.kernel_id);
        if (!k || k->container_id != d.container_id || k->warned) continue;
        restarts = k->restarts;
      }
      if (Status renamed = engine_.Rename(d.container_id, ContainerName(config_.agent.id, d.kernel_id, {restarts, true}));
          !renamed.ok()) {
        spdlog::warn("kernel {}: could not record its warning ({}); trying again", d.kernel_id, renamed.message());
        continue;
      }
      MutexLock lock(store_.mutex);
      Kernel* k = store_.table.Change(d.kernel_id);
      if (!k || k->container_id != d.container_id) continue;
      k->warned = true;
      store_.table.Announce(EventType::kKernelWarned, *k, {{"signal", d.signal}, {"deadline", d.ends_at}});
    }
    const Status sent = engine_.Kill(d.container_id, d.signal);
    if (sent.ok()) {
      spdlog::info("kernel {}: sent {}: {} ends at {} (unix seconds)", d.kernel_id, d.signal, d.end, d.ends_at);
    } else {
      spdlog::warn("kernel {}: could not send {}: {}", d.kernel_id, d.signal, sent.message());
    }
  }
}

std::optional<int64_t> Agent::RestartDueKernels(int64_t now_ms) {
  struct Due {
    std::string kernel_id;
    std::string container_id;
    int64_t restarts;  // before this one
    std::optional<RunAs> run_as;
  };
  std::vector<Due> due;
  std::optional<int64_t> next;
  if (drain_deadline_ > 0) return next;  // a drain with a deadline wins: they wait for it
  auto note_next = [&](const Kernel& kernel) {
    if (kernel.state() == KernelState::kBackoff && kernel.next_restart_at_ms)
      next = std::min(next.value_or(*kernel.next_restart_at_ms), *kernel.next_restart_at_ms);
  };
  {
    MutexLock lock(store_.mutex);
    for (const auto& [id, kernel] : store_.table.All()) {
      if (kernel.state() != KernelState::kBackoff || !kernel.next_restart_at_ms || store_.table.OwnedByACall(kernel)) continue;
      // A kernel out of lifetime is StopExpiredKernels's to end, not to start.
      if (kernel.deadline && *kernel.deadline * 1000 <= now_ms) continue;
      if (*kernel.next_restart_at_ms > now_ms) {
        note_next(kernel);
      } else if (store_.table.BeginPolicyRestart(id).ok()) {
        due.push_back({id, kernel.container_id, kernel.restarts, kernel.run_as});
      }
    }
  }
  for (const Due& d : due) {
    const int64_t restarts = d.restarts + 1;
    Status renamed = Status::Ok();
    {
      MutexLock naming(rename_mutex_);
      bool warned;
      {
        MutexLock lock(store_.mutex);
        const Kernel* k = store_.table.Find(d.kernel_id);
        warned = k && k->warned;
      }
      renamed = engine_.Rename(d.container_id, ContainerName(config_.agent.id, d.kernel_id, {restarts, warned}));
    }
    const Status started = renamed.ok() ? engine_.Start(d.container_id) : renamed.WithPrefix("recording the restart");
    const Status verified = started.ok() ? users_.VerifyRestarted(d.kernel_id, d.container_id, d.run_as) : Status::Ok();
    MutexLock lock(store_.mutex);
    const Kernel* k = store_.table.Find(d.kernel_id);
    if (!k || k->container_id != d.container_id) continue;
    (void)store_.table.FinishPolicyRestart(d.kernel_id, renamed.ok() ? restarts : d.restarts, started.ok());
    restart_done_.notify_all();
    if (!verified.ok()) {
      Ended(d.kernel_id, KernelEnd{std::nullopt, false, now_ms, verified.message(), true, true});
      continue;
    }
    if (started.ok()) {
      spdlog::info("kernel {}: restarted by its restart policy (restart {})", d.kernel_id, restarts);
      continue;
    }
    spdlog::warn("kernel {}: its restart policy could not start it again: {}", d.kernel_id, started.message());
    Ended(d.kernel_id, KernelEnd{std::nullopt, false, now_ms, "restart failed: " + started.message()});
    note_next(*k);
  }
  return next;
}

}  // namespace slotd
