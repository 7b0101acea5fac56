// DeviceManager: the agent's devices as an operator sees them, apart from
// the kernels that hold them: the agent's drain, the devices' drains and
// health marks, the health changes reported as events, and the record of
// all of it in <var-base-path>/state.json, so that it survives restarts.
//
// Thread-safety: every public method may be called from any thread. Its own
// mutex guards its state; the plugins it drains and asks are guarded by the
// agent's mutex (`plugins_mutex`), always taken after its own, never before.
// The agent never calls it while holding its own mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/agent_record.h"
#include "agent/event_hub.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "resources/device_health.h"
#include "resources/plugin.h"
#include "resources/device_meter.h"

namespace slotd {

class DeviceManager {
 public:
  // `plugins` (guarded by `plugins_mutex`), `hub` and `clock` must outlive
  // it. `record_path`: state.json; empty keeps nothing.
  DeviceManager(std::string agent_id, std::string record_path, std::vector<std::unique_ptr<ResourcePlugin>>& plugins,
                Mutex& plugins_mutex, EventHub& hub, const Clock& clock);

  // Applies what state.json records (the agent's drain, the devices' drains
  // and health marks; an unreadable record is kept aside, never
  // overwritten), reports a device layout that changed since (a
  // device_layout event), starts the plugins' health monitors and writes the
  // record as it is now.
  void Start() EXCLUDES(mutex_);

  // Whether the agent is draining: closed to new kernels while its kernels
  // and everything else go on.
  struct Drain {
    bool draining = false;
    int64_t since = 0;  // unix seconds; 0 when not draining
    // Unix seconds when the kernels still running are stopped ("drained");
    // unset: they run on.
    std::optional<int64_t> deadline;
  };
  Drain Draining() const EXCLUDES(mutex_);
  // Drains (`drain`) or opens the agent again; emits agent_drained /
  // agent_undrained when that changes it. A drain with `deadline` (unix
  // seconds) sets it, also on an agent that drains already (agent_drained
  // again). Returns the state now. Recorded in state.json first: when that
  // cannot be written (kUnavailable naming the file), nothing changes.
  Result<Drain> SetDraining(bool drain, std::optional<int64_t> deadline = std::nullopt) EXCLUDES(mutex_);

  // The plugin and the device ids a drain or a clear acted on.
  struct DeviceChange {
    std::string plugin;
    std::vector<std::string> devices;
  };
  // Drains (`drain`) or undrains the owned devices that `name` names as an
  // allow-list would (an id, a GPU index or UUID, a MIG UUID): a drained
  // device stays with its kernel but is never given to a new one. Recorded
  // first (kUnavailable, and no change, when it cannot be written); emits
  // device_drained / device_undrained. kNotFound when `name` names none.
  Result<DeviceChange> DrainDevice(const std::string& name, bool drain) EXCLUDES(mutex_);
  // Clears the health marks (a critical Xid) of the devices `name` names; a
  // condition the next poll still finds stays. kFailedPrecondition when none
  // had a mark; kUnavailable, and the marks kept, when state.json cannot be
  // written.
  Result<DeviceChange> ClearDevice(const std::string& name) EXCLUDES(mutex_);

  // One owned device's health and drain, for /metrics.
  struct DeviceState {
    std::string plugin;
    std::string device;
    DeviceHealthState health;
    bool drained = false;
  };
  std::vector<DeviceState> DeviceStates() const EXCLUDES(mutex_);

  // The devices' health as the kernels need it, when it changed since the
  // last call (nullopt when it did not, cheaply): the unhealthy or missing
  // devices by (plugin, device), and the plugins whose kernels are stopped
  // on an unhealthy device. Reports each device's change as an event
  // (device_unhealthy / device_healthy) and keeps the record in line.
  struct HealthNow {
    std::map<std::pair<std::string, std::string>, DeviceHealthState> unhealthy;
    std::set<std::string> stopping_plugins;
  };
  std::optional<HealthNow> HealthChange() EXCLUDES(mutex_);
  // Makes the next HealthChange answer even if nothing changed (a kernel
  // whose stop failed is looked at again).
  void LookAgain() EXCLUDES(mutex_);
  // Has `listener` called, quickly, at each change of a device's health
  // (DeviceHealthBoard::SetListener, on every board); empty: none.
  void OnHealthChange(const std::function<void()>& listener);

  // The plugins' device meters, in plugin order; the same objects on every call.
  const std::vector<std::shared_ptr<DeviceMeter>>& Meters() const { return meters_; }
  // The owned devices of plugins that have devices but no meter, by plugin name.
  const std::map<std::string, std::vector<std::string>>& Unmetered() const { return unmetered_; }

 private:
  // The first of the plugins whose devices `name` names, with their ids.
  Result<DeviceChange> ResolveDevice(const std::string& name) const REQUIRES(mutex_);
  // What state.json should hold now.
  AgentRecord CurrentRecord() const REQUIRES(mutex_);
  // Writes `record` unless it is what was written last; on success it
  // becomes record_. A failure (kUnavailable naming the file) leaves the
  // file and record_ as they were.
  Status WriteRecord(const AgentRecord& record) REQUIRES(mutex_);
  // Brings state.json in line, for changes the agent cannot refuse (health
  // marks, the layout): a failure is logged once and tried again later.
  void KeepRecord() REQUIRES(mutex_);
  // Loads state.json, keeping aside one that cannot be read.
  AgentRecord LoadRecord(bool& on_disk);
  // Publishes a device event.
  void Emit(EventType type, const std::string& plugin, nlohmann::json extra);

  const std::string agent_id_;
  const std::string record_path_;
  std::vector<std::unique_ptr<ResourcePlugin>>& plugins_;  // guarded by plugins_mutex_
  Mutex& plugins_mutex_;
  EventHub& hub_;
  const Clock& clock_;
  // Set at construction: the owned devices by plugin, the health boards
  // (thread-safe objects), the meters, the devices no meter measures, and
  // the plugins whose kernels stop on an unhealthy device.
  const std::map<std::string, std::vector<std::string>> owned_;
  const std::vector<std::pair<std::string, std::shared_ptr<DeviceHealthBoard>>> boards_;
  const std::vector<std::shared_ptr<DeviceMeter>> meters_;
  const std::map<std::string, std::vector<std::string>> unmetered_;
  const std::set<std::string> stopping_plugins_;

  mutable Mutex mutex_ ACQUIRED_BEFORE(plugins_mutex_);  // taken before the store's, never inside it
  AgentRecord record_ GUARDED_BY(mutex_);            // as last written
  bool record_on_disk_ GUARDED_BY(mutex_) = false;   // whether record_ is what state.json holds now
  bool record_behind_ GUARDED_BY(mutex_) = false;    // the last KeepRecord could not write state.json
  Drain drain_ GUARDED_BY(mutex_);
  uint64_t health_version_ GUARDED_BY(mutex_) = ~0ull;  // the boards' versions, summed, when last looked at
  // (plugin, device) -> the health last reported in events; absent: healthy.
  std::map<std::pair<std::string, std::string>, DeviceHealthState> health_reported_ GUARDED_BY(mutex_);
};

}  // namespace slotd
