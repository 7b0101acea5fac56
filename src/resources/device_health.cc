#include "resources/device_health.h"

namespace slotd {

const char* DeviceHealthName(DeviceHealth health) {
  switch (health) {
    case DeviceHealth::kHealthy: return "healthy";
    case DeviceHealth::kUnhealthy: return "unhealthy";
    case DeviceHealth::kUnknown: return "unknown";
  }
  return "unknown";
}

DeviceHealthBoard::DeviceHealthBoard(const std::vector<std::string>& devices, int64_t now) {
  MutexLock lock(mutex_);
  for (const std::string& device : devices) entries_[device].shown.since = now;
}

void DeviceHealthBoard::Update(Entry& entry, int64_t now) {
  DeviceHealthState next;
  if (entry.mark) {
    next = {DeviceHealth::kUnhealthy, entry.mark->reason, 0};
    if (!entry.condition.empty() && entry.condition != entry.mark->reason) next.reason += "; " + entry.condition;
  } else if (!entry.condition.empty()) {
    next = {DeviceHealth::kUnhealthy, entry.condition, 0};
  } else if (!stalled_.empty()) {
    next = {DeviceHealth::kUnknown, stalled_, 0};
  }
  next.since = next.health == entry.shown.health ? entry.shown.since : now;
  if (entry.mark && entry.shown.health != DeviceHealth::kUnhealthy) next.since = entry.mark->since;
  if (next == entry.shown) return;
  entry.shown = next;
  ++version_;
}

void DeviceHealthBoard::Add(const std::string& device, const std::string& condition, int64_t now) {
  Changing([&]() REQUIRES(mutex_) {
    auto [it, added] = entries_.try_emplace(device);
    if (!added) return;
    it->second.shown.since = now;
    it->second.condition = condition;
    Update(it->second, now);
    ++version_;
  });
}

void DeviceHealthBoard::SetCondition(const std::string& device, const std::string& reason, int64_t now) {
  Changing([&]() REQUIRES(mutex_) {
    auto it = entries_.find(device);
    if (it == entries_.end() || it->second.condition == reason) return;
    it->second.condition = reason;
    Update(it->second, now);
  });
}

void DeviceHealthBoard::Mark(const std::string& device, const std::string& reason, int64_t since) {
  Changing([&]() REQUIRES(mutex_) {
    auto it = entries_.find(device);
    if (it == entries_.end() || it->second.mark) return;
    it->second.mark = DeviceMark{reason, since};
    Update(it->second, since);
  });
}

bool DeviceHealthBoard::Clear(const std::string& device, int64_t now) {
  bool cleared = false;
  Changing([&]() REQUIRES(mutex_) {
    auto it = entries_.find(device);
    if (it == entries_.end() || !it->second.mark) return;
    it->second.mark.reset();
    Update(it->second, now);
    cleared = true;
  });
  return cleared;
}

void DeviceHealthBoard::SetStalled(const std::string& reason, int64_t now) {
  Changing([&]() REQUIRES(mutex_) {
    if (stalled_ == reason) return;
    stalled_ = reason;
    for (auto& [id, entry] : entries_) Update(entry, now);
  });
}

void DeviceHealthBoard::SetListener(std::function<void()> listener) {
  MutexLock lock(listener_mutex_);
  listener_ = std::move(listener);
}

void DeviceHealthBoard::Changing(const std::function<void()>& change) {
  bool changed;
  {
    MutexLock lock(mutex_);
    const uint64_t before = version_;
    change();
    changed = version_ != before;
  }
  if (!changed) return;
  MutexLock lock(listener_mutex_);
  if (listener_) listener_();
}

void DeviceHealthBoard::ClearStalled(int64_t now) { SetStalled("", now); }

std::map<std::string, DeviceHealthState> DeviceHealthBoard::Snapshot() const {
  MutexLock lock(mutex_);
  std::map<std::string, DeviceHealthState> states;
  for (const auto& [id, entry] : entries_) states[id] = entry.shown;
  return states;
}

DeviceHealthState DeviceHealthBoard::Get(const std::string& device) const {
  MutexLock lock(mutex_);
  auto it = entries_.find(device);
  return it == entries_.end() ? DeviceHealthState{} : it->second.shown;
}

std::map<std::string, DeviceMark> DeviceHealthBoard::Marks() const {
  MutexLock lock(mutex_);
  std::map<std::string, DeviceMark> marks;
  for (const auto& [id, entry] : entries_)
    if (entry.mark) marks[id] = *entry.mark;
  return marks;
}

}  // namespace slotd
