// DeviceHealthBoard: what is known of the health of one plugin's devices. A
// plugin's health monitor writes it from a thread of its own; the allocator,
// the API and the agent core read it without waiting on that monitor, so a
// hung driver call never blocks an allocation.
//
// A device is unhealthy while it has a mark (an event that stays until the
// operator clears it: an Xid) or a condition (what the last poll found: ECC
// errors, lost, missing); unknown while the monitor is stalled (a driver
// call overran its deadline); healthy otherwise. Only healthy devices are
// allocatable.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace slotd {

enum class DeviceHealth { kHealthy, kUnhealthy, kUnknown };
// "healthy", "unhealthy", "unknown".
const char* DeviceHealthName(DeviceHealth health);

// What the board says of one device.
struct DeviceHealthState {
  DeviceHealth health = DeviceHealth::kHealthy;
  std::string reason;  // why it is not healthy ("xid 79", "ecc uncorrected 3", "gpu lost"); empty when healthy
  int64_t since = 0;   // unix seconds of the last change between healthy and not
  bool operator==(const DeviceHealthState&) const = default;
};

// A mark: an event that keeps a device unhealthy until cleared.
struct DeviceMark {
  std::string reason;
  int64_t since = 0;
  bool operator==(const DeviceMark&) const = default;
};

class DeviceHealthBoard {
 public:
  // Every device starts healthy, since `now`.
  DeviceHealthBoard(const std::vector<std::string>& devices, int64_t now);

  // Adds `device` to the board (no-op when there), with `condition` (empty: healthy).
  void Add(const std::string& device, const std::string& condition, int64_t now);
  // Sets what the last poll found wrong with `device`; empty: nothing.
  void SetCondition(const std::string& device, const std::string& reason, int64_t now);
  // Marks `device` unhealthy for `reason` until Clear; a second mark keeps the first.
  void Mark(const std::string& device, const std::string& reason, int64_t since);
  // Removes `device`'s mark; false when it had none.
  bool Clear(const std::string& device, int64_t now);
  // While stalled, every device without a mark or condition is unknown, for `reason`.
  void SetStalled(const std::string& reason, int64_t now);
  void ClearStalled(int64_t now);

  // The state of every device of the board, by id.
  std::map<std::string, DeviceHealthState> Snapshot() const;
  DeviceHealthState Get(const std::string& device) const;
  bool Allocatable(const std::string& device) const { return Get(device).health == DeviceHealth::kHealthy; }
  // The marks now, by device (what the agent records to keep them across restarts).
  std::map<std::string, DeviceMark> Marks() const;
  // Grows by one at every change of any device's state.
  uint64_t Version() const { return version_.load(); }
  // Has `listener` called after each change of a device's state (a bump of
  // Version), on the thread that made it, with no lock of the board held;
  // it must be quick (wake a waiter, say). Replaces the one set before;
  // empty: none. Once this returns, the one replaced is not running and is
  // never called again.
  void SetListener(std::function<void()> listener) EXCLUDES(listener_mutex_);

 private:
  struct Entry {
    std::string condition;
    std::optional<DeviceMark> mark;
    DeviceHealthState shown;  // what Get answers, kept in step by Update
  };
  // Recomputes `entry.shown`; bumps the version when it changed.
  void Update(Entry& entry, int64_t now) REQUIRES(mutex_);
  // Runs `change` under mutex_ (it is declared REQUIRES(mutex_)), then
  // calls the listener when it changed a device's state (bumped the version).
  void Changing(const std::function<void()>& change) EXCLUDES(mutex_, listener_mutex_);

  mutable Mutex mutex_;
  std::map<std::string, Entry> entries_ GUARDED_BY(mutex_);
  std::string stalled_ GUARDED_BY(mutex_);  // why the monitor is stalled; empty: it is not
  std::atomic<uint64_t> version_{0};
  Mutex listener_mutex_;  // never held with mutex_
  std::function<void()> listener_ GUARDED_BY(listener_mutex_);
};

}  // namespace slotd
