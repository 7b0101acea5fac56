#include "agent/kernel_health.h"

#include <algorithm>
#include <limits>
#include <optional>

#include <spdlog/spdlog.h>

namespace slotd {

KernelHealth::KernelHealth(const Config& config, KernelStore& store, KernelEnds& ends, Converger& converger,
                           DeviceManager& devices)
    : config_(config), store_(store), ends_(ends), converger_(converger), devices_(devices) {}

std::vector<KernelHealth::Target> KernelHealth::Targets() const {
  const std::string& network = config_.container.network;
  MutexLock lock(store_.mutex);
  std::vector<Target> targets;
  for (const auto& [id, kernel] : store_.table.All()) {
    if (!kernel.request.health || kernel.state() != KernelState::kRunning || kernel.container_id.empty() ||
        store_.table.OwnedByACall(kernel))
      continue;
    Target target{id, kernel.container_id, kernel.runs, ResolveHealth(*kernel.request.health, config_.container), {}};
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

void KernelHealth::RecordCheck(const std::string& kernel_id, const std::string& container_id, const ProbeResult& result,
                         bool in_start_period) {
  std::vector<KernelEnds::ToStop> to_stop;
  std::optional<KernelEnds::ToStop> to_end;  // stopped for its restart policy to decide on
  KernelHold end_hold;                       // to_end's, given to its stop
  {
    MutexLock lock(store_.mutex);
    Kernel* k = store_.table.Change(kernel_id);
    if (!k || k->container_id != container_id || k->state() != KernelState::kRunning || !k->request.health ||
        !k->health || store_.table.OwnedByACall(*k))
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
      if (Result<KernelHold> hold = store_.table.Hold(kernel_id, KernelTable::Act::kEnd, "unhealthy"); hold.ok()) {
        end_hold = std::move(*hold);
        to_end = KernelEnds::ToStop{kernel_id, container_id, k->request.stop};
      }
    }
  }
  // Queued: the probe worker that found it unhealthy never waits on its stop.
  ends_.StopTerminating(std::move(to_stop), "unhealthy");
  if (to_end) ends_.StopToRestart(std::move(end_hold), *to_end);
}

void KernelHealth::RecordCgroups(const std::vector<CgroupReading>& readings) {
  std::vector<std::pair<std::string, std::string>> moved;  // (kernel, container) whose cores changed
  {
    MutexLock lock(store_.mutex);
    for (const CgroupReading& seen : readings) {
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
      store_.table.Announce(EventType::kKernelCondition, *k);
    }
  }
  for (const auto& [kernel_id, container_id] : moved) converger_.CheckDrift(kernel_id, container_id);
}

void KernelHealth::ApplyDeviceHealth() {
  const std::optional<DeviceManager::HealthNow> health = devices_.HealthChange();
  if (!health) return;
  std::vector<KernelEnds::ToStop> to_stop;
  {
    MutexLock lock(store_.mutex);
    std::vector<std::string> running;
    for (const auto& [kernel_id, kernel] : store_.table.All()) {
      const bool live = kernel.state() == KernelState::kRunning || kernel.state() == KernelState::kBackoff;
      if (live && kernel.holds_resources) running.push_back(kernel_id);
    }
    for (const std::string& kernel_id : running) {
      const Kernel& kernel = *store_.table.Find(kernel_id);
      std::string condition;
      bool stop = false;
      for (const auto& [plugin, ids] : kernel.allocation.devices) {
        for (const std::string& id : ids) {
          auto bad = health->unhealthy.find({plugin, id});
          if (bad == health->unhealthy.end()) continue;
          condition += (condition.empty() ? "" : "; ") + plugin + " device " + id + " is " +
                       DeviceHealthName(bad->second.health) + ": " + bad->second.reason;
          stop = stop || (bad->second.health == DeviceHealth::kUnhealthy && health->stopping_plugins.count(plugin));
        }
      }
      // Ours until stopped, as in DeleteKernel.
      if (stop && store_.table.Stopping(kernel_id).ok())
        to_stop.push_back({kernel_id, kernel.container_id, kernel.request.stop});
      if (condition == kernel.device_condition) continue;
      store_.table.Change(kernel_id)->device_condition = condition;
      if (!condition.empty()) spdlog::warn("kernel {}: {}", kernel_id, condition);
      store_.table.Announce(EventType::kKernelCondition, kernel);
    }
  }
  for (const KernelEnds::ToStop& k : to_stop)
    spdlog::warn("kernel {}: stopping it, a device it holds is unhealthy (on-unhealthy = \"stop\")", k.kernel_id);
  // A kernel whose stop failed is looked at again.
  // (The device manager outlives the stop queue; this object may not.)
  ends_.StopTerminating(std::move(to_stop), "device unhealthy",
                        [&devices = devices_](const std::string&, bool stopped) {
                          if (!stopped) devices.LookAgain();
                        });
}

}  // namespace slotd
