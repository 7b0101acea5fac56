// ResourcePlugin: one kind of resource a kernel can hold (cpu cores, memory,
// host ports, accelerator devices). Plugins are registered explicitly by
// MakePlugins() and owned by the agent core.
//
// Thread-safety: none. The agent core calls every method under its own mutex,
// so a plugin's allocation map has exactly one guard. The DeviceMeter that
// Meter() returns is the exception: it is thread-safe, shares no state the
// plugin changes, and may be used from any thread, without that mutex.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "model/allocation.h"
#include "resources/device_health.h"
#include "resources/device_meter.h"

namespace slotd {

class ResourcePlugin {
 public:
  virtual ~ResourcePlugin() = default;

  // The plugin's name ("cpu", "mem", "ports", or a device kind's name).
  virtual std::string Name() const = 0;

  // Takes what `request` asks of this plugin for `kernel_id` and writes it
  // into `out`, preferring `out.numa_node` when set. Takes nothing on
  // failure: kResourceExhausted with a message like
  // "insufficient cpu: requested 4, free 2 of 8".
  virtual Status Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) = 0;

  // Takes exactly this plugin's part of `alloc` for `kernel_id` (restore from
  // a label). Takes nothing on failure: kResourceExhausted naming the item
  // and the kernel that already holds it; kFailedPrecondition naming the item
  // that this agent's config does not give it (outside its allow-list, more
  // than its capacity, a device no longer present).
  virtual Status Claim(const std::string& kernel_id, const Allocation& alloc) = 0;

  // Frees everything `kernel_id` holds here; a no-op when it holds nothing.
  virtual void Free(const std::string& kernel_id) = 0;

  // Adds this plugin's container settings for `alloc` to `spec`.
  virtual void Apply(const Allocation& alloc, ContainerSpec& spec) const = 0;

  // For /v1/agent: {"<slot>": {"capacity", "used", "free", ...}}, with a
  // "devices" list under the slot where the plugin has devices. Merged into
  // one object by the core.
  virtual nlohmann::json Describe() const = 0;

  // The device slot types this plugin serves ("<kind>.device", and one per
  // kind of part, e.g. "cuda.mig-1c18g"); empty for none.
  virtual std::vector<std::string> DeviceSlots() const { return {}; }
  // The ids of the devices this agent owns through this plugin (its allow-list).
  virtual std::vector<std::string> OwnedDevices() const { return {}; }
  // What this agent claims on the node through this plugin, as node claims
  // name devices (node/claims.h DevicesOverlap): an owned device's id, or
  // "<whole>/<part>" for a part of a device (a MIG instance of a GPU), or a
  // whole device of which it owns every part.
  virtual std::vector<std::string> ClaimedDevices() const { return OwnedDevices(); }
  // The health of the owned devices; nullptr for a plugin without devices.
  virtual std::shared_ptr<DeviceHealthBoard> Health() const { return nullptr; }
  // Starts watching the owned devices' health (a thread of the plugin's own,
  // stopped when it is destroyed); a no-op for a plugin without a monitor.
  virtual void StartHealthMonitor() {}
  // The owned devices that `name` names as the plugin's allow-list would (an
  // id, an index, the UUID of a GPU whose MIG instances it owns); kNotFound
  // when it names none of them.
  virtual Result<std::vector<std::string>> ResolveDevice(const std::string& name) const {
    return Status::NotFound(Name() + " has no devices");
  }
  // Whether a kernel that holds an unhealthy device of this plugin is to be
  // stopped ([resource.<kind>] on-unhealthy = "stop"); else it is reported.
  virtual bool StopsKernelsOnUnhealthy() const { return false; }
  // Drains (keeps from new kernels) or undrains the owned device `id`.
  virtual Status SetDrained(const std::string& id, bool drained) {
    return Status::NotFound(Name() + " has no device " + id);
  }
  // The owned devices drained now.
  virtual std::set<std::string> Drained() const { return {}; }
  // What measures this plugin's owned devices for the stats loop (the same
  // object on every call); nullptr for a plugin with nothing to measure.
  virtual std::shared_ptr<DeviceMeter> Meter() const { return nullptr; }

  // For topology-aware placement: how many units `request` needs from this
  // plugin, and how many are free on each NUMA node. Plugins without
  // topology (memory, ports) return 0 and an empty map.
  virtual int Wanted(const ResourceRequest& request) const { return 0; }
  virtual std::map<int, int> FreeByNumaNode() const { return {}; }
};

// Builds the plugins this config turns on, in allocation order: the device
// plugins whose sections it has (in DeviceKinds() order), cpu, mem, ports.
// Fails when a device plugin cannot start (say, an allow-list entry that
// matches no device); the message names the section and says what to do.
Result<std::vector<std::unique_ptr<ResourcePlugin>>> MakePlugins(const Config& config, const HostFacts& host);

}  // namespace slotd
