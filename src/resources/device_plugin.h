// DevicePlugin: whole-device allocation from an exclusive allow-list, shared
// by every accelerator plugin. A subclass supplies the devices it
// discovered and how a container is given its devices (Apply); it may run a
// health monitor that writes the plugin's DeviceHealthBoard.
//
// A device is allocated only while it is healthy (the board) and not
// drained. A kernel keeps what it holds whatever happens to it.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "resources/device_health.h"
#include "resources/plugin.h"

namespace slotd {

// One device a plugin knows of.
struct Device {
  std::string id;             // what allocations and labels name (mock id, GPU or MIG UUID)
  int numa_node = 0;
  nlohmann::json properties;  // shown in /v1/agent (memory, name, index, ...)
  // Its slot type; empty: the plugin's "<name>.device".
  std::string slot;
};

// What a DevicePlugin owns of the devices it did not find.
struct AbsentDevices {
  // Allow-list ids that are not present are owned as missing devices: never
  // allocated, reported unhealthy "missing" (a GPU that fell off the bus).
  bool keep_listed = false;
  // There is no allow-list (it takes every device): a kernel's recorded
  // device that is no longer present is owned as missing when claimed.
  bool claim_unlisted = false;
};

class DevicePlugin : public ResourcePlugin {
 public:
  // `name` is the plugin name used in allocations ("mock"); its base slot type
  // is "<name>.device". `present` lists every device found on the node;
  // `allowed` (ids of `present`, or missing ones per `absent`) are the ones
  // this agent owns. `clock` dates the devices' health conditions.
  DevicePlugin(std::string name, std::vector<Device> present, const std::vector<std::string>& allowed,
               AbsentDevices absent = {}, Clock& clock = Clock::Real());

  std::string Name() const override { return name_; }
  std::vector<std::string> DeviceSlots() const override;
  std::vector<std::string> OwnedDevices() const override;
  // Every owned device, in allow-list order, each with its slot type (for
  // `slotd split`, which divides them among agents).
  const std::vector<Device>& OwnedDeviceList() const { return owned_; }
  // Takes free, healthy, undrained owned devices of each slot asked for, those
  // on out.numa_node first, in allow-list order.
  Status Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) override;
  // Fails naming the device when it is not owned (outside allowed-devices)
  // or is held by another kernel. A device that is unhealthy or missing
  // (gone from the node) is claimed all the same: hardware failing never
  // stops a restore.
  Status Claim(const std::string& kernel_id, const Allocation& alloc) override;
  void Free(const std::string& kernel_id) override;
  // {"<slot>": {capacity, used, free, unhealthy, drained, devices: [{id,
  // numa_node, held_by, health, healthy, reason, since, drained,
  // ...properties}]}} for the base slot and every slot of an owned device.
  nlohmann::json Describe() const override;
  int Wanted(const ResourceRequest& request) const override;
  std::map<int, int> FreeByNumaNode() const override;
  std::shared_ptr<DeviceHealthBoard> Health() const override { return health_; }
  Result<std::vector<std::string>> ResolveDevice(const std::string& name) const override;
  Status SetDrained(const std::string& id, bool drained) override;
  std::set<std::string> Drained() const override { return drained_; }

 protected:
  // The ids of `alloc`'s devices of this plugin, in allocation order.
  std::vector<std::string> HeldIds(const Allocation& alloc) const;
  // The owned device `id`; nullptr when not owned.
  const Device* Owned(const std::string& id) const;
  // The slot type of an owned device (filled in at construction).
  static const std::string& SlotOf(const Device& device) { return device.slot; }

 private:
  // Whether `device` may be given to a new kernel now.
  bool Available(const Device& device) const;

  const std::string name_;
  // Owns `device` (its slot filled in); keeps slots_ in step.
  void Own(Device device);

  std::vector<Device> owned_;              // in allow-list order, each with its slot
  std::vector<std::string> slots_;         // the base slot, then each owned device's, once each
  std::set<std::string> present_;          // every device found on the node
  const AbsentDevices absent_;
  Clock& clock_;
  std::map<std::string, std::string> holder_;  // device id -> kernel id
  std::set<std::string> drained_;          // owned devices not given to new kernels
  std::shared_ptr<DeviceHealthBoard> health_;  // of owned_; missing ones have the condition "missing"
};

}  // namespace slotd
