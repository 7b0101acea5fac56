// PeriodicLoop: periodic jobs that share one thread. Each job has its own
// period (its body says, each time it runs, how long until its next run) and
// can be asked to run at once (RunNow). Bodies run one at a time, in the
// order the jobs were added when several are due together, so a body delays
// every other job of its loop by as long as it runs: a loop's owner puts
// together only jobs that can bear each other's longest body, and says so.
//
// Times are waited on `clock` (tests move a FakeClock); a job's next run
// counts from the end of its body.
//
// Thread-safety: Add before Start, from one thread; RunNow from any thread,
// a body of the loop included; Stop from any thread but the loop's own.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"

namespace slotd {

class PeriodicLoop {
 public:
  // A job's body: runs once and returns how long until it runs again
  // (sooner when RunNow asks).
  using Body = std::function<Clock::Duration()>;
  // Names a job of this loop, for RunNow.
  using JobId = size_t;

  // `thread_name`: what the loop's thread is called (15 bytes at most are
  // kept). `clock` must outlive the loop.
  explicit PeriodicLoop(std::string thread_name, Clock& clock = Clock::Real());
  ~PeriodicLoop();  // Stop()s
  PeriodicLoop(const PeriodicLoop&) = delete;
  PeriodicLoop& operator=(const PeriodicLoop&) = delete;

  // Adds a job whose first run comes `first_in` from now (once started).
  JobId Add(Body body, Clock::Duration first_in = Clock::Duration::zero());
  // Adds a job that runs `body` every `period`, the first time `first_in` from now.
  JobId AddEvery(Clock::Duration period, std::function<void()> body,
                 Clock::Duration first_in = Clock::Duration::zero());

  // Starts the loop's thread.
  void Start();
  // Asks job `id` to run as soon as the thread is free: at once when it
  // waits, else after the body running now (or as soon as it starts). Asks
  // made before the job runs again come to one run.
  void RunNow(JobId id) EXCLUDES(mutex_);
  // Lets the body running now end, runs no other, and joins the thread.
  // Idempotent; no job runs again after it.
  void Stop() EXCLUDES(mutex_);

 private:
  struct Job {
    Body body;
    Clock::TimePoint due;  // the next run; made `now` by RunNow
  };
  void Run() EXCLUDES(mutex_);

  const std::string thread_name_;
  Clock& clock_;
  Mutex mutex_;
  std::condition_variable cv_;  // with mutex_: a job asked to run now, or stop
  std::vector<Job> jobs_ GUARDED_BY(mutex_);
  bool asked_ GUARDED_BY(mutex_) = false;  // a RunNow since the thread last looked
  bool stop_ GUARDED_BY(mutex_) = false;
  std::thread thread_;  // Start and Stop only
};

}  // namespace slotd
