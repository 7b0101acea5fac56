#include "resources/device_plugin.h"

#include <algorithm>

namespace slotd {

DevicePlugin::DevicePlugin(std::string name, std::vector<Device> present, const std::vector<std::string>& allowed)
    : name_(std::move(name)) {
  for (const auto& device : present) present_.insert(device.id);
  for (const auto& id : allowed) {
    auto it = std::find_if(present.begin(), present.end(), [&](const Device& d) { return d.id == id; });
    if (it != present.end()) owned_.push_back(*it);
  }
}

std::vector<std::string> DevicePlugin::OwnedDevices() const {
  std::vector<std::string> ids;
  for (const auto& device : owned_) ids.push_back(device.id);
  return ids;
}

int DevicePlugin::Wanted(const ResourceRequest& request) const {
  auto it = request.devices.find(DeviceSlot());
  return it == request.devices.end() ? 0 : it->second;
}

std::map<int, int> DevicePlugin::FreeByNumaNode() const {
  std::map<int, int> free;
  for (const auto& device : owned_)
    if (!holder_.count(device.id)) ++free[device.numa_node];
  return free;
}

Status DevicePlugin::Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) {
  const int wanted = Wanted(request);
  if (wanted == 0) return Status::Ok();
  std::vector<std::string> picked;
  for (bool preferred_pass : {true, false}) {
    for (const auto& device : owned_) {
      if (static_cast<int>(picked.size()) == wanted) break;
      if (holder_.count(device.id) || std::find(picked.begin(), picked.end(), device.id) != picked.end()) continue;
      if (preferred_pass && (!out.numa_node || device.numa_node != *out.numa_node)) continue;
      picked.push_back(device.id);
    }
  }
  if (static_cast<int>(picked.size()) < wanted) {
    return Status::ResourceExhausted("insufficient " + DeviceSlot() + ": requested " + std::to_string(wanted) +
                                     ", free " + std::to_string(owned_.size() - holder_.size()) + " of " +
                                     std::to_string(owned_.size()));
  }
  for (const auto& id : picked) holder_[id] = kernel_id;
  out.devices[name_] = picked;
  return Status::Ok();
}

std::vector<std::string> DevicePlugin::HeldIds(const Allocation& alloc) const {
  auto it = alloc.devices.find(name_);
  return it == alloc.devices.end() ? std::vector<std::string>{} : it->second;
}

Status DevicePlugin::Claim(const std::string& kernel_id, const Allocation& alloc) {
  const std::vector<std::string> ids = HeldIds(alloc);
  for (const auto& id : ids) {
    bool owned = std::any_of(owned_.begin(), owned_.end(), [&](const Device& d) { return d.id == id; });
    if (!owned && !present_.count(id))
      return Status::FailedPrecondition(name_ + " device " + id + " is no longer present on this node");
    if (!owned)
      return Status::FailedPrecondition(name_ + " device " + id + " is not in this agent's resource." + name_ +
                                        ".allowed-devices");
    auto holder = holder_.find(id);
    if (holder != holder_.end() && holder->second != kernel_id)
      return Status::ResourceExhausted(name_ + " device " + id + " is already held by kernel " + holder->second);
  }
  for (const auto& id : ids) holder_[id] = kernel_id;
  return Status::Ok();
}

void DevicePlugin::Free(const std::string& kernel_id) {
  std::erase_if(holder_, [&](const auto& entry) { return entry.second == kernel_id; });
}

nlohmann::json DevicePlugin::Describe() const {
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& device : owned_) {
    nlohmann::json d = device.properties;
    d["id"] = device.id;
    d["numa_node"] = device.numa_node;
    auto holder = holder_.find(device.id);
    d["held_by"] = holder == holder_.end() ? nlohmann::json(nullptr) : nlohmann::json(holder->second);
    devices.push_back(d);
  }
  size_t used = holder_.size();
  return {{DeviceSlot(),
           {{"capacity", owned_.size()}, {"used", used}, {"free", owned_.size() - used}, {"devices", devices}}}};
}

}  // namespace slotd
