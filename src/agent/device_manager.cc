#include "agent/device_manager.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

namespace slotd {

using nlohmann::json;

namespace {

std::map<std::string, std::vector<std::string>> OwnedOf(const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::map<std::string, std::vector<std::string>> owned;
  for (const auto& plugin : plugins)
    if (!plugin->OwnedDevices().empty()) owned[plugin->Name()] = plugin->OwnedDevices();
  return owned;
}

std::vector<std::pair<std::string, std::shared_ptr<DeviceHealthBoard>>> BoardsOf(
    const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::vector<std::pair<std::string, std::shared_ptr<DeviceHealthBoard>>> boards;
  for (const auto& plugin : plugins)
    if (std::shared_ptr<DeviceHealthBoard> board = plugin->Health()) boards.emplace_back(plugin->Name(), board);
  return boards;
}

std::vector<std::shared_ptr<DeviceMeter>> MetersOf(const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::vector<std::shared_ptr<DeviceMeter>> meters;
  for (const auto& plugin : plugins)
    if (std::shared_ptr<DeviceMeter> meter = plugin->Meter()) meters.push_back(std::move(meter));
  return meters;
}

std::map<std::string, std::vector<std::string>> UnmeteredOf(
    const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::map<std::string, std::vector<std::string>> devices;
  for (const auto& plugin : plugins)
    if (!plugin->Meter() && !plugin->OwnedDevices().empty()) devices[plugin->Name()] = plugin->OwnedDevices();
  return devices;
}

std::set<std::string> StoppingOf(const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::set<std::string> stopping;
  for (const auto& plugin : plugins)
    if (plugin->StopsKernelsOnUnhealthy()) stopping.insert(plugin->Name());
  return stopping;
}

// What `was` and `now` (device ids) differ in: the gone ones and the new ones.
std::pair<std::vector<std::string>, std::vector<std::string>> LayoutChange(const std::vector<std::string>& was,
                                                                         const std::vector<std::string>& now) {
  std::vector<std::string> gone, added;
  for (const std::string& id : was)
    if (std::find(now.begin(), now.end(), id) == now.end()) gone.push_back(id);
  for (const std::string& id : now)
    if (std::find(was.begin(), was.end(), id) == was.end()) added.push_back(id);
  return {gone, added};
}

}  // namespace

DeviceManager::DeviceManager(std::string agent_id, std::string record_path,
                             std::vector<std::unique_ptr<ResourcePlugin>>& plugins, Mutex& plugins_mutex,
                             EventHub& hub, const Clock& clock)
    : agent_id_(std::move(agent_id)),
      record_path_(std::move(record_path)),
      plugins_(plugins),
      plugins_mutex_(plugins_mutex),
      hub_(hub),
      clock_(clock),
      owned_(OwnedOf(plugins)),
      boards_(BoardsOf(plugins)),
      meters_(MetersOf(plugins)),
      unmetered_(UnmeteredOf(plugins)),
      stopping_plugins_(StoppingOf(plugins)) {}

void DeviceManager::Emit(EventType type, const std::string& plugin, json extra) {
  extra["agent_id"] = agent_id_;
  extra["plugin"] = plugin;
  extra["time"] = clock_.UnixSeconds();
  hub_.Publish(type, std::move(extra));
}

AgentRecord DeviceManager::CurrentRecord() const {
  AgentRecord record;
  record.draining = drain_.draining;
  record.draining_since = drain_.since;
  record.drain_deadline = drain_.deadline;
  record.owned = owned_;
  {
    MutexLock lock(plugins_mutex_);
    for (const auto& plugin : plugins_)
      if (std::set<std::string> drained = plugin->Drained(); !drained.empty()) record.drained[plugin->Name()] = drained;
  }
  for (const auto& [plugin, board] : boards_)
    if (auto marks = board->Marks(); !marks.empty()) record.marks[plugin] = std::move(marks);
  return record;
}

Status DeviceManager::WriteRecord(const AgentRecord& record) {
  if ((record == record_ && record_on_disk_) || record_path_.empty()) return Status::Ok();
  if (Status s = record.Save(record_path_); !s.ok()) return s;
  record_ = record;
  record_on_disk_ = true;
  return Status::Ok();
}

void DeviceManager::KeepRecord() {
  const Status s = WriteRecord(CurrentRecord());
  if (!s.ok() && !record_behind_)
    spdlog::error("devices: {}; drains and health marks will not survive a restart until it can be written (the agent "
                  "tries again)", s.message());
  if (s.ok() && record_behind_) spdlog::info("devices: {} is up to date again", record_path_);
  record_behind_ = !s.ok();
}

AgentRecord DeviceManager::LoadRecord(bool& on_disk) {
  on_disk = false;
  if (record_path_.empty()) return AgentRecord();
  Result<AgentRecord> loaded = AgentRecord::Load(record_path_);
  if (!loaded.ok() && loaded.status().code() == Status::Code::kInvalidArgument) {
    // Kept for the operator, never overwritten: it may hold drains and marks worth restoring by hand.
    const std::string aside = record_path_ + ".bad-" + std::to_string(clock_.UnixSeconds());
    const bool kept = std::rename(record_path_.c_str(), aside.c_str()) == 0;
    spdlog::error("devices: {}; {}; starting without its drains and health marks (drain the agent or its devices "
                  "again if they should be)",
                  loaded.status().message(),
                  kept ? "kept it aside as " + aside
                       : "cannot keep it aside as " + aside + " (" + std::strerror(errno) + "), so it is left as it is");
  } else if (!loaded.ok()) {
    spdlog::error("devices: {}; starting without its drains and health marks", loaded.status().message());
  }
  std::error_code missing;
  on_disk = loaded.ok() && std::filesystem::exists(record_path_, missing);
  return loaded.ok() ? *loaded : AgentRecord();
}

void DeviceManager::Start() {
  bool on_disk = false;
  const AgentRecord before = LoadRecord(on_disk);
  MutexLock lock(mutex_);
  record_ = before;
  record_on_disk_ = on_disk;  // a missing or unreadable record is written anew below
  drain_ = Drain{before.draining, before.draining_since, before.draining ? before.drain_deadline : std::nullopt};
  if (drain_.draining)
    spdlog::warn("agent {} is draining (recorded in {}): it takes no new kernels until undrained", agent_id_,
                 record_path_);
  {
    MutexLock plugins(plugins_mutex_);
    for (const auto& plugin : plugins_) {
      if (auto drained = before.drained.find(plugin->Name()); drained != before.drained.end())
        for (const std::string& id : drained->second)
          if (!plugin->SetDrained(id, true).ok())
            spdlog::warn("devices: {} device {} was drained, but this agent owns it no more", plugin->Name(), id);
      if (auto marks = before.marks.find(plugin->Name()); marks != before.marks.end() && plugin->Health())
        for (const auto& [id, mark] : marks->second) plugin->Health()->Mark(id, mark.reason, mark.since);
    }
    for (const auto& plugin : plugins_) plugin->StartHealthMonitor();
  }
  // The layout: what was owned at the last start against what is owned now.
  for (const auto& [plugin, was] : before.owned) {
    auto now = owned_.find(plugin);
    if (now == owned_.end()) continue;  // the plugin is gone: its section was removed from the config
    const auto [gone, added] = LayoutChange(was, now->second);
    if (gone.empty() && added.empty()) continue;
    spdlog::warn("devices: the {} devices changed since the agent last ran: {} gone, {} new", plugin, gone.size(),
                 added.size());
    Emit(EventType::kDeviceLayout, plugin, {{"gone", gone}, {"new", added}});
  }
  KeepRecord();
}

DeviceManager::Drain DeviceManager::Draining() const {
  MutexLock lock(mutex_);
  return drain_;
}

Result<DeviceManager::Drain> DeviceManager::SetDraining(bool drain, std::optional<int64_t> deadline) {
  MutexLock lock(mutex_);
  if (drain_.draining == drain && (!drain || !deadline || deadline == drain_.deadline)) return drain_;
  Drain next = drain ? Drain{true, drain_.draining ? drain_.since : clock_.UnixSeconds(), deadline} : Drain{};
  if (drain && !deadline) next.deadline = drain_.deadline;
  AgentRecord record = CurrentRecord();
  record.draining = next.draining;
  record.draining_since = next.since;
  record.drain_deadline = next.deadline;
  if (Status s = WriteRecord(record); !s.ok())
    return s.WithPrefix(drain ? "the agent is not draining" : "the agent is still draining");
  drain_ = next;
  spdlog::info("agent {} {}", agent_id_, drain ? "is draining: it takes no new kernels" : "takes new kernels again");
  json event = {{"agent_id", agent_id_}, {"time", clock_.UnixSeconds()}};
  if (drain) event["deadline"] = next.deadline ? json(*next.deadline) : json(nullptr);
  hub_.Publish(drain ? EventType::kAgentDrained : EventType::kAgentUndrained, std::move(event));
  return drain_;
}

Result<DeviceManager::DeviceChange> DeviceManager::ResolveDevice(const std::string& name) const {
  std::string tried;
  MutexLock lock(plugins_mutex_);
  for (const auto& plugin : plugins_) {
    if (plugin->OwnedDevices().empty()) continue;
    Result<std::vector<std::string>> ids = plugin->ResolveDevice(name);
    if (ids.ok()) return DeviceChange{plugin->Name(), *ids};
    tried += (tried.empty() ? "" : "; ") + ids.status().message();
  }
  return Status::NotFound("device " + name + " is not one of this agent's" +
                          (tried.empty() ? std::string(" (it has no devices)") : ": " + tried) +
                          "; name it as resource.<kind>.allowed-devices does (GET /v1/agent lists them)");
}

Result<DeviceManager::DeviceChange> DeviceManager::DrainDevice(const std::string& name, bool drain) {
  MutexLock lock(mutex_);
  Result<DeviceChange> change = ResolveDevice(name);
  if (!change.ok()) return change.status();
  // Recorded first: a drain that cannot be written is not made.
  AgentRecord record = CurrentRecord();
  std::set<std::string>& drained = record.drained[change->plugin];
  for (const std::string& id : change->devices) {
    if (drain) drained.insert(id);
    else drained.erase(id);
  }
  if (drained.empty()) record.drained.erase(change->plugin);
  if (Status s = WriteRecord(record); !s.ok())
    return s.WithPrefix(std::string("devices ") + name + (drain ? " are not drained" : " are still drained"));
  {
    MutexLock plugins(plugins_mutex_);
    for (const auto& plugin : plugins_) {
      if (plugin->Name() != change->plugin) continue;
      for (const std::string& id : change->devices)
        if (Status s = plugin->SetDrained(id, drain); !s.ok()) return s;
    }
  }
  spdlog::info("devices: {} {} device(s) {}", drain ? "drained" : "undrained", change->plugin, name);
  Emit(drain ? EventType::kDeviceDrained : EventType::kDeviceUndrained, change->plugin, {{"devices", change->devices}});
  return change;
}

Result<DeviceManager::DeviceChange> DeviceManager::ClearDevice(const std::string& name) {
  MutexLock lock(mutex_);
  Result<DeviceChange> change = ResolveDevice(name);
  if (!change.ok()) return change.status();
  auto board = std::find_if(boards_.begin(), boards_.end(), [&](const auto& b) { return b.first == change->plugin; });
  DeviceChange cleared{change->plugin, {}};
  const std::map<std::string, DeviceMark> marks =
      board == boards_.end() ? std::map<std::string, DeviceMark>() : board->second->Marks();
  for (const std::string& id : change->devices)
    if (marks.count(id)) cleared.devices.push_back(id);
  if (cleared.devices.empty())
    return Status::FailedPrecondition("device " + name + " has no health mark to clear (a mark is left by a "
                                      "critical Xid); what a poll finds (ECC errors, a lost GPU) clears itself "
                                      "when the device recovers");
  // Recorded first: a clear that cannot be written is not made.
  AgentRecord record = CurrentRecord();
  for (const std::string& id : cleared.devices) record.marks[change->plugin].erase(id);
  if (record.marks[change->plugin].empty()) record.marks.erase(change->plugin);
  if (Status s = WriteRecord(record); !s.ok()) return s.WithPrefix("the health marks of devices " + name + " stay");
  for (const std::string& id : cleared.devices) board->second->Clear(id, clock_.UnixSeconds());
  spdlog::info("devices: cleared the health marks of {} device(s) {}", change->plugin, name);
  return cleared;
}

std::vector<DeviceManager::DeviceState> DeviceManager::DeviceStates() const {
  std::map<std::string, std::set<std::string>> drained;
  {
    MutexLock lock(plugins_mutex_);
    for (const auto& plugin : plugins_) drained[plugin->Name()] = plugin->Drained();
  }
  std::vector<DeviceState> states;
  for (const auto& [plugin, board] : boards_) {
    const auto health = board->Snapshot();
    auto owned = owned_.find(plugin);
    if (owned == owned_.end()) continue;
    for (const std::string& id : owned->second) {
      auto state = health.find(id);
      states.push_back({plugin, id, state == health.end() ? DeviceHealthState{} : state->second,
                        drained[plugin].count(id) > 0});
    }
  }
  return states;
}

std::optional<DeviceManager::HealthNow> DeviceManager::HealthChange() {
  uint64_t version = 0;
  for (const auto& [plugin, board] : boards_) version += board->Version();
  MutexLock lock(mutex_);
  if (version == health_version_ && !record_behind_) return std::nullopt;
  health_version_ = version;
  HealthNow now{{}, stopping_plugins_};
  for (const auto& [plugin, board] : boards_) {
    for (const auto& [id, state] : board->Snapshot()) {
      const std::pair<std::string, std::string> key{plugin, id};
      if (state.health != DeviceHealth::kHealthy) now.unhealthy[key] = state;
      auto before = health_reported_.find(key);
      const DeviceHealthState was = before == health_reported_.end() ? DeviceHealthState{} : before->second;
      if (was.health == state.health && was.reason == state.reason) continue;
      const bool healthy = state.health == DeviceHealth::kHealthy;
      if (healthy) {
        spdlog::info("devices: {} device {} is healthy again", plugin, id);
      } else {
        spdlog::warn("devices: {} device {} is {}: {}", plugin, id, DeviceHealthName(state.health), state.reason);
      }
      Emit(healthy ? EventType::kDeviceHealthy : EventType::kDeviceUnhealthy, plugin,
           {{"device", id},
            {"health", DeviceHealthName(state.health)},
            {"reason", healthy ? json(nullptr) : json(state.reason)},
            {"since", state.since}});
    }
  }
  health_reported_ = now.unhealthy;
  KeepRecord();
  return now;
}

void DeviceManager::LookAgain() {
  MutexLock lock(mutex_);
  health_version_ = ~0ull;
}

void DeviceManager::OnHealthChange(const std::function<void()>& listener) {
  for (const auto& [plugin, board] : boards_) board->SetListener(listener);
}

}  // namespace slotd
