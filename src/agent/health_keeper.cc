#include "agent/health_keeper.h"

#include <algorithm>
#include <set>

namespace slotd {

HealthKeeper::HealthKeeper(Agent& agent, ContainerEngine& engine, Clock& clock)
    : agent_(agent), prober_(engine), clock_(clock) {}

HealthKeeper::~HealthKeeper() { Stop(); }

void HealthKeeper::Start() {
  scheduler_ = std::thread([this] { ScheduleLoop(); });
  for (size_t i = 0; i < kExecWorkers; ++i) workers_.emplace_back([this] { WorkLoop(kExecLane); });
  for (size_t i = 0; i < kConnectWorkers; ++i) workers_.emplace_back([this] { WorkLoop(kConnectLane); });
}

void HealthKeeper::Stop() {
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  schedule_cv_.notify_all();
  for (auto& cv : work_cv_) cv.notify_all();
  if (scheduler_.joinable()) scheduler_.join();
  for (std::thread& worker : workers_)
    if (worker.joinable()) worker.join();
  workers_.clear();
}

HealthKeeper::Lane HealthKeeper::LaneOf(const HealthRule& rule) {
  return rule.check.kind == ProbeKind::kExec ? kExecLane : kConnectLane;
}

Clock::TimePoint HealthKeeper::QueueDue(const std::vector<Agent::HealthTarget>& targets, bool fresh,
                                        Clock::TimePoint now, Clock::TimePoint next_look) {
  Clock::TimePoint next = next_look;
  if (fresh) {
    slots_.clear();
    for (const Agent::HealthTarget& target : targets) slots_.push_back(&tracked_[target.kernel_id]);
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    const Agent::HealthTarget& target = targets[i];
    Tracked& tracked = *slots_[i];
    if (tracked.container_id != target.container_id || tracked.run != target.run) {
      // Another container, or the same one started again (a restart by hand).
      if (!tracked.container_id.empty()) prober_.Forget(tracked.container_id);
      tracked = {target.container_id, target.run, now, now, false};
    }
    if (!tracked.in_flight && tracked.next_due <= now) {
      tracked.in_flight = true;
      tracked.next_due = now + target.rule.interval;
      const Lane lane = LaneOf(target.rule);
      queue_[lane].push_back({target, now - tracked.first_seen < target.rule.start_period});
      work_cv_[lane].notify_one();
    }
    if (!tracked.in_flight) next = std::min(next, tracked.next_due);
  }
  if (!fresh) return next;
  // A kernel that is not RUNNING (ended, backing off, gone) starts afresh when it runs again.
  std::set<std::string> present;
  for (const Agent::HealthTarget& target : targets) present.insert(target.kernel_id);
  std::erase_if(tracked_, [&](const auto& entry) {
    const bool gone = !present.count(entry.first) && !entry.second.in_flight;
    if (gone) prober_.Forget(entry.second.container_id);
    return gone;
  });
  return next;
}

void HealthKeeper::ScheduleLoop() {
  std::vector<Agent::HealthTarget> targets;
  Clock::TimePoint next_look = clock_.Now();  // when to ask the agent for its targets again
  while (true) {
    // Between looks the targets of the last one serve: a wake for a probe due
    // costs no copy of every kernel's rule, and no hold of the agent's lock.
    const bool fresh = clock_.Now() >= next_look;
    if (fresh) {
      targets = agent_.HealthTargets();
      next_look = clock_.Now() + kLookEvery;
    }
    MutexLock lock(mutex_);
    if (stop_) return;
    wake_at_ = QueueDue(targets, fresh, clock_.Now(), next_look);
    sooner_ = false;
    clock_.WaitUntil(lock.native(), schedule_cv_, wake_at_, [&]() REQUIRES(mutex_) { return stop_ || sooner_; });
    if (stop_) return;
  }
}

void HealthKeeper::WorkLoop(Lane lane) {
  while (true) {
    Job job;
    {
      MutexLock lock(mutex_);
      mutex_.Wait(work_cv_[lane], [&]() REQUIRES(mutex_) { return stop_ || !queue_[lane].empty(); });
      if (stop_) return;
      job = std::move(queue_[lane].front());
      queue_[lane].pop_front();
    }
    const Agent::HealthTarget& t = job.target;
    const ProbeResult result = prober_.Probe(t.rule, t.container_id, t.address);
    agent_.RecordHealth(t.kernel_id, t.container_id, result, job.in_start_period);
    MutexLock lock(mutex_);
    auto it = tracked_.find(t.kernel_id);
    if (it == tracked_.end() || it->second.container_id != t.container_id || it->second.run != t.run) continue;
    it->second.in_flight = false;
    if (it->second.next_due < wake_at_) {  // the scheduler would look too late for its next probe
      sooner_ = true;
      schedule_cv_.notify_one();
    }
  }
}

}  // namespace slotd
