#include "agent/watcher.h"

#include <ctime>

#include <spdlog/spdlog.h>

namespace slotd {

Watcher::Watcher(Agent& agent, ContainerEngine& engine, std::chrono::milliseconds relist_interval, Clock& clock)
    : agent_(agent),
      engine_(engine),
      relist_interval_(relist_interval),
      clock_(clock),
      health_keeper_(agent, engine, clock) {}

Watcher::~Watcher() { Stop(); }

void Watcher::Start() {
  events_thread_ = std::thread([this] { ReadEvents(); });
  relist_thread_ = std::thread([this] { RelistLoop(); });
  probe_thread_ = std::thread([this] { ProbeLoop(); });
  lifetime_thread_ = std::thread([this] { LifetimeLoop(); });
  image_gc_thread_ = std::thread([this] { ImageGcLoop(); });
  device_health_thread_ = std::thread([this] { DeviceHealthLoop(); });
  restart_thread_ = std::thread([this] { RestartLoop(); });
  health_keeper_.Start();
}

void Watcher::Stop() {
  health_keeper_.Stop();
  {
    MutexLock lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  restart_cv_.notify_all();
  if (events_thread_.joinable()) events_thread_.join();
  if (relist_thread_.joinable()) relist_thread_.join();
  if (probe_thread_.joinable()) probe_thread_.join();
  if (lifetime_thread_.joinable()) lifetime_thread_.join();
  if (image_gc_thread_.joinable()) image_gc_thread_.join();
  if (device_health_thread_.joinable()) device_health_thread_.join();
  if (restart_thread_.joinable()) restart_thread_.join();
}

void Watcher::RequestRelist() {
  {
    MutexLock lock(mutex_);
    relist_requested_ = true;
  }
  cv_.notify_all();
}

void Watcher::ReadEvents() {
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
          if (agent_.OnEngineEvent(event)) RequestRelist();
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

void Watcher::RelistLoop() {
  while (true) {
    {
      MutexLock lock(mutex_);
      clock_.WaitFor(lock.native(), cv_, relist_interval_,
                     [&]() REQUIRES(mutex_) { return stop_.load() || relist_requested_; });
      if (stop_) return;
      relist_requested_ = false;
    }
    if (Status s = agent_.Relist(); !s.ok()) spdlog::warn("relist failed, keeping the last picture: {}", s.message());
    LookForRestarts();
  }
}

void Watcher::ProbeLoop() {
  bool answered = true;
  while (true) {
    const Status s = engine_.Ping(kProbeEvery);
    agent_.RecordEngineAnswer(s.ok());
    if (answered && !s.ok()) spdlog::warn("the engine does not answer: {}; /health reports it", s.message());
    if (!answered && s.ok()) spdlog::info("the engine answers again");
    answered = s.ok();
    MutexLock lock(mutex_);
    if (clock_.WaitFor(lock.native(), cv_, kProbeEvery, [&] { return stop_.load(); })) return;
  }
}

void Watcher::LifetimeLoop() {
  while (true) {
    agent_.WarnKernels(clock_.UnixSeconds());
    agent_.StopExpiredKernels(clock_.UnixSeconds());
    MutexLock lock(mutex_);
    if (clock_.WaitFor(lock.native(), cv_, kLifetimeCheckEvery, [&] { return stop_.load(); })) return;
  }
}

void Watcher::ImageGcLoop() {
  while (true) {
    Result<std::vector<std::string>> removed = agent_.CollectImages();
    if (!removed.ok()) spdlog::warn("image gc: {}; trying again in {} s", removed.status().message(), kImageGcEvery.count());
    MutexLock lock(mutex_);
    if (clock_.WaitFor(lock.native(), cv_, kImageGcEvery, [&] { return stop_.load(); })) return;
  }
}

void Watcher::LookForRestarts() {
  {
    MutexLock lock(mutex_);
    restart_look_requested_ = true;
  }
  restart_cv_.notify_one();
}

void Watcher::RestartLoop() {
  while (true) {
    const std::optional<int64_t> next_ms = agent_.RestartDueKernels(clock_.UnixMillis());
    Clock::Duration wait = kRestartLookEvery;
    if (next_ms) wait = std::min(wait, Clock::Duration(std::chrono::milliseconds(
                                           std::max<int64_t>(0, *next_ms - clock_.UnixMillis()))));
    MutexLock lock(mutex_);
    clock_.WaitFor(lock.native(), restart_cv_, wait,
                   [&]() REQUIRES(mutex_) { return stop_.load() || restart_look_requested_; });
    if (stop_) return;
    restart_look_requested_ = false;
  }
}

void Watcher::DeviceHealthLoop() {
  while (true) {
    agent_.ApplyDeviceHealth();
    MutexLock lock(mutex_);
    if (clock_.WaitFor(lock.native(), cv_, kDeviceHealthLookEvery, [&] { return stop_.load(); })) return;
  }
}

}  // namespace slotd
