// Agent, continued: the health of running kernels — which ones the health
// keeper probes and where, what each probe's result comes to — and their
// activity: when a kernel counts as idle.
#include "agent/agent.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

namespace slotd {

using nlohmann::json;

std::vector<Agent::HealthTarget> Agent::HealthTargets() const {
  const std::string& network = config_.container.network;
  MutexLock lock(store_.mutex);
  std::vector<HealthTarget> targets;
  for (const auto& [id, kernel] : store_.table.All()) {
    if (!kernel.request.health || kernel.state() != KernelState::kRunning || kernel.container_id.empty() ||
        store_.table.OwnedByACall(kernel))
      continue;
    HealthTarget target{id, kernel.container_id, kernel.runs, ResolveHealth(*kernel.request.health, config_.container), {}};
    const int port = kernel.request.health->port;
    target.address = {port, network == "none"};
    if (network == "bridge") {
      for (const PortBinding& binding : kernel.allocation.ports)
        if (binding.container_port == port) target.address.port = binding.host_port;
    }
    targets.push_back(std::move(target));
  }
  return targets;
}

void Agent::RecordHealth(const std::string& kernel_id, const std::string& container_id, const ProbeResult& result,
                         bool in_start_period) {
  std::vector<ToStop> to_stop;
  std::optional<ToStop> to_end;  // stopped; its death decides the rest
  {
    MutexLock lock(store_.mutex);
    Kernel* k = store_.table.Change(kernel_id);
    if (!k || k->container_id != container_id || k->state() != KernelState::kRunning || !k->request.health ||
        !k->health || store_.table.OwnedByACall(*k) || !k->end_cause.empty())
      return;
    const HealthRule rule = ResolveHealth(*k->request.health, config_.container);
    const HealthChange change = RecordProbe(*k->health, rule, result.passed, result.output, in_start_period);
    if (change.became_ready) {
      spdlog::info("kernel {}: ready (its health check passed)", kernel_id);
      store_.table.Announce(EventType::kKernelReady, *k);
    }
    if (change.became_healthy) {
      spdlog::info("kernel {}: healthy again", kernel_id);
      store_.table.Announce(EventType::kKernelHealthy, *k);
    }
    const OnUnhealthy on_unhealthy = k->request.health->on_unhealthy;
    // A kernel still unhealthy after its stop failed (it is RUNNING again)
    // is stopped again at its next failed check.
    const bool again = !change.became_unhealthy && !result.passed && !in_start_period &&
                       k->health->status == HealthStatus::kUnhealthy && on_unhealthy != OnUnhealthy::kNone;
    if (!change.became_unhealthy && !again) return;
    if (again) {
      spdlog::warn("kernel {}: still unhealthy, and its last stop failed; stopping it again (on_unhealthy: {})",
                   kernel_id, OnUnhealthyName(on_unhealthy));
    } else {
      spdlog::warn("kernel {}: unhealthy after {} failed checks: {} (on_unhealthy: {})", kernel_id,
                   k->health->failing, k->health->last_failure, OnUnhealthyName(on_unhealthy));
      store_.table.Announce(EventType::kKernelUnhealthy, *k,
                      {{"failing", k->health->failing}, {"last_failure", k->health->last_failure},
                       {"on_unhealthy", OnUnhealthyName(on_unhealthy)}});
    }
    if (on_unhealthy == OnUnhealthy::kStop && store_.table.Stopping(kernel_id).ok()) {
      to_stop.push_back({kernel_id, container_id, k->request.stop});
    } else if (on_unhealthy == OnUnhealthy::kRestart) {
      k->end_cause = "unhealthy";
      to_end = ToStop{kernel_id, container_id, k->request.stop};
    }
  }
  StopTerminating(to_stop, "unhealthy");
  if (to_end) {
    // Its "die" event (or the next relist) ends it: Ended reads end_cause.
    const StopOutcome stop = stopper_.Stop(to_end->container_id, to_end->contract);
    if (!stop.stopped.ok() && stop.stopped.code() != Status::Code::kNotFound) {
      spdlog::error("kernel {}: unhealthy, but its container could not be stopped: {}", kernel_id,
                    stop.stopped.message());
      MutexLock lock(store_.mutex);
      if (Kernel* k = store_.table.Change(kernel_id); k && k->container_id == container_id) k->end_cause.clear();
    }
  }
}

void Agent::NoteActivity(const std::vector<KernelActivity>& activity) {
  const int64_t recent_ms = 2 * config_.container.stats_interval.count();
  MutexLock lock(store_.mutex);
  for (const KernelActivity& a : activity) {
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

void Agent::NoteCgroupReadings(const std::vector<KernelCgroupReading>& readings) {
  std::vector<std::pair<std::string, std::string>> moved;  // (kernel, container) whose cores changed
  {
    MutexLock lock(store_.mutex);
    for (const KernelCgroupReading& seen : readings) {
      const Kernel* k = store_.table.Find(seen.kernel_id);
      if (!k || k->container_id != seen.container_id || k->state() != KernelState::kRunning) continue;
      if (!seen.cpuset_cpus.empty() && seen.cpuset_cpus != k->cgroup_cpuset) {
        store_.table.Change(seen.kernel_id)->cgroup_cpuset = seen.cpuset_cpus;
        moved.emplace_back(seen.kernel_id, seen.container_id);
      }
      if (seen.oom_kills <= static_cast<uint64_t>(k->oom_kills)) continue;
      const uint64_t kills = std::min<uint64_t>(seen.oom_kills, std::numeric_limits<int>::max());
      store_.table.Change(seen.kernel_id)->oom_kills = static_cast<int>(kills);
      spdlog::warn("kernel {}: its cgroup counts {} process(es) killed for lack of memory", seen.kernel_id,
                   k->oom_kills);
      store_.table.AnnounceCondition(*k);
    }
  }
  for (const auto& [kernel_id, container_id] : moved) CheckDrift(kernel_id, container_id);
}

}  // namespace slotd
