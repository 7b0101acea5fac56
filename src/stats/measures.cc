#include "stats/measures.h"

namespace slotd {

using nlohmann::json;

namespace {

// `value`, or null when absent.
template <typename T>
json OrNull(const std::optional<T>& value) {
  return value ? json(*value) : json(nullptr);
}

json ToJson(const KernelDeviceUse& use) {
  json processes = json::array();
  for (const auto& p : use.processes)
    processes.push_back({{"host_pid", p.host_pid}, {"kernel_pid", OrNull(p.kernel_pid)}, {"memory_bytes", p.memory_bytes}});
  return {{"plugin", use.plugin},
          {"device", use.device},
          {"memory_used_bytes", use.memory_used_bytes},
          {"processes", processes}};
}

json ToJson(const DeviceStats& device) {
  json foreign = json::array();
  for (const auto& p : device.foreign)
    foreign.push_back({{"host_pid", p.host_pid},
                       {"memory_bytes", p.memory_bytes},
                       {"container_id", p.container_id.empty() ? json(nullptr) : json(p.container_id)}});
  return {{"plugin", device.plugin},
          {"device", device.device},
          {"measured", device.measured},
          {"error", device.error.empty() ? json(nullptr) : json(device.error)},
          {"memory_used_bytes", device.memory_used_bytes},
          {"memory_total_bytes", device.memory_total_bytes},
          {"utilization_percent", device.utilization_percent},
          {"memory_utilization_percent", device.memory_utilization_percent},
          {"foreign_memory_bytes", device.foreign_memory_bytes},
          {"foreign", foreign}};
}

}  // namespace

std::optional<double> KernelStats::QuotaPercent() const {
  if (cpu_quota_millis <= 0 || !cpu_percent) return std::nullopt;
  return *cpu_percent * 1000.0 / cpu_quota_millis;
}

json ToJson(const KernelStats& stats) {
  json devices = json::array();
  for (const auto& use : stats.devices) devices.push_back(ToJson(use));
  const CgroupSample& s = stats.sample;
  json cpu = {{"usage_ns", s.cpu_usage_ns}, {"percent", OrNull(stats.cpu_percent)}};
  if (stats.cpu_quota_millis > 0) {
    cpu["quota_millis"] = stats.cpu_quota_millis;
    cpu["quota_percent"] = OrNull(stats.QuotaPercent());
  }
  return {{"kernel_id", stats.kernel_id},
          {"container_id", stats.container_id},
          {"sampled_at_ms", stats.sampled_at_ms},
          {"cpu", cpu},
          {"memory",
           {{"used_bytes", s.memory_used_bytes},
            {"limit_bytes", s.memory_limit_bytes},
            {"cache_bytes", s.memory_cache_bytes}}},
          {"pids", s.pids},
          {"io", {{"read_bytes", s.io_read_bytes}, {"write_bytes", s.io_write_bytes}}},
          {"devices", devices}};
}

json ToJson(const StatsSnapshot& snapshot) {
  json cores = json::array();
  for (const auto& core : snapshot.agent.cores)
    cores.push_back({{"core", core.core}, {"utilization_percent", OrNull(core.utilization_percent)}});
  json devices = json::array();
  for (const auto& device : snapshot.agent.devices) devices.push_back(ToJson(device));
  json kernels = json::array();  // ordered by kernel id, as the map is
  for (const auto& [id, stats] : snapshot.kernels) kernels.push_back(ToJson(stats));
  return {{"agent_id", snapshot.agent_id},
          {"stats_type", snapshot.stats_type},
          {"collected_at_ms", snapshot.collected_at_ms},
          {"interval_ms", snapshot.interval_ms},
          {"sweep_us", snapshot.sweep_us},
          {"sweeps_total", snapshot.sweeps_total},
          {"skipped_samples_total", snapshot.skipped_samples_total},
          {"attribution_unavailable",
           snapshot.attribution_unavailable.empty() ? json(nullptr) : json(snapshot.attribution_unavailable)},
          {"agent",
           {{"cores", cores},
            {"memory",
             {{"capacity_bytes", snapshot.agent.memory_capacity_bytes},
              {"used_bytes", snapshot.agent.memory_used_bytes}}},
            {"devices", devices}}},
          {"kernels", kernels}};
}

}  // namespace slotd
