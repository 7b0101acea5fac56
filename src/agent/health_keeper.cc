#include "agent/health_keeper.h"

#include <algorithm>
#include <set>

namespace slotd {

HealthKeeper::HealthKeeper(Agent& agent, ContainerEngine& engine, Clock& clock)
    : agent_(agent), prober_(engine), clock_(clock) {}

HealthKeeper::~HealthKeeper() { Stop(); }

void HealthKeeper::Start() {
  scheduler_ = std::thread([this] { ScheduleLoop(); });
  for (size_t i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { WorkLoop(); });
}

void HealthKeeper::Stop() {
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  for (std::thread& worker : workers_)
    if (worker.joinable()) worker.join();
  workers_.clear();
}

Clock::TimePoint HealthKeeper::QueueDue(const std::vector<Agent::HealthTarget>& targets, Clock::TimePoint now) {
  std::set<std::string> present;
  Clock::TimePoint next = now + kLookEvery;
  for (const Agent::HealthTarget& target : targets) {
    present.insert(target.kernel_id);
    Tracked& tracked = tracked_[target.kernel_id];
    if (tracked.container_id != target.container_id) tracked = {target.container_id, now, now, false};
    if (!tracked.in_flight && tracked.next_due <= now) {
      tracked.in_flight = true;
      tracked.next_due = now + target.rule.interval;
      queue_.push_back({target, now - tracked.first_seen < target.rule.start_period});
      cv_.notify_all();
    }
    if (!tracked.in_flight) next = std::min(next, tracked.next_due);
  }
  // A kernel that is not RUNNING (ended, backing off, gone) starts afresh when it runs again.
  std::erase_if(tracked_, [&](const auto& entry) { return !present.count(entry.first) && !entry.second.in_flight; });
  return next;
}

void HealthKeeper::ScheduleLoop() {
  while (true) {
    const std::vector<Agent::HealthTarget> targets = agent_.HealthTargets();
    MutexLock lock(mutex_);
    if (stop_) return;
    const Clock::TimePoint next = QueueDue(targets, clock_.Now());
    probe_done_ = false;
    clock_.WaitUntil(lock.native(), cv_, next, [&]() REQUIRES(mutex_) { return stop_ || probe_done_; });
    if (stop_) return;
  }
}

void HealthKeeper::WorkLoop() {
  while (true) {
    Job job;
    {
      MutexLock lock(mutex_);
      mutex_.Wait(cv_, [&]() REQUIRES(mutex_) { return stop_ || !queue_.empty(); });
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    const Agent::HealthTarget& t = job.target;
    const ProbeResult result = prober_.Probe(t.rule, t.container_id, t.address);
    agent_.RecordHealth(t.kernel_id, t.container_id, result, job.in_start_period);
    MutexLock lock(mutex_);
    if (auto it = tracked_.find(t.kernel_id); it != tracked_.end() && it->second.container_id == t.container_id)
      it->second.in_flight = false;
    probe_done_ = true;
    cv_.notify_all();  // the scheduler may have a due time for it now
  }
}

}  // namespace slotd
