// KernelHealth: what is learnt of running kernels from outside the engine's
// reports, and what it comes to: their health checks (Targets for the
// prober, RecordCheck for each result), their cgroups (RecordCgroups: kills
// for lack of memory, cores moved), and the health of the devices they
// hold (ApplyDeviceHealth). A kernel to be stopped for it is queued on
// KernelEnds: the caller (a probe worker, the device-health look) never
// waits on a stop.
//
// Thread-safety: every method may be called from any thread; each takes
// the store's lock itself and calls the engine without it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/converger.h"
#include "agent/device_manager.h"
#include "agent/health_prober.h"
#include "agent/kernel_ends.h"
#include "agent/kernel_store.h"
#include "config/config.h"
#include "model/health_check.h"

namespace slotd {

class KernelHealth {
 public:
  // Every reference must outlive it.
  KernelHealth(const Config& config, KernelStore& store, KernelEnds& ends, Converger& converger,
               DeviceManager& devices);

  // A RUNNING kernel with a health check, as the prober probes it.
  struct Target {
    std::string kernel_id;
    std::string container_id;
    uint64_t run = 0;  // Kernel::runs: another value is another start, and another start period
    HealthRule rule;
    ProbeAddress address;  // where an HTTP or TCP check connects ([container] network decides)
  };
  // Every RUNNING kernel with a health check and a container that no call owns.
  std::vector<Target> Targets() const EXCLUDES(store_.mutex);
  // Records one probe of `kernel_id`'s container `container_id` (unless the
  // kernel moved on meanwhile): its health, the events kernel_ready,
  // kernel_unhealthy and kernel_healthy, and, when it has just become
  // unhealthy, what its on_unhealthy says: its container stopped and its
  // end "unhealthy" (restart: as its restart policy says; stop: TERMINATED).
  void RecordCheck(const std::string& kernel_id, const std::string& container_id, const ProbeResult& result,
                   bool in_start_period) EXCLUDES(store_.mutex);

  // What a RUNNING kernel's cgroup says (CgroupSample): how many of its
  // processes were killed for lack of memory, and the cores it may run on.
  struct CgroupReading {
    std::string kernel_id;
    std::string container_id;
    uint64_t oom_kills = 0;
    std::string cpuset_cpus;  // as cpuset.cpus lists them ("0-3,8"); empty: not read
  };
  // For each RUNNING kernel read: raises its oom_kills to its cgroup's count
  // where that is higher (its condition says so, kernel_condition, and its
  // end with code 137 after it is "out of memory"); and when its cpuset
  // differs from the one last read, keeps it (Kernel::cgroup_cpuset) and
  // checks its drift (Converger::CheckDrift). A sweep that finds nothing
  // changed only compares. The engine's oom and update events say the same
  // on Docker; this is what tells them on an engine that sends none (Podman).
  void RecordCgroups(const std::vector<CgroupReading>& readings) EXCLUDES(store_.mutex);

  // Brings the kernels in line with their devices' health when it changed
  // (cheap when it did not; DeviceManager::HealthChange reports the devices):
  // the condition of each kernel on an unhealthy device (kernel_condition),
  // and the stop of such kernels where the plugin says so (TERMINATED
  // "device unhealthy").
  void ApplyDeviceHealth() EXCLUDES(store_.mutex);

 private:
  const Config& config_;
  KernelStore& store_;
  KernelEnds& ends_;
  Converger& converger_;
  DeviceManager& devices_;
};

}  // namespace slotd
