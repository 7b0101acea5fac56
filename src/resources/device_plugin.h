// DevicePlugin: whole-device allocation from an exclusive allow-list, shared
// by every accelerator plugin. A subclass supplies the devices it
// discovered and how a container is given its devices (Apply).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "resources/plugin.h"

namespace slotd {

// One device a plugin knows of.
struct Device {
  std::string id;             // what allocations and labels name (mock id, GPU UUID)
  int numa_node = 0;
  nlohmann::json properties;  // shown in /v1/agent (memory, name, index, ...)
};

class DevicePlugin : public ResourcePlugin {
 public:
  // `name` is the plugin name used in allocations ("mock"); its slot type is
  // "<name>.device". `present` lists every device found on the node;
  // `allowed` (ids of `present`) are the ones this agent owns.
  DevicePlugin(std::string name, std::vector<Device> present, const std::vector<std::string>& allowed);

  std::string Name() const override { return name_; }
  std::string DeviceSlot() const override { return name_ + ".device"; }
  std::vector<std::string> OwnedDevices() const override;
  // Takes free owned devices, those on out.numa_node first, in allow-list order.
  Status Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) override;
  // Fails naming the device when it is not owned (outside allowed-devices, or
  // no longer present on the node) or is held by another kernel.
  Status Claim(const std::string& kernel_id, const Allocation& alloc) override;
  void Free(const std::string& kernel_id) override;
  // {"<name>.device": {capacity, used, free, devices: [{id, numa_node, held_by, ...properties}]}}
  nlohmann::json Describe() const override;
  int Wanted(const ResourceRequest& request) const override;
  std::map<int, int> FreeByNumaNode() const override;

 protected:
  // The ids of `alloc`'s devices of this plugin, in allocation order.
  std::vector<std::string> HeldIds(const Allocation& alloc) const;

 private:
  const std::string name_;
  std::vector<Device> owned_;              // in allow-list order
  std::set<std::string> present_;          // every device found on the node
  std::map<std::string, std::string> holder_;  // device id -> kernel id
};

}  // namespace slotd
