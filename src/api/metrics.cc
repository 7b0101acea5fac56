#include "api/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace slotd {
namespace {

// One scrape's registry. Families are created on their first series, so a
// family with no series (no kernels, no measured devices) is left out.
class Exposition {
 public:
  explicit Exposition(std::string agent_id) : agent_id_(std::move(agent_id)) {}

  // Sets the gauge `name` with `labels` (agent_id added) to `value`.
  void Gauge(const std::string& name, const std::string& help, prometheus::Labels labels, double value) {
    auto [it, created] = gauges_.try_emplace(name, nullptr);
    if (created) it->second = &prometheus::BuildGauge().Name(name).Help(help).Register(registry_);
    labels["agent_id"] = agent_id_;
    it->second->Add(labels).Set(value);
  }

  // Sets the counter `name` (ending in _total) with `labels` (agent_id added) to `value`.
  void Counter(const std::string& name, const std::string& help, prometheus::Labels labels, double value) {
    auto [it, created] = counters_.try_emplace(name, nullptr);
    if (created) it->second = &prometheus::BuildCounter().Name(name).Help(help).Register(registry_);
    labels["agent_id"] = agent_id_;
    it->second->Add(labels).Increment(value);
  }

  std::string Text() const { return prometheus::TextSerializer().Serialize(registry_.Collect()); }

 private:
  const std::string agent_id_;
  prometheus::Registry registry_;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges_;      // name -> family in registry_
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters_;  // name -> family in registry_
};

double Bytes(uint64_t bytes) { return static_cast<double>(bytes); }
double Ratio(double percent) { return percent / 100.0; }

void AddKernel(Exposition& out, const KernelStats& kernel) {
  const prometheus::Labels id = {{"kernel_id", kernel.kernel_id}};
  const CgroupSample& s = kernel.sample;
  out.Counter("slotd_kernel_cpu_seconds_total", "CPU time used by the kernel's container.", id,
              static_cast<double>(s.cpu_usage_ns) / 1e9);
  if (kernel.cpu_percent)
    out.Gauge("slotd_kernel_cpu_usage_ratio",
              "Cores the kernel kept busy over the last stats interval (1 = one whole core).", id,
              Ratio(*kernel.cpu_percent));
  out.Gauge("slotd_kernel_memory_used_bytes", "Memory charged to the kernel's container, page cache included.", id,
            Bytes(s.memory_used_bytes));
  if (s.memory_limit_bytes > 0)
    out.Gauge("slotd_kernel_memory_limit_bytes", "Memory limit of the kernel's container.", id,
              Bytes(s.memory_limit_bytes));
  out.Gauge("slotd_kernel_memory_cache_bytes", "Page cache part of the kernel's used memory.", id,
            Bytes(s.memory_cache_bytes));
  out.Gauge("slotd_kernel_pids", "Tasks (threads included) in the kernel's container.", id,
            static_cast<double>(s.pids));
  out.Counter("slotd_kernel_io_read_bytes_total", "Bytes the kernel's container read from block devices.", id,
              Bytes(s.io_read_bytes));
  out.Counter("slotd_kernel_io_write_bytes_total", "Bytes the kernel's container wrote to block devices.", id,
              Bytes(s.io_write_bytes));
  for (const KernelDeviceUse& use : kernel.devices) {
    prometheus::Labels labels = {{"kernel_id", kernel.kernel_id}, {"plugin", use.plugin}, {"device", use.device}};
    out.Gauge("slotd_kernel_device_memory_used_bytes", "Device memory used by the kernel's processes on a device it holds.",
              labels, Bytes(use.memory_used_bytes));
    out.Gauge("slotd_kernel_device_processes", "The kernel's processes on a device it holds.", labels,
              static_cast<double>(use.processes.size()));
  }
}

void AddDevice(Exposition& out, const DeviceStats& device, bool attribution) {
  const prometheus::Labels labels = {{"plugin", device.plugin}, {"device", device.device}};
  out.Gauge("slotd_device_measured", "Whether the device was measured in the last sweep (1) or not (0).", labels,
            device.measured ? 1 : 0);
  if (!device.measured) return;
  out.Gauge("slotd_device_memory_used_bytes", "Device memory in use by every process and the driver.", labels,
            Bytes(device.memory_used_bytes));
  out.Gauge("slotd_device_memory_total_bytes", "Device memory in all.", labels, Bytes(device.memory_total_bytes));
  out.Gauge("slotd_device_utilization_ratio", "Share of the last sample period during which the device computed.",
            labels, Ratio(device.utilization_percent));
  out.Gauge("slotd_device_memory_utilization_ratio",
            "Share of the last sample period during which device memory was read or written.", labels,
            Ratio(device.memory_utilization_percent));
  if (!attribution) return;
  out.Gauge("slotd_device_foreign_memory_bytes", "Device memory used by processes that are not this agent's kernels'.",
            labels, Bytes(device.foreign_memory_bytes));
  out.Gauge("slotd_device_foreign_processes", "Processes on the device that are not this agent's kernels'.", labels,
            static_cast<double>(device.foreign.size()));
}

}  // namespace

