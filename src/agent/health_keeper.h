// HealthKeeper: probes the health checks of the agent's RUNNING kernels on
// time. Its scheduler, a job of a PeriodicLoop that its owner gives it, asks
// the agent which kernels have a check (KernelHealth::Targets, every
// kLookEvery), keeps when each is next due, and hands due probes to two
// fixed pools of worker threads (boost::asio::thread_pool), which run them
// (HealthProber) and give each result to the agent (KernelHealth::RecordCheck).
// The scheduler's round takes no engine call and no lock of the agent but
// for a moment, so it may share a loop with other quick jobs. Exec checks
// have a pool of their own: the engine runs only so many execs at a time,
// and checks it holds up never delay the HTTP and TCP checks, which only
// connect. A kernel has at most one probe in flight; a probe that hangs
// holds one worker at most its timeout, which is never longer than its
// interval: a pool of n workers runs n probes at once, and the others wait
// their turn in its queue.
//
// Times are waited on `clock`; a kernel's start period counts from when the
// keeper first sees it RUNNING after a start of its container.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/thread_pool.hpp>

#include "agent/kernel_health.h"
#include "agent/health_prober.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/periodic_loop.h"

namespace slotd {

class HealthKeeper {
 public:
  // `health`, `engine`, `clock` and `loop` must outlive the keeper; its
  // scheduler becomes a job of `loop`, which must not have started yet, and
  // runs from when the loop starts until it stops.
  HealthKeeper(KernelHealth& health, ContainerEngine& engine, Clock& clock, PeriodicLoop& loop);
  ~HealthKeeper();  // Stop()s

  // Starts the workers; call it before the loop starts.
  void Start();
  // Drops the probes queued, waits for those running and joins the workers;
  // call it once the loop has stopped.
  void Stop();

  static constexpr size_t kExecWorkers = 2;     // threads running exec checks
  static constexpr size_t kConnectWorkers = 2;  // threads running HTTP and TCP checks
  // How often the scheduler looks for kernels that started or ended.
  static constexpr std::chrono::milliseconds kLookEvery{200};

 private:
  // One kernel's schedule.
  struct Tracked {
    std::string container_id;
    uint64_t run = 0;  // HealthTarget::run when first seen
    Clock::TimePoint first_seen;
    Clock::TimePoint next_due;
    bool in_flight = false;
  };
  // One probe to run.
  struct Job {
    KernelHealth::Target target;
    bool in_start_period = false;
  };
  // Which pool runs a probe.
  enum Lane : size_t { kExecLane = 0, kConnectLane = 1 };
  static Lane LaneOf(const HealthRule& rule);

  // One round of the scheduler: queues the probes due; returns how long
  // until it should look again.
  Clock::Duration Schedule() EXCLUDES(mutex_);
  // Runs `job` on a worker, then lets the scheduler know when its kernel is due again.
  void Work(const Job& job) EXCLUDES(mutex_);
  // Queues the probes of `targets` that are due at `now`; returns when the
  // next one is due, or `next_look` if sooner. With `fresh` (the agent's
  // targets as of now) also forgets the kernels that are no longer among
  // them; without, `targets` are those of the last fresh call.
  Clock::TimePoint QueueDue(const std::vector<KernelHealth::Target>& targets, bool fresh, Clock::TimePoint now,
                            Clock::TimePoint next_look) REQUIRES(mutex_);

  KernelHealth& health_;
  HealthProber prober_;
  Clock& clock_;
  PeriodicLoop& loop_;
  const PeriodicLoop::JobId schedule_job_;
  // The scheduler's own: the targets of its last look at the agent, and when to look again.
  std::vector<KernelHealth::Target> targets_;
  Clock::TimePoint next_look_;

  Mutex mutex_;
  Clock::TimePoint wake_at_ GUARDED_BY(mutex_);  // when the scheduler looks next
  std::map<std::string, Tracked> tracked_ GUARDED_BY(mutex_);  // by kernel id
  // The entries of tracked_ for the targets of the scheduler's last look, in
  // their order: a wake between looks finds each without a search.
  std::vector<Tracked*> slots_ GUARDED_BY(mutex_);
  // The workers, by lane: made by Start, joined by Stop.
  std::optional<boost::asio::thread_pool> pools_[2];
};

}  // namespace slotd
