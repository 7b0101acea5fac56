#include "agent/engine_health.h"

namespace slotd {

Clock::Duration EngineHealth::Since(int64_t ns) const {
  return clock_.Now().time_since_epoch() - Clock::Duration(ns);
}

void EngineHealth::RecordAnswer(bool answered) {
  if (answered) last_answer_ns_ = clock_.Now().time_since_epoch().count();
  answered_ = answered;
}

void EngineHealth::RecordSync() {
  RecordAnswer(true);
  last_sync_ns_ = clock_.Now().time_since_epoch().count();
}

double EngineHealth::LastSyncAgeSeconds() const {
  const int64_t last = last_sync_ns_;
  if (last < 0) return -1.0;
  return std::chrono::duration<double>(Since(last)).count();
}

bool EngineHealth::Reachable() const {
  const int64_t last = last_answer_ns_;
  return answered_ && last >= 0 && Since(last) < kAnswerFresh;
}

bool EngineHealth::KnownDown(std::chrono::seconds down_after) const {
  const int64_t last = last_answer_ns_;
  return !Reachable() && last >= 0 && Since(last) >= down_after;
}

}  // namespace slotd
