#include "resources/cuda/gpu_health.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <mutex>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"

namespace slotd {
namespace {

int64_t SteadyNs() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// What a health reading says is wrong with a GPU; empty: nothing.
std::string ConditionOf(const GpuHealthReading& reading) {
  if (reading.lost) return "gpu lost";
  std::string condition;
  auto add = [&](const std::string& what) { condition += (condition.empty() ? "" : "; ") + what; };
  if (reading.ecc_uncorrected.value_or(0) > 0) add("ecc uncorrected " + std::to_string(*reading.ecc_uncorrected));
  if (reading.row_remap_failure.value_or(false)) add("row remapping failed");
  if (reading.retired_pages_pending.value_or(false)) add("retired pages pending a reset");
  return condition;
}

}  // namespace

const std::vector<int>& DefaultCriticalXids() {
  static const std::vector<int> xids = {48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140};
  return xids;
}

// What the threads share with the monitor; they hold it, so a thread left
// stuck in NVML after the monitor is gone still points at live objects.
struct GpuHealthMonitor::Shared {
  std::shared_ptr<NvmlApi> nvml;
  std::vector<Gpu> gpus;
  std::shared_ptr<DeviceHealthBoard> board;
  std::set<uint64_t> critical_xids;
  Clock* clock = nullptr;  // dates the board's conditions; outlives every thread (detached ones too)

  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;                       // guarded by mutex
  std::array<std::atomic<bool>, 3> done{};  // each thread sets its own when it returns
  std::atomic<int64_t> busy_since{0};      // steady ns when the poll's current NVML call began; 0: none
  std::string busy_call;                   // guarded by mutex: that call, in words
  std::set<std::string> reported_new;      // MIG instances found after the start, logged once (poll thread only)

  // Waits `period` or until stopped; true when stopped.
  bool WaitOrStop(std::chrono::milliseconds period) {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, period, [&] { return stop; });
  }
  bool Stopped() {
    std::lock_guard<std::mutex> lock(mutex);
    return stop;
  }
  // Runs `call` (an NVML call described by `what`) with the watchdog watching.
  template <typename F>
  auto Watched(const std::string& what, F call) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      busy_call = what;
    }
    busy_since = SteadyNs();
    auto result = call();
    busy_since = 0;
    return result;
  }

  void PollOnce();
  void PollLoop();
  void EventLoop();
  void WatchdogLoop();
};

void GpuHealthMonitor::Shared::PollOnce() {
  std::optional<std::vector<GpuInfo>> layout;  // read once per round, only when a GPU has MIG instances
  for (const Gpu& gpu : gpus) {
    Result<GpuHealthReading> reading = Watched("health of GPU " + gpu.uuid, [&] { return nvml->Health(gpu.uuid); });
    std::string condition;
    if (reading.ok()) {
      condition = ConditionOf(*reading);
    } else if (reading.status().code() == Status::Code::kNotFound) {
      condition = "missing: not on this node any more";
    } else {
      spdlog::warn("cuda: cannot read the health of GPU {}: {}", gpu.uuid, reading.status().message());
      continue;  // unreadable is not unhealthy: keep what was known
    }
    std::set<std::string> gone;
    if (!gpu.by_gpu_instance.empty() && condition.empty()) {
      if (!layout) {
        Result<std::vector<GpuInfo>> devices = Watched("the GPU list", [&] { return nvml->Devices(); });
        if (devices.ok()) layout = std::move(*devices);
      }
      if (layout) {
        std::set<std::string> present;
        for (const GpuInfo& info : *layout) {
          for (const MigInstance& instance : info.mig_instances) {
            present.insert(instance.uuid);
            const bool known = std::find(gpu.devices.begin(), gpu.devices.end(), instance.uuid) != gpu.devices.end();
            if (info.uuid != gpu.uuid || !gpu.whole || known || !reported_new.insert(instance.uuid).second) continue;
            spdlog::warn("cuda: new MIG instance {} ({}) on GPU {}; the agent uses the layout it found at start: "
                         "restart it to give the instance to kernels",
                         instance.uuid, instance.profile, gpu.uuid);
          }
        }
        for (const std::string& device : gpu.devices)
          if (!present.count(device)) gone.insert(device);
      }
    }
    for (const std::string& device : gpu.devices) {
      const std::string why = gone.count(device) ? "missing: MIG instance gone from GPU " + gpu.uuid : condition;
      board->SetCondition(device, why, clock->UnixSeconds());
    }
  }
}

void GpuHealthMonitor::Shared::PollLoop() {
  do {
    PollOnce();
  } while (!WaitOrStop(kPollEvery));
  done[0] = true;
}

