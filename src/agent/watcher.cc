#include "agent/watcher.h"

#include <spdlog/spdlog.h>

#include "common/thread_name.h"

namespace slotd {

Watcher::Watcher(Agent& agent, ContainerEngine& engine, std::chrono::milliseconds relist_interval, Clock& clock)
    : agent_(agent),
      owners_(agent.owners()),
      engine_(engine),
      relist_interval_(relist_interval),
      clock_(clock),
      probe_loop_("probes", clock),
      kernel_loop_("kernel-timers", clock),
      relist_loop_("relist-gc", clock),
      relist_job_(relist_loop_.Add([this] { return Relist(); }, relist_interval)),
      device_health_job_(
          kernel_loop_.AddEvery(kDeviceHealthLookEvery, [this] { owners_.health.ApplyDeviceHealth(); })),
      restart_job_(kernel_loop_.Add([this] { return Restart(); })),
      health_keeper_(owners_.health, engine, clock, probe_loop_) {
  probe_loop_.AddEvery(kProbeEvery, [this] { Probe(); });
  kernel_loop_.AddEvery(kLifetimeCheckEvery, [this] { KeepLifetimes(); });
  relist_loop_.AddEvery(kImageGcEvery, [this] { CollectImages(); });
}

Watcher::~Watcher() { Stop(); }

void Watcher::Start() {
  owners_.devices.OnHealthChange([this] { kernel_loop_.RunNow(device_health_job_); });
  health_keeper_.Start();
  probe_loop_.Start();
  kernel_loop_.Start();
  relist_loop_.Start();
  events_thread_ = std::thread([this] { ReadEvents(); });
}

void Watcher::Stop() {
  owners_.devices.OnHealthChange(nullptr);
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (events_thread_.joinable()) events_thread_.join();
  probe_loop_.Stop();
  kernel_loop_.Stop();
  relist_loop_.Stop();
  health_keeper_.Stop();
}

void Watcher::RequestRelist() { relist_loop_.RunNow(relist_job_); }

void Watcher::LookForRestarts() { kernel_loop_.RunNow(restart_job_); }

void Watcher::ReadEvents() {
  NameThisThread("events");
  const std::vector<std::string> filter = {std::string(label::kOwner) + "=" + agent_.config().agent.id};
  std::chrono::milliseconds backoff = kFirstBackoff;
  while (!stop_) {
    Status s = engine_.StreamEvents(
        filter, reconcile::kEventActions,
        [&] {
          backoff = kFirstBackoff;
          RequestRelist();  // covers whatever happened while the stream was down
        },
        [&](const EngineEvent& event) {
          if (owners_.converger.OnEngineEvent(event)) RequestRelist();
          LookForRestarts();
        },
        stop_);
    if (stop_) break;
    spdlog::warn("engine event stream broke ({}); reconnecting in {} ms", s.message(), backoff.count());
    MutexLock lock(mutex_);
    clock_.WaitFor(lock.native(), cv_, backoff, [&] { return stop_.load(); });
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
}

Clock::Duration Watcher::Relist() {
  if (Status s = owners_.converger.Relist(); !s.ok())
    spdlog::warn("relist failed, keeping the last picture: {}", s.message());
  LookForRestarts();
  return relist_interval_;
}

void Watcher::Probe() {
  const Status s = engine_.Ping(kProbeEvery);
  owners_.engine_health.RecordAnswer(s.ok());
  if (engine_answered_ && !s.ok()) spdlog::warn("the engine does not answer: {}; /health reports it", s.message());
  if (!engine_answered_ && s.ok()) spdlog::info("the engine answers again");
  engine_answered_ = s.ok();
}

void Watcher::KeepLifetimes() {
  owners_.lifetimes.Warn(clock_.UnixSeconds());
  owners_.lifetimes.StopExpired(clock_.UnixSeconds());
}

void Watcher::CollectImages() {
  Result<std::vector<std::string>> removed = owners_.images.Collect();
  if (!removed.ok())
    spdlog::warn("image gc: {}; trying again in {} s", removed.status().message(), kImageGcEvery.count());
}

Clock::Duration Watcher::Restart() {
  const std::optional<int64_t> next_ms = owners_.lifetimes.RestartDue(clock_.UnixMillis());
  Clock::Duration wait = kRestartLookEvery;
  if (next_ms)
    wait = std::min(wait,
                    Clock::Duration(std::chrono::milliseconds(std::max<int64_t>(0, *next_ms - clock_.UnixMillis()))));
  return wait;
}

}  // namespace slotd