std::string RenderMetrics(const StatsSnapshot& snapshot, const MetricsFacts& facts) {
  Exposition out(snapshot.agent_id);
  const bool swept = snapshot.collected_at_ms > 0;
  const bool attribution = snapshot.attribution_unavailable.empty();

  out.Gauge("slotd_build_info", "Always 1; its labels tell the agent's version, source commit and label format.",
            {{"version", facts.build.version},
             {"commit", facts.build.commit},
             {"label_format", std::to_string(facts.build.label_format)}},
            1);
  out.Gauge("slotd_engine_reachable", "Whether the container engine answers (1) or not (0), as GET /health says.", {},
            facts.engine_reachable ? 1 : 0);
  out.Gauge("slotd_agent_draining", "Whether the agent is draining: it takes no new kernels (1) or does (0).", {},
            facts.draining ? 1 : 0);
  if (facts.etcd) {
    out.Gauge("slotd_etcd_registered",
              "Whether the agent's etcd registration is current (1) or not (0: etcd unreachable, or the id is held "
              "by another agent), as GET /health says.",
              {}, facts.etcd->registered ? 1 : 0);
    out.Counter("slotd_etcd_writes_total", "Registration documents the agent wrote to etcd (creates and updates).",
                {}, static_cast<double>(facts.etcd->writes));
    out.Counter("slotd_etcd_keepalives_total", "Renewals of the agent's etcd lease.", {},
                static_cast<double>(facts.etcd->keep_alives));
  }
  for (const auto& [state, count] : facts.kernels_by_state)
    out.Gauge("slotd_kernels", "Kernels in the agent's table, by state.", {{"state", state}}, count);
  out.Gauge("slotd_kernels_with_condition",
            "Running kernels whose container was paused or had its cpuset or memory changed outside slotd.", {},
            facts.kernels_with_condition);
  for (const auto& [kernel_id, health] : facts.kernel_health) {
    out.Gauge("slotd_kernel_ready", "Whether the kernel's health check has passed since its container started (1) or not (0).",
              {{"kernel_id", kernel_id}}, health.ready ? 1 : 0);
    out.Gauge("slotd_kernel_healthy", "Whether the kernel's health check says healthy (1) or starting or unhealthy (0).",
              {{"kernel_id", kernel_id}}, health.healthy ? 1 : 0);
    out.Counter("slotd_kernel_health_checks_total",
                "Health checks of the kernel since its container started, passed or failed.",
                {{"kernel_id", kernel_id}}, static_cast<double>(health.checks));
  }
  for (const auto& [kernel_id, restarts] : facts.kernel_restarts)
    out.Counter("slotd_kernel_restarts_total", "Times the kernel's restart policy started its container again.",
                {{"kernel_id", kernel_id}}, static_cast<double>(restarts));

  for (const MetricsFacts::Device& device : facts.devices) {
    const prometheus::Labels labels = {{"plugin", device.plugin}, {"device", device.device}};
    out.Gauge("slotd_device_healthy", "Whether the device is healthy (1) or unhealthy or of unknown health (0).",
              labels, device.healthy ? 1 : 0);
    out.Gauge("slotd_device_drained", "Whether the device is drained: kept from new kernels (1) or not (0).", labels,
              device.drained ? 1 : 0);
  }

  out.Gauge("slotd_stats_interval_seconds", "Configured time between stats sweeps.", {},
            static_cast<double>(snapshot.interval_ms) / 1e3);
  out.Counter("slotd_stats_sweeps_total", "Stats sweeps since the agent started.", {},
              static_cast<double>(snapshot.sweeps_total));
  out.Counter("slotd_stats_skipped_samples_total",
              "Samples left out of a sweep since the agent started: a kernel whose container vanished or could not be "
              "read, a device whose meter failed or overran its deadline.", {},
              static_cast<double>(snapshot.skipped_samples_total));
  if (swept) {
    out.Gauge("slotd_stats_last_sweep_timestamp_seconds", "Unix time when the latest stats sweep ended.", {},
              static_cast<double>(snapshot.collected_at_ms) / 1e3);
    out.Gauge("slotd_stats_sweep_duration_seconds", "How long the latest stats sweep took.", {},
              static_cast<double>(snapshot.sweep_us) / 1e6);
    out.Gauge("slotd_stats_attribution_available",
              "Whether device processes can be attributed to kernels on this host (1) or not (0).", {},
              attribution ? 1 : 0);
  }

  out.Gauge("slotd_agent_kernels", "Kernels measured in the latest stats sweep.", {},
            static_cast<double>(snapshot.kernels.size()));
  out.Gauge("slotd_agent_memory_capacity_bytes", "The agent's memory share.", {},
            Bytes(snapshot.agent.memory_capacity_bytes));
  out.Gauge("slotd_agent_memory_used_bytes", "Memory used by the agent's kernels, summed.", {},
            Bytes(snapshot.agent.memory_used_bytes));
  for (const CoreStats& core : snapshot.agent.cores) {
    if (core.utilization_percent)
      out.Gauge("slotd_agent_core_usage_ratio", "Busy share of one of the agent's cores over the last stats interval.",
                {{"core", std::to_string(core.core)}}, Ratio(*core.utilization_percent));
  }
  for (const DeviceStats& device : snapshot.agent.devices) AddDevice(out, device, swept && attribution);
  for (const auto& [id, kernel] : snapshot.kernels) AddKernel(out, kernel);
  return out.Text();
}

}  // namespace slotd
