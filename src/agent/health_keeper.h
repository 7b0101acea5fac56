// HealthKeeper: probes the health checks of the agent's RUNNING kernels on
// time. One scheduler thread asks the agent which kernels have a check
// (Agent::HealthTargets), keeps when each is next due, and hands due probes
// to a fixed pool of kWorkers threads, which run them (HealthProber) and
// give each result to the agent (Agent::RecordHealth). A kernel has at most
// one probe in flight; a probe that hangs holds one worker at most its
// timeout, which is never longer than its interval.
//
// Times are waited on `clock`; a kernel's start period counts from when the
// keeper first sees it RUNNING in its container.
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

  static constexpr size_t kWorkers = 8;
  // How often the scheduler looks for kernels that started or ended.
  static constexpr std::chrono::milliseconds kLookEvery{200};

 private:
  // One kernel's schedule.
  struct Tracked {
    std::string container_id;
    Clock::TimePoint first_seen;
    Clock::TimePoint next_due;
    bool in_flight = false;
  };
  // One probe to run.
  struct Job {
    Agent::HealthTarget target;
    bool in_start_period = false;
  };

  void ScheduleLoop();
  void WorkLoop();
  // Queues the probes of `targets` that are due at `now`; returns when the next one is due.
  Clock::TimePoint QueueDue(const std::vector<Agent::HealthTarget>& targets, Clock::TimePoint now) REQUIRES(mutex_);

  Agent& agent_;
  const HealthProber prober_;
  Clock& clock_;

  Mutex mutex_;
  std::condition_variable cv_;  // with mutex_: a job queued, a probe done, or stop
  bool stop_ GUARDED_BY(mutex_) = false;
  bool probe_done_ GUARDED_BY(mutex_) = false;  // a probe ended since the scheduler last looked
  std::map<std::string, Tracked> tracked_ GUARDED_BY(mutex_);  // by kernel id
  std::deque<Job> queue_ GUARDED_BY(mutex_);
  std::thread scheduler_;
  std::vector<std::thread> workers_;
};

}  // namespace slotd
