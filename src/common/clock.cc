#include "common/clock.h"

namespace slotd {

namespace {

class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  int64_t UnixMillis() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, TimePoint deadline,
                 const std::function<bool()>& done) override {
    return cv.wait_until(lock, deadline, done);
  }
};

}  // namespace

Clock& Clock::Real() {
  static SteadyClock clock;
  return clock;
}

}  // namespace slotd
