#include "resources/device_plugin.h"

#include <algorithm>

namespace slotd {
namespace {

// The condition of an owned device that the node does not have.
constexpr char kMissing[] = "missing: not on this node any more";

}  // namespace

DevicePlugin::DevicePlugin(std::string name, std::vector<Device> present, const std::vector<std::string>& allowed,
                           AbsentDevices absent, Clock& clock)
    : name_(std::move(name)), slots_{name_ + ".device"}, absent_(absent), clock_(clock) {
  for (const auto& device : present) present_.insert(device.id);
  std::vector<std::string> missing;
  for (const auto& id : allowed) {
    auto it = std::find_if(present.begin(), present.end(), [&](const Device& d) { return d.id == id; });
    if (it != present.end()) {
      Own(*it);
    } else if (absent_.keep_listed) {
      Own({id, 0, nlohmann::json::object(), ""});
      missing.push_back(id);
    }
  }
  health_ = std::make_shared<DeviceHealthBoard>(OwnedDevices(), clock_.UnixSeconds());
  for (const auto& id : missing) health_->SetCondition(id, kMissing, clock_.UnixSeconds());
}

void DevicePlugin::Own(Device device) {
  if (device.slot.empty()) device.slot = name_ + ".device";
  if (std::find(slots_.begin(), slots_.end(), device.slot) == slots_.end()) slots_.push_back(device.slot);
  owned_.push_back(std::move(device));
}

std::vector<std::string> DevicePlugin::DeviceSlots() const { return slots_; }

std::vector<std::string> DevicePlugin::OwnedDevices() const {
  std::vector<std::string> ids;
  for (const auto& device : owned_) ids.push_back(device.id);
  return ids;
}

const Device* DevicePlugin::Owned(const std::string& id) const {
  auto it = std::find_if(owned_.begin(), owned_.end(), [&](const Device& d) { return d.id == id; });
  return it == owned_.end() ? nullptr : &*it;
}

bool DevicePlugin::Available(const Device& device) const {
  return !holder_.count(device.id) && !drained_.count(device.id) && health_->Allocatable(device.id);
}

int DevicePlugin::Wanted(const ResourceRequest& request) const {
  int wanted = 0;
  for (const auto& slot : slots_) {
    auto it = request.devices.find(slot);
    if (it != request.devices.end()) wanted += it->second;
  }
  return wanted;
}

std::map<int, int> DevicePlugin::FreeByNumaNode() const {
  std::map<int, int> free;
  for (const auto& device : owned_)
    if (Available(device)) ++free[device.numa_node];
  return free;
}

Status DevicePlugin::Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) {
  std::vector<std::string> picked;
  for (const auto& slot : slots_) {
    auto asked = request.devices.find(slot);
    if (asked == request.devices.end() || asked->second == 0) continue;
    const size_t wanted = picked.size() + static_cast<size_t>(asked->second);
    for (bool preferred_pass : {true, false}) {
      if (preferred_pass && !out.numa_node) continue;
      for (const auto& device : owned_) {
        if (picked.size() == wanted) break;
        if (preferred_pass && device.numa_node != *out.numa_node) continue;
        if (SlotOf(device) != slot || !Available(device)) continue;
        if (std::find(picked.begin(), picked.end(), device.id) != picked.end()) continue;
        picked.push_back(device.id);
      }
    }
    if (picked.size() < wanted) {
      int total = 0, free = 0, unhealthy = 0, unknown = 0, drained = 0;
      for (const auto& device : owned_) {
        if (SlotOf(device) != slot) continue;
        ++total;
        if (Available(device)) ++free;
        if (holder_.count(device.id)) continue;
        const DeviceHealth health = health_->Get(device.id).health;
        if (health == DeviceHealth::kUnhealthy) ++unhealthy;
        else if (health == DeviceHealth::kUnknown) ++unknown;
        else if (drained_.count(device.id)) ++drained;
      }
      std::string aside;
      auto add = [&](int n, const char* what) {
        if (n > 0) aside += (aside.empty() ? "" : ", ") + std::to_string(n) + " " + what;
      };
      add(unhealthy, "unhealthy");
      add(unknown, "of unknown health");
      add(drained, "drained");
      return Status::ResourceExhausted("insufficient " + slot + ": requested " + std::to_string(asked->second) +
                                       ", free " + std::to_string(free) + " of " + std::to_string(total) +
                                       (aside.empty() ? "" : " (" + aside + ")"));
    }
  }
  if (picked.empty()) return Status::Ok();
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
  std::vector<std::string> adopt_missing;
  for (const auto& id : ids) {
    if (!Owned(id)) {
      if (present_.count(id))
        return Status::FailedPrecondition(name_ + " device " + id + " is not in this agent's resource." + name_ +
                                          ".allowed-devices");
      if (!absent_.claim_unlisted)
        return Status::FailedPrecondition(name_ + " device " + id + " is no longer present on this node");
      adopt_missing.push_back(id);  // gone from the node, but every device is this agent's
      continue;
    }
    auto holder = holder_.find(id);
    if (holder != holder_.end() && holder->second != kernel_id)
      return Status::ResourceExhausted(name_ + " device " + id + " is already held by kernel " + holder->second);
  }
  for (const auto& id : adopt_missing) {
    Own({id, 0, nlohmann::json::object(), ""});
    health_->Add(id, kMissing, clock_.UnixSeconds());
  }
  for (const auto& id : ids) holder_[id] = kernel_id;
  return Status::Ok();
}

