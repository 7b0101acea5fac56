// EngineHealth: whether the agent's engine answers, as the agent's round
// trips to it (a probe, a relist, the restore) found, and how old the last
// good relist is. The health endpoints and the routes that would wait on
// the engine read it.
//
// Thread-safety: lock-free; every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/clock.h"

namespace slotd {

class EngineHealth {
 public:
  // `clock` must outlive it: the ages are measured on it.
  explicit EngineHealth(const Clock& clock) : clock_(clock) {}

  // How long a successful answer keeps the engine reachable without another.
  static constexpr std::chrono::seconds kAnswerFresh{6};

  // Records a round trip to the engine: whether it answered in time.
  void RecordAnswer(bool answered);
  // Records a good relist (or restore), which the engine answered.
  void RecordSync();
  // Seconds since the last good relist (or restore); negative if never.
  double LastSyncAgeSeconds() const;
  // Whether the engine answered the latest round trip and that answer is
  // recent (kAnswerFresh): a hung engine is not reachable, even while its
  // sockets stay open.
  bool Reachable() const;
  // Whether the engine is known not to answer: not reachable, and nothing
  // answered for `down_after`. One probe that a busy node slowed past its
  // deadline is not enough.
  bool KnownDown(std::chrono::seconds down_after) const;

 private:
  // Time since the clock's epoch of `ns` (a reading of clock_), as a duration.
  Clock::Duration Since(int64_t ns) const;

  const Clock& clock_;
  std::atomic<int64_t> last_sync_ns_{-1};    // clock_ time of the last good relist or restore
  std::atomic<int64_t> last_answer_ns_{-1};  // clock_ time of the last answered round trip
  std::atomic<bool> answered_{false};        // whether the latest round trip was answered
};

}  // namespace slotd
