#include "testing/fake_clock.h"

#include <thread>

namespace slotd {

namespace {

// Polls `ready` in real time for at most 10 s.
template <typename Ready>
bool PollFor(Ready ready) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

FakeClock::FakeClock() : now_(std::chrono::hours(1000)) {}

Clock::TimePoint FakeClock::Now() const {
  MutexLock lock(mutex_);
  return now_;
}

bool FakeClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, TimePoint deadline,
                          const std::function<bool()>& done) {
  std::multimap<TimePoint, int>::iterator me;
  {
    MutexLock own(mutex_);
    me = waiters_.emplace(deadline, 0);
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
  return PollFor([&]() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return waiters_.count(deadline) > 0;
  });
}

bool FakeClock::WaitForWaiters(size_t count) const {
  return PollFor([&]() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return waiters_.size() >= count;
  });
}

}  // namespace slotd