void DevicePlugin::Free(const std::string& kernel_id) {
  std::erase_if(holder_, [&](const auto& entry) { return entry.second == kernel_id; });
}

Result<std::vector<std::string>> DevicePlugin::ResolveDevice(const std::string& name) const {
  if (Owned(name)) return std::vector<std::string>{name};
  return Status::NotFound(name_ + " device " + name + " is not one of this agent's (resource." + name_ +
                          ".allowed-devices: " + [&] {
                            std::string list;
                            for (const auto& device : owned_) list += (list.empty() ? "" : ", ") + device.id;
                            return list.empty() ? std::string("none") : list;
                          }() + ")");
}

Status DevicePlugin::SetDrained(const std::string& id, bool drained) {
  if (!Owned(id)) return Status::NotFound(name_ + " device " + id + " is not one of this agent's");
  if (drained) {
    drained_.insert(id);
  } else {
    drained_.erase(id);
  }
  return Status::Ok();
}

nlohmann::json DevicePlugin::Describe() const {
  const std::map<std::string, DeviceHealthState> health = health_->Snapshot();
  nlohmann::json slots = nlohmann::json::object();
  for (const auto& slot : slots_) {
    nlohmann::json devices = nlohmann::json::array();
    int capacity = 0, used = 0, free = 0, unhealthy = 0, drained = 0;
    for (const auto& device : owned_) {
      if (SlotOf(device) != slot) continue;
      nlohmann::json d = device.properties;
      d["id"] = device.id;
      d["numa_node"] = device.numa_node;
      auto holder = holder_.find(device.id);
      d["held_by"] = holder == holder_.end() ? nlohmann::json(nullptr) : nlohmann::json(holder->second);
      auto state = health.find(device.id);
      const DeviceHealthState h = state == health.end() ? DeviceHealthState{} : state->second;
      d["health"] = DeviceHealthName(h.health);
      d["healthy"] = h.health == DeviceHealth::kHealthy;
      d["reason"] = h.reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(h.reason);
      d["since"] = h.since;
      d["drained"] = drained_.count(device.id) > 0;
      devices.push_back(d);
      ++capacity;
      if (holder != holder_.end()) ++used;
      if (Available(device)) ++free;
      if (h.health != DeviceHealth::kHealthy) ++unhealthy;
      if (drained_.count(device.id)) ++drained;
    }
    slots[slot] = {{"capacity", capacity}, {"used", used},         {"free", free},
                   {"unhealthy", unhealthy}, {"drained", drained}, {"devices", devices}};
  }
  return slots;
}

}  // namespace slotd
