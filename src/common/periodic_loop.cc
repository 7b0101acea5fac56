#include "common/periodic_loop.h"

#include <algorithm>

#include "common/thread_name.h"

namespace slotd {

PeriodicLoop::PeriodicLoop(std::string thread_name, Clock& clock)
    : thread_name_(std::move(thread_name)), clock_(clock) {}

PeriodicLoop::~PeriodicLoop() { Stop(); }

PeriodicLoop::JobId PeriodicLoop::Add(Body body, Clock::Duration first_in) {
  MutexLock lock(mutex_);
  jobs_.push_back({std::move(body), clock_.Now() + first_in});
  return jobs_.size() - 1;
}

PeriodicLoop::JobId PeriodicLoop::AddEvery(Clock::Duration period, std::function<void()> body,
                                           Clock::Duration first_in) {
  return Add(
      [period, body = std::move(body)] {
        body();
        return period;
      },
      first_in);
}

void PeriodicLoop::Start() { thread_ = std::thread([this] { Run(); }); }

void PeriodicLoop::RunNow(JobId id) {
  {
    MutexLock lock(mutex_);
    jobs_.at(id).due = std::min(jobs_[id].due, clock_.Now());
    asked_ = true;
  }
  cv_.notify_all();
}

void PeriodicLoop::Stop() {
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeriodicLoop::Run() {
  NameThisThread(thread_name_);
  MutexLock lock(mutex_);
  while (!stop_) {
    // One round: each job due now runs once, in the order they were added.
    const Clock::TimePoint now = clock_.Now();
    asked_ = false;
    for (size_t i = 0; i < jobs_.size() && !stop_; ++i) {
      if (jobs_[i].due > now) continue;
      jobs_[i].due = Clock::TimePoint::max();  // a RunNow while it runs brings it back
      Body& body = jobs_[i].body;              // jobs_ does not change after Start
      lock.Unlock();
      const Clock::Duration wait = body();
      const Clock::TimePoint next = clock_.Now() + wait;
      lock.Lock();
      jobs_[i].due = std::min(jobs_[i].due, next);
    }
    if (stop_) break;
    Clock::TimePoint wake = Clock::TimePoint::max();
    for (const Job& job : jobs_) wake = std::min(wake, job.due);
    clock_.WaitUntil(lock.native(), cv_, wake, [&]() REQUIRES(mutex_) { return stop_ || asked_; });
  }
}

}  // namespace slotd
