#include "agent/kernel_lifetimes.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "model/kernel_policy.h"

namespace slotd {

KernelLifetimes::KernelLifetimes(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
                                 const ContainerStopper& stopper, KernelUsers& users, KernelEnds& ends)
    : config_(config),
      engine_(engine),
      clock_(clock),
      store_(store),
      stopper_(stopper),
      users_(users),
      ends_(ends) {}

std::optional<int64_t> KernelLifetimes::IdleEndMs(const Kernel& kernel) const {
  if (!kernel.idle_since_ms || kernel.state() != KernelState::kRunning) return std::nullopt;
  const IdleRule rule = ResolveIdle(kernel.request.idle, config_.container);
  if (rule.idle_for.count() == 0) return std::nullopt;
  return *kernel.idle_since_ms + rule.idle_for.count();
}

void KernelLifetimes::StopExpired(int64_t now) {
  std::vector<KernelEnds::ToStop> expired, drained, idle;
  const int64_t drain_deadline = ends_.DrainDeadline();
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
    for (const std::vector<KernelEnds::ToStop>* stopping : {&expired, &drained, &idle})
      for (const KernelEnds::ToStop& k : *stopping) (void)store_.table.Stopping(k.kernel_id);
  }
  ends_.StopTerminating(std::move(expired), "lifetime exceeded");
  ends_.StopTerminating(std::move(drained), "drained");
  ends_.StopTerminating(std::move(idle), "idle");
}

void KernelLifetimes::Warn(int64_t now) {
  struct Due {
    std::string kernel_id;
    std::string container_id;
    std::string signal;
    int64_t ends_at;  // unix seconds: the end it warns of (its lifetime's, its idle window's or the drain's)
    const char* end;  // which end that is, for the log
  };
  std::vector<Due> due;
  const int64_t drain_deadline = ends_.DrainDeadline();
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

std::optional<int64_t> KernelLifetimes::RestartDue(int64_t now_ms) {
  struct Due {
    std::string kernel_id;
    std::string container_id;
    int64_t restarts;  // before this one
    std::optional<RunAs> run_as;
    KernelHold hold;   // BeginPolicyRestart's
  };
  std::vector<Due> due;
  std::optional<int64_t> next;
  if (ends_.DrainDeadline() > 0) return next;  // a drain with a deadline wins: they wait for it
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
      } else if (Result<KernelHold> hold = store_.table.BeginPolicyRestart(id); hold.ok()) {
        due.push_back({id, kernel.container_id, kernel.restarts, kernel.run_as, std::move(*hold)});
      }
    }
  }
  for (Due& d : due) {
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
    if (renamed.ok()) store_.table.Change(d.kernel_id)->restarts = restarts;  // its name records it now
    (void)store_.table.FinishRestart(d.hold, started.ok());
    if (!verified.ok()) {
      ends_.Ended(store_, d.kernel_id, KernelEnd{std::nullopt, false, now_ms, verified.message(), true, true});
      continue;
    }
    if (started.ok()) {
      spdlog::info("kernel {}: restarted by its restart policy (restart {})", d.kernel_id, restarts);
      continue;
    }
    spdlog::warn("kernel {}: its restart policy could not start it again: {}", d.kernel_id, started.message());
    ends_.Ended(store_, d.kernel_id, KernelEnd{std::nullopt, false, now_ms, "restart failed: " + started.message()});
    note_next(*k);
  }
  return next;
}

Result<Kernel> KernelLifetimes::Restart(const std::string& kernel_id) {
  std::string container_id;
  StopContract contract;
  std::optional<RunAs> run_as;
  KernelHold hold;  // declared before every lock below: given back (if still held) after them
  {
    MutexLock lock(store_.mutex);
    const Kernel* k = store_.table.Find(kernel_id);
    if (!k) return store_.Unknown(kernel_id);
    if (store_.table.OwnedByACall(*k)) return store_.table.Busy(*k);
    if (k->deadline && *k->deadline <= clock_.UnixSeconds())
      return Status::FailedPrecondition("kernel " + kernel_id +
                                        "'s lifetime has run out, so it cannot be restarted; create a new kernel");
    Result<KernelHold> held = store_.table.BeginRestart(kernel_id);
    if (!held.ok())
      return Status::ResourceExhausted("kernel " + kernel_id + " cannot be restarted: " + held.status().message());
    hold = std::move(*held);
    container_id = k->container_id;
    contract = k->request.stop;
    run_as = k->run_as;
  }
  Status s = engine_.Restart(container_id, stopper_.TimeoutOf(contract));
  const Status verified = s.ok() ? users_.VerifyRestarted(kernel_id, container_id, run_as) : Status::Ok();
  MutexLock lock(store_.mutex);
  if (!store_.table.Find(kernel_id)) return Status::NotFound("kernel " + kernel_id + " was removed while restarting");
  Status finished = store_.table.FinishRestart(hold, s.ok());
  if (!finished.ok()) return finished;
  if (!s.ok()) return s.WithPrefix("restarting kernel " + kernel_id);
  if (!verified.ok()) {
    ends_.Ended(store_, kernel_id, KernelEnd{std::nullopt, false, clock_.UnixMillis(), verified.message(), true, true});
    return verified;
  }
  return *store_.table.Find(kernel_id);
}

void KernelLifetimes::NoteActivity(const std::vector<Activity>& activity) {
  const int64_t recent_ms = 2 * config_.container.stats_interval.count();
  MutexLock lock(store_.mutex);
  for (const Activity& a : activity) {
    const Kernel* k = store_.table.Find(a.kernel_id);
    if (!k || k->container_id != a.container_id || k->state() != KernelState::kRunning) continue;
    const IdleRule rule = ResolveIdle(k->request.idle, config_.container);
    if (rule.idle_for.count() == 0) continue;
    // Its CPU against what it may use: its cores, or its shared quota.
    const double cores = k->allocation.shared_cpu_millis > 0 ? k->allocation.shared_cpu_millis / 1000.0
                                                            : std::max<size_t>(1, k->allocation.cores.size());
    const bool busy = a.cpu_percent / 100.0 / cores >= rule.cpu_below ||
                      (a.gpu_percent && *a.gpu_percent / 100.0 >= rule.gpu_below) || k->open_execs > 0 ||
                      a.at_ms - k->last_exec_ms < recent_ms;
    if (busy) {
      if (k->idle_since_ms) store_.table.Change(a.kernel_id)->idle_since_ms.reset();
      continue;
    }
    if (k->idle_since_ms) continue;
    store_.table.Change(a.kernel_id)->idle_since_ms = a.at_ms;
    spdlog::info("kernel {}: idle; stopped after {} ms more unless it gets busy", a.kernel_id, rule.idle_for.count());
    store_.table.Announce(EventType::kKernelIdle, *k, {{"idle_since_ms", a.at_ms}, {"stop_at_ms", a.at_ms + rule.idle_for.count()}});
  }
}

}  // namespace slotd
