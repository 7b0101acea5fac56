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
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "resources/allocation.h"
#include "stats/device_meter.h"

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

  // The device slot type this plugin serves ("<kind>.device"); empty for none.
  virtual std::string DeviceSlot() const { return ""; }
  // The ids of the devices this agent owns through this plugin (its allow-list).
  virtual std::vector<std::string> OwnedDevices() const { return {}; }
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
