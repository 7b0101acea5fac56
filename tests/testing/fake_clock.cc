#include "testing/fake_clock.h"

#include <iterator>

#include "testing/eventually.h"

namespace slotd {

FakeClock::FakeClock(int64_t unix_start)
    : start_(std::chrono::hours(1000)), unix_start_(unix_start), now_(start_) {}

Clock::TimePoint FakeClock::Now() const {
  MutexLock lock(mutex_);
  return now_;
}

int64_t FakeClock::UnixMillis() const {
  MutexLock lock(mutex_);
  return unix_start_ * 1000 + std::chrono::duration_cast<std::chrono::milliseconds>(now_ - start_).count();
}

bool FakeClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, TimePoint deadline,
                          const std::function<bool()>& done) {
  std::multiset<TimePoint>::iterator me;
  {
    MutexLock own(mutex_);
    me = waiters_.insert(deadline);
  }
  while (!done() && Now() < deadline) cv.wait_for(lock, kPoll);
  MutexLock own(mutex_);
  waiters_.erase(me);
  return done();
}

void FakeClock::Advance(Duration by) {
  MutexLock lock(mutex_);
  now_ += by;
}

bool FakeClock::WaitForWaiterUntil(TimePoint deadline) const {
  return Eventually([&]() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return waiters_.count(deadline) > 0;
  });
}

bool FakeClock::WaitForWaitersAfterNow(size_t threads) const {
  return Eventually([&]() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return static_cast<size_t>(std::distance(waiters_.upper_bound(now_), waiters_.end())) == threads;
  });
}

}  // namespace slotd
