#include "agent/health_keeper.h"

#include <algorithm>
#include <set>

#include <boost/asio/post.hpp>

#include "common/thread_name.h"

namespace slotd {

HealthKeeper::HealthKeeper(KernelHealth& health, ContainerEngine& engine, Clock& clock, PeriodicLoop& loop)
    : health_(health),
      prober_(engine),
      clock_(clock),
      loop_(loop),
      schedule_job_(loop.Add([this] { return Schedule(); })),
      next_look_(clock.Now()) {}

HealthKeeper::~HealthKeeper() { Stop(); }

void HealthKeeper::Start() {
  pools_[kExecLane].emplace(kExecWorkers);
  NamePoolThreads(*pools_[kExecLane], kExecWorkers, "health-exec");
  pools_[kConnectLane].emplace(kConnectWorkers);
  NamePoolThreads(*pools_[kConnectLane], kConnectWorkers, "health-connect");
}

void HealthKeeper::Stop() {
  for (auto& pool : pools_) {
    if (!pool) continue;
    pool->stop();  // the probes queued are dropped; those running end within their timeout
    pool->join();
    pool.reset();
  }
}

HealthKeeper::Lane HealthKeeper::LaneOf(const HealthRule& rule) {
  return rule.check.kind == ProbeKind::kExec ? kExecLane : kConnectLane;
}

Clock::TimePoint HealthKeeper::QueueDue(const std::vector<KernelHealth::Target>& targets, bool fresh,
                                        Clock::TimePoint now, Clock::TimePoint next_look) {
  Clock::TimePoint next = next_look;
  if (fresh) {
    slots_.clear();
    for (const KernelHealth::Target& target : targets) slots_.push_back(&tracked_[target.kernel_id]);
  }
  for (size_t i = 0; i < targets.size(); ++i) {
    const KernelHealth::Target& target = targets[i];
    Tracked& tracked = *slots_[i];
    if (tracked.container_id != target.container_id || tracked.run != target.run) {
      // Another container, or the same one started again (a restart by hand).
      if (!tracked.container_id.empty()) prober_.Forget(tracked.container_id);
      tracked = {target.container_id, target.run, now, now, false};
    }
    if (!tracked.in_flight && tracked.next_due <= now) {
      tracked.in_flight = true;
      tracked.next_due = now + target.rule.interval;
      boost::asio::post(*pools_[LaneOf(target.rule)],
                        [this, job = Job{target, now - tracked.first_seen < target.rule.start_period}] { Work(job); });
    }
    if (!tracked.in_flight) next = std::min(next, tracked.next_due);
  }
  if (!fresh) return next;
  // A kernel that is not RUNNING (ended, backing off, gone) starts afresh when it runs again.
  std::set<std::string> present;
  for (const KernelHealth::Target& target : targets) present.insert(target.kernel_id);
  std::erase_if(tracked_, [&](const auto& entry) {
    const bool gone = !present.count(entry.first) && !entry.second.in_flight;
    if (gone) prober_.Forget(entry.second.container_id);
    return gone;
  });
  return next;
}

Clock::Duration HealthKeeper::Schedule() {
  // Between looks the targets of the last one serve: a wake for a probe due
  // costs no copy of every kernel's rule, and no hold of the agent's lock.
  const bool fresh = clock_.Now() >= next_look_;
  if (fresh) {
    targets_ = health_.Targets();
    next_look_ = clock_.Now() + kLookEvery;
  }
  MutexLock lock(mutex_);
  const Clock::TimePoint now = clock_.Now();
  wake_at_ = QueueDue(targets_, fresh, now, next_look_);
  return wake_at_ - now;
}

void HealthKeeper::Work(const Job& job) {
  const KernelHealth::Target& t = job.target;
  const ProbeResult result = prober_.Probe(t.rule, t.container_id, t.address);
  health_.RecordCheck(t.kernel_id, t.container_id, result, job.in_start_period);
  MutexLock lock(mutex_);
  auto it = tracked_.find(t.kernel_id);
  if (it == tracked_.end() || it->second.container_id != t.container_id || it->second.run != t.run) return;
  it->second.in_flight = false;
  // The scheduler would look too late for its next probe.
  if (it->second.next_due < wake_at_) loop_.RunNow(schedule_job_);
}

}  // namespace slotd
