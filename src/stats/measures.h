// Measures: what one stats sweep found, for this agent only — its kernels,
// its slice of the node (cores, memory share, devices), and the usage of its
// devices by processes that are not its kernels' (foreign usage).
//
// A StatsSnapshot is immutable once published by the collector; readers share
// it through a shared_ptr<const StatsSnapshot>.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stats/cgroup.h"

namespace slotd {

// One GPU process attributed to a kernel.
struct KernelProcessUse {
  unsigned host_pid = 0;          // the pid NVML reports (the host's pid namespace)
  std::optional<int> kernel_pid;  // the same process's pid inside the kernel's container (NSpid)
  uint64_t memory_bytes = 0;      // device memory it uses; 0 where NVML cannot tell
};

// A kernel's use of one device it holds.
struct KernelDeviceUse {
  std::string plugin;               // "cuda"
  std::string device;               // the device id (a GPU UUID)
  uint64_t memory_used_bytes = 0;   // sum of its processes' memory on this device
  std::vector<KernelProcessUse> processes;
};

// The latest measures of one running kernel.
struct KernelStats {
  std::string kernel_id;
  std::string container_id;
  int64_t sampled_at_ms = 0;         // unix milliseconds of the sample
  CgroupSample sample;               // raw counters and gauges (from the cgroup, or the engine with stats-type docker)
  // CPU use over the interval since this kernel's previous sample, in percent
  // of one core (a kernel busy on two cores reads 200); absent on its first sample.
  std::optional<double> cpu_percent;
  // A shared kernel's CPU quota in millicores (its cpu_percent against it is
  // QuotaPercent); 0: it has exclusive cores.
  int cpu_quota_millis = 0;
  std::vector<KernelDeviceUse> devices;  // one per device it holds that a meter measured

  // cpu_percent in percent of the quota (a kernel using all of a 250m
  // quota reads 100); absent without a quota or a cpu_percent.
  std::optional<double> QuotaPercent() const;
};

// A process on one of this agent's devices that is none of its kernels'.
struct ForeignProcess {
  unsigned host_pid = 0;
  uint64_t memory_bytes = 0;
  // The 64-hex-digit id of the container it runs in (another agent's, or
  // anyone's); empty: it runs in no container. Never inspected.
  std::string container_id;
};

// One device this agent owns, as measured by its plugin's meter.
struct DeviceStats {
  std::string plugin;                 // "cuda", "mock"
  std::string device;                 // its id
  bool measured = false;              // false: no meter, or the meter failed or overran its deadline
  std::string error;                  // why not measured; empty when measured or when the plugin has no meter
  uint64_t memory_used_bytes = 0;     // the whole device, every process and the driver
  uint64_t memory_total_bytes = 0;
  unsigned utilization_percent = 0;
  unsigned memory_utilization_percent = 0;
  std::vector<ForeignProcess> foreign;  // processes that are not this agent's kernels'
  uint64_t foreign_memory_bytes = 0;    // sum over `foreign`
};

// One core of this agent's allow-list.
struct CoreStats {
  int core = 0;
  // Busy share of the core over the last interval, 0..100, from /proc/stat;
  // absent on the first sweep.
  std::optional<double> utilization_percent;
};

// This agent's slice of the node.
struct AgentSliceStats {
  std::vector<CoreStats> cores;
  uint64_t memory_capacity_bytes = 0;  // the agent's memory share
  uint64_t memory_used_bytes = 0;      // sum of its kernels' memory_used_bytes
  std::vector<DeviceStats> devices;    // every device it owns, in plugin then allow-list order
};

// One sweep's result.
struct StatsSnapshot {
  std::string agent_id;
  std::string stats_type;          // "cgroup" | "docker"
  int64_t collected_at_ms = 0;     // unix milliseconds when the sweep ended; 0: no sweep yet
  int64_t interval_ms = 0;         // the configured sweep interval
  int64_t sweep_us = 0;            // how long the sweep took
  uint64_t sweeps_total = 0;       // sweeps since start
  uint64_t skipped_samples_total = 0;  // kernel samples skipped since start (vanished, unreadable, deadline)
  std::map<std::string, KernelStats> kernels;  // kernel id -> its latest measures; running kernels only
  AgentSliceStats agent;
  // Why GPU processes cannot be attributed to kernels on this host (e.g. no
  // NSpid in /proc/<pid>/status before Linux 4.1); empty when they can. When
  // set, no process is attributed and none is called foreign.
  std::string attribution_unavailable;
};

// The API forms (docs/api.md): GET /v1/kernels/{id}/stats and GET /v1/stats.
nlohmann::json ToJson(const KernelStats& stats);
nlohmann::json ToJson(const StatsSnapshot& snapshot);

}  // namespace slotd
