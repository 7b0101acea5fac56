// HealthKeeper: probes the health checks of the agent's RUNNING kernels on
// time. One scheduler thread asks the agent which kernels have a check
// (Agent::HealthTargets, every kLookEvery), keeps when each is next due, and hands due probes
// to fixed pools of worker threads, which run them (HealthProber) and give
// each result to the agent (Agent::RecordHealth). Exec checks have a pool
// of their own: the engine runs only so many execs at a time, and checks it
// holds up never delay the HTTP and TCP checks, which only connect. A
// kernel has at most one probe in flight; a probe that hangs holds one
// worker at most its timeout, which is never longer than its interval.
//
// Times are waited on `clock`; a kernel's start period counts from when the
// keeper first sees it RUNNING after a start of its container.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/health_prober.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace slotd {

class HealthKeeper {
 public:
  // `agent`, `engine` and `clock` must outlive the keeper.
  HealthKeeper(Agent& agent, ContainerEngine& engine, Clock& clock);
  ~HealthKeeper();  // stops and joins its threads

  void Start();
  void Stop();

  static constexpr size_t kExecWorkers = 4;     // threads running exec checks
  static constexpr size_t kConnectWorkers = 8;  // threads running HTTP and TCP checks
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
    Agent::HealthTarget target;
    bool in_start_period = false;
  };
  // Which pool runs a probe.
  enum Lane : size_t { kExecLane = 0, kConnectLane = 1 };
  static Lane LaneOf(const HealthRule& rule);

  void ScheduleLoop();
  void WorkLoop(Lane lane);
  // Queues the probes of `targets` that are due at `now`; returns when the
  // next one is due, or `next_look` if sooner. With `fresh` (the agent's
  // targets as of now) also forgets the kernels that are no longer among
  // them; without, `targets` are those of the last fresh call.
  Clock::TimePoint QueueDue(const std::vector<Agent::HealthTarget>& targets, bool fresh, Clock::TimePoint now,
                            Clock::TimePoint next_look) REQUIRES(mutex_);

  Agent& agent_;
  HealthProber prober_;
  Clock& clock_;

  Mutex mutex_;
  std::condition_variable schedule_cv_;  // with mutex_: a probe due sooner than wake_at_, or stop
  std::condition_variable work_cv_[2];   // with mutex_, by lane: a job queued, or stop
  bool stop_ GUARDED_BY(mutex_) = false;
  bool sooner_ GUARDED_BY(mutex_) = false;  // a probe ended that is due again before wake_at_
  Clock::TimePoint wake_at_ GUARDED_BY(mutex_);  // when the scheduler looks next
  std::map<std::string, Tracked> tracked_ GUARDED_BY(mutex_);  // by kernel id
  // The entries of tracked_ for the targets of the scheduler's last look, in
  // their order: a wake between looks finds each without a search.
  std::vector<Tracked*> slots_ GUARDED_BY(mutex_);
  std::deque<Job> queue_[2] GUARDED_BY(mutex_);  // by lane
  std::thread scheduler_;
  std::vector<std::thread> workers_;
};

}  // namespace slotd
