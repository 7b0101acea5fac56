// DeviceMeter: how the stats collector measures the devices of one resource
// plugin (the CUDA plugin's meter reads NVML). A plugin without measures
// (mock) has no meter.
//
// Thread-safety: Measure may be called from a thread of the collector while
// the agent core uses the plugin; a meter holds no state the plugin changes.
// Calls may be slow or hang (a wedged driver): the collector runs them under a
// deadline on a thread of its own, one call at a time per meter.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace slotd {

// One process holding a context on a device.
struct DeviceProcess {
  unsigned host_pid = 0;      // in the host's pid namespace (as NVML reports it)
  uint64_t memory_bytes = 0;  // device memory it uses; 0 where the driver cannot tell
};

// What one device is doing now.
struct DeviceReading {
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
  unsigned utilization_percent = 0;
  unsigned memory_utilization_percent = 0;
  std::vector<DeviceProcess> processes;
};

class DeviceMeter {
 public:
  virtual ~DeviceMeter() = default;
  // The plugin name ("cuda").
  virtual std::string Plugin() const = 0;
  // The ids of the devices this agent owns through the plugin, in allow-list order.
  virtual std::vector<std::string> Devices() const = 0;
  // Reads device `id` (one of Devices()). Errors: kNotFound for an unknown
  // id; kUnavailable with the driver's message otherwise.
  virtual Result<DeviceReading> Measure(const std::string& id) = 0;
};

}  // namespace slotd