void GpuHealthMonitor::Shared::EventLoop() {
  std::vector<std::string> uuids;
  for (const Gpu& gpu : gpus) uuids.push_back(gpu.uuid);
  Result<std::unique_ptr<XidWatch>> watch = nvml->WatchXids(uuids);
  if (!watch.ok()) {
    spdlog::warn("cuda: Xid events cannot be watched ({}); GPU health is polled only", watch.status().message());
    done[1] = true;
    return;
  }
  constexpr std::chrono::milliseconds kWaitSlice{100};  // how soon a stop is noticed
  while (!Stopped()) {
    Result<std::optional<XidEvent>> event = (*watch)->Wait(kWaitSlice);
    if (!event.ok()) {
      spdlog::warn("cuda: waiting for Xid events: {}", event.status().message());
      if (WaitOrStop(std::chrono::seconds(1))) break;
      continue;
    }
    if (!*event || !critical_xids.count((*event)->xid)) continue;
    const XidEvent& xid = **event;
    auto gpu = std::find_if(gpus.begin(), gpus.end(), [&](const Gpu& g) { return g.uuid == xid.gpu_uuid; });
    if (gpu == gpus.end()) continue;
    const std::vector<std::string>* devices = &gpu->devices;
    if (xid.gpu_instance_id) {
      auto part = gpu->by_gpu_instance.find(*xid.gpu_instance_id);
      if (part == gpu->by_gpu_instance.end()) {
        if (!gpu->by_gpu_instance.empty()) continue;  // a MIG instance this agent does not own
      } else {
        devices = &part->second;
      }
    }
    spdlog::warn("cuda: Xid {} on GPU {}{}: marking {} unhealthy", xid.xid, xid.gpu_uuid,
                 xid.gpu_instance_id ? " (GPU instance " + std::to_string(*xid.gpu_instance_id) + ")" : "",
                 devices->size() == 1 ? devices->front() : std::to_string(devices->size()) + " devices");
    for (const std::string& device : *devices) board->Mark(device, "xid " + std::to_string(xid.xid), clock->UnixSeconds());
  }
  done[1] = true;
}

void GpuHealthMonitor::Shared::WatchdogLoop() {
  constexpr std::chrono::milliseconds kLook{100};
  bool stalled = false;
  while (!WaitOrStop(kLook)) {
    const int64_t since = busy_since;
    const bool overdue = since != 0 && SteadyNs() - since > std::chrono::nanoseconds(kCallDeadline).count();
    if (overdue && !stalled) {
      std::string call;
      {
        std::lock_guard<std::mutex> lock(mutex);
        call = busy_call;
      }
      const std::string why = "health unknown: NVML has not answered a read of the " + call + " for " +
                              std::to_string(kCallDeadline.count()) + " s";
      spdlog::error("cuda: {}", why);
      board->SetStalled(why, clock->UnixSeconds());
    } else if (!overdue && stalled) {
      spdlog::info("cuda: NVML answers again");
      board->ClearStalled(clock->UnixSeconds());
    }
    stalled = overdue;
  }
  done[2] = true;
}

GpuHealthMonitor::GpuHealthMonitor(std::shared_ptr<NvmlApi> nvml, std::vector<Gpu> gpus,
                                   std::shared_ptr<DeviceHealthBoard> board, std::set<uint64_t> critical_xids,
                                   Clock& clock)
    : shared_(std::make_shared<Shared>()) {
  shared_->clock = &clock;
  shared_->nvml = std::move(nvml);
  shared_->gpus = std::move(gpus);
  shared_->board = std::move(board);
  shared_->critical_xids = std::move(critical_xids);
}

void GpuHealthMonitor::Start() {
  if (!threads_.empty() || shared_->gpus.empty()) return;
  threads_.emplace_back([shared = shared_] {
    NameThisThread("gpu-poll");
    shared->PollLoop();
  });
  threads_.emplace_back([shared = shared_] {
    NameThisThread("gpu-xid");
    shared->EventLoop();
  });
  threads_.emplace_back([shared = shared_] {
    NameThisThread("gpu-watchdog");
    shared->WatchdogLoop();
  });
}

GpuHealthMonitor::~GpuHealthMonitor() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->stop = true;
  }
  shared_->cv.notify_all();
  // A thread still inside NVML a while after the stop is stuck there: leave it.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (size_t i = 0; i < threads_.size(); ++i) {
    while (!shared_->done[i] && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (shared_->done[i]) {
      threads_[i].join();
    } else {
      threads_[i].detach();
    }
  }
}

}  // namespace slotd
