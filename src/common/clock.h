// Clock: the time that the agent's periodic work waits on (relist periods,
// reconnect backoff, the engine probe, the stats interval, how fresh an
// engine answer is), so that tests can move it instead of sleeping.
// Deadlines around calls that may hang stay on the real clock. Beside it,
// the wall time (UnixSeconds) that records carry: when a kernel was created
// and ended, its lifetime's deadline, an image's last use, events' times.
#pragma once

#include <chrono>
#include <cstdint>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace slotd {

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;

  // The time now; never goes back.
  virtual TimePoint Now() const = 0;

  // Waits on `cv` (its mutex held through `lock`) until `done` holds or this
  // clock reaches `deadline`, and returns done(). A notify of `cv` wakes it
  // to test `done` again, as with std::condition_variable::wait_until.
  virtual bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, TimePoint deadline,
                         const std::function<bool()>& done) = 0;

  // The wall time now, in milliseconds since the Unix epoch. Unlike Now(),
  // it may go back when the machine's time is set.
  virtual int64_t UnixMillis() const = 0;
  // UnixMillis() in whole seconds.
  int64_t UnixSeconds() const { return UnixMillis() / 1000; }

  // WaitUntil(Now() + period).
  bool WaitFor(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Duration period,
               const std::function<bool()>& done) {
    return WaitUntil(lock, cv, Now() + period, done);
  }

  // The steady and the wall clock of the machine; one object shared by every caller.
  static Clock& Real();
};

}  // namespace slotd
