// Watcher: the background loops that keep the agent's picture true, a
// thread each:
//  - the event reader follows the engine's event stream (owner-filtered),
//    reconnecting after any break, and asks for a relist after each (re)connect
//    so nothing that happened during a gap is missed;
//  - the relister runs Agent::Relist periodically and whenever asked;
//  - the prober pings the engine every kProbeEvery, with that as its
//    deadline, and tells the agent whether it answered (its health);
//  - the lifetime keeper, every kLifetimeCheckEvery, warns the kernels
//    whose lifetime, idle window or drain's deadline ends within their
//    warn_before (Agent::WarnKernels) and stops those whose end has come
//    (Agent::StopExpiredKernels);
//  - the image collector runs Agent::CollectImages every kImageGcEvery;
//  - the device-health look runs Agent::ApplyDeviceHealth every
//    kDeviceHealthLookEvery (it does nothing when no device's health changed);
//  - the restarter runs Agent::RestartDueKernels when the next BACKOFF
//    kernel is due, after every event and relist (which may have put one
//    in BACKOFF), and at least every kRestartLookEvery;
//  - the health keeper (HealthKeeper, threads of its own) probes the
//    kernels' health checks.
// Periods and backoff are waited on `clock`; the probe's deadline is real time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "agent/agent.h"
#include "agent/health_keeper.h"
#include "common/mutex.h"

namespace slotd {

class Watcher {
 public:
  // `agent`, `engine` and `clock` must outlive the watcher.
  Watcher(Agent& agent, ContainerEngine& engine, std::chrono::milliseconds relist_interval,
          Clock& clock = Clock::Real());
  ~Watcher();  // stops and joins its threads

  void Start();
  void Stop();
  // Asks the relister to run as soon as it can.
  void RequestRelist();

 private:
  void ReadEvents();
  void RelistLoop();
  void ProbeLoop();
  void LifetimeLoop();
  void ImageGcLoop();
  void DeviceHealthLoop();
  void RestartLoop();
  // Asks the restarter to look again (a kernel may have entered BACKOFF).
  void LookForRestarts();

  static constexpr std::chrono::seconds kProbeEvery{2};
  static constexpr std::chrono::seconds kLifetimeCheckEvery{1};
  static constexpr std::chrono::seconds kImageGcEvery{60};
  static constexpr std::chrono::milliseconds kDeviceHealthLookEvery{50};
  static constexpr std::chrono::seconds kRestartLookEvery{1};
  // The first wait before reconnecting the event stream; it doubles after
  // each failed attempt up to kMaxBackoff, and starts again on success.
  static constexpr std::chrono::milliseconds kFirstBackoff{100};
  static constexpr std::chrono::milliseconds kMaxBackoff{5000};

  Agent& agent_;
  ContainerEngine& engine_;
  const std::chrono::milliseconds relist_interval_;
  Clock& clock_;
  HealthKeeper health_keeper_;

  std::atomic<bool> stop_{false};
  Mutex mutex_;
  std::condition_variable cv_;          // with mutex_: a relist asked for, or stop
  std::condition_variable restart_cv_;  // with mutex_: a look for due restarts asked for, or stop
  bool relist_requested_ GUARDED_BY(mutex_) = false;
  bool restart_look_requested_ GUARDED_BY(mutex_) = false;
  std::thread events_thread_;
  std::thread relist_thread_;
  std::thread probe_thread_;
  std::thread lifetime_thread_;
  std::thread image_gc_thread_;
  std::thread device_health_thread_;
  std::thread restart_thread_;
};

}  // namespace slotd
