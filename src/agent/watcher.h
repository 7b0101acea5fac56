// Watcher: the background loops that keep the agent's picture true. The
// engine's event stream has a thread of its own (it blocks on the stream);
// the periodic loops share three threads (PeriodicLoop), grouped by how
// long their bodies may take, so that none waits behind a slower kind:
//
//  thread "probes": quick bodies that must keep their time
//  - the prober pings the engine every kProbeEvery, with that as its
//    deadline, and tells the agent whether it answered (its health);
//  - the health keeper's scheduler (HealthKeeper) looks for the kernels'
//    health checks that are due, every HealthKeeper::kLookEvery and when a
//    probe ends, and queues them for its workers (threads of its own).
//  Worst case: the scheduler waits for a ping that the engine does not
//  answer, kProbeEvery; the scheduler's round costs microseconds.
//
//  thread "kernel-timers": the kernels' ends, restarts and devices
//  - the lifetime keeper, every kLifetimeCheckEvery, warns the kernels
//    whose lifetime, idle window or drain's deadline ends within their
//    warn_before (KernelLifetimes::Warn) and queues the stops of those
//    whose end has come (KernelLifetimes::StopExpired);
//  - the restarter runs KernelLifetimes::RestartDue when the next BACKOFF
//    kernel is due, after every event and relist (which may have put one
//    in BACKOFF), and at least every kRestartLookEvery;
//  - the device-health look runs KernelHealth::ApplyDeviceHealth as soon as a
//    device health board changes (the agent tells it), and every
//    kDeviceHealthLookEvery (to retry what failed: a stop, state.json).
//  Worst case: each waits for the others' engine calls: a warning's rename
//  and signal, a restart's rename, start and check of its uids, one kernel
//  after another. Their stops are queued (KernelEnds), never made here.
//  None promises more than "at the next round"; what the devices' health
//  means for new kernels never waits for this thread (the allocator reads
//  the health board).
//
//  thread "relist-gc": the slow whole-node work
//  - the relister runs Converger::Relist every `relist_interval` and
//    whenever asked (RequestRelist);
//  - the image collector runs NodeImages::Collect every kImageGcEvery.
//  Worst case: a relist of a big node takes seconds, an image collection
//  as long as its removals; neither promises more than its period.
//
// Periods and backoff are waited on `clock`; the probe's deadline is real time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <thread>

#include "agent/agent.h"
#include "agent/health_keeper.h"
#include "common/mutex.h"
#include "common/periodic_loop.h"

namespace slotd {

class Watcher {
 public:
  // `agent`, `engine` and `clock` must outlive the watcher.
  Watcher(Agent& agent, ContainerEngine& engine, std::chrono::milliseconds relist_interval,
          Clock& clock = Clock::Real());
  ~Watcher();  // Stop()s

  // Starts the event reader, the loops and the health keeper's workers.
  void Start();
  // Stops and joins them all; idempotent.
  void Stop();
  // Asks the relister to run as soon as its thread is free.
  void RequestRelist();

 private:
  void ReadEvents();
  // The bodies of the loops' jobs (see the file comment).
  Clock::Duration Relist();
  void Probe();
  void KeepLifetimes();
  void CollectImages();
  Clock::Duration Restart();
  // Asks the restarter to look again (a kernel may have entered BACKOFF).
  void LookForRestarts();

  static constexpr std::chrono::seconds kProbeEvery{2};
  static constexpr std::chrono::seconds kLifetimeCheckEvery{1};
  static constexpr std::chrono::seconds kImageGcEvery{60};
  static constexpr std::chrono::seconds kDeviceHealthLookEvery{1};
  static constexpr std::chrono::seconds kRestartLookEvery{1};
  // The first wait before reconnecting the event stream; it doubles after
  // each failed attempt up to kMaxBackoff, and starts again on success.
  static constexpr std::chrono::milliseconds kFirstBackoff{100};
  static constexpr std::chrono::milliseconds kMaxBackoff{5000};

  Agent& agent_;
  const Agent::Owners owners_;  // the owners the loops ask
  ContainerEngine& engine_;
  const std::chrono::milliseconds relist_interval_;
  Clock& clock_;

  // The loops (see the file comment), and their jobs that can be asked to run now.
  PeriodicLoop probe_loop_;
  PeriodicLoop kernel_loop_;
  PeriodicLoop relist_loop_;
  const PeriodicLoop::JobId relist_job_;
  const PeriodicLoop::JobId device_health_job_;
  const PeriodicLoop::JobId restart_job_;
  HealthKeeper health_keeper_;
  bool engine_answered_ = true;  // the prober's last answer; the probes thread only

  // The event reader's thread, and its stop: a flag the stream's read
  // checks, and a wake for its reconnect backoff.
  std::atomic<bool> stop_{false};
  Mutex mutex_;
  std::condition_variable cv_;  // with mutex_: stop
  std::thread events_thread_;
};

}  // namespace slotd
