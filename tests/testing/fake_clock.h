// FakeClock: a Clock that moves only when a test says so (Advance), so that
// periods, backoff and ages are tested without sleeping. Waiters are woken
// by Advance, by a notify of their condition variable, or by a short real
// poll (kPoll) — which only makes them test again, never time out early.
#pragma once

#include <chrono>
#include <set>
#include <mutex>

#include "common/clock.h"
#include "common/mutex.h"

namespace slotd {

class FakeClock final : public Clock {
 public:
  // Starts at an arbitrary fixed time point, and at the wall time `unix_start`.
  explicit FakeClock(int64_t unix_start = kUnixStart);

  TimePoint Now() const override;
  // unix_start (seconds) plus every Advance, in milliseconds.
  int64_t UnixMillis() const override;
  // Returns when `done` holds or Now() >= deadline, whichever comes first.
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, TimePoint deadline,
                 const std::function<bool()>& done) override;

  // Moves the time forward by `by`.
  void Advance(Duration by);

  // Waits (in real time, at most 10 s) until some thread waits with its
  // deadline exactly at `deadline`; false if none did. Lets a test know that
  // a loop has reached its wait before it moves the time.
  bool WaitForWaiterUntil(TimePoint deadline) const;
  // Waits (in real time, at most 10 s) until `threads` threads wait with
  // deadlines after Now(): each is done with what was due by now. Lets a
  // test of several loops move the time only once all are waiting; false if
  // they never were.
  bool WaitForWaitersAfterNow(size_t threads) const;

 private:
  static constexpr std::chrono::milliseconds kPoll{1};
  static constexpr int64_t kUnixStart = 1'800'000'000;  // 2027-01-15

  const TimePoint start_;
  const int64_t unix_start_;
  mutable Mutex mutex_;
  TimePoint now_ GUARDED_BY(mutex_);
  std::multiset<TimePoint> waiters_ GUARDED_BY(mutex_);  // deadlines of the threads in WaitUntil
};

}  // namespace slotd
