#include "stats/collector.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <string_view>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"
#include "common/units.h"
#include "stats/text_files.h"

namespace slotd {

using SteadyClock = std::chrono::steady_clock;

namespace {

// The entry of `kernel` for device `device` of `plugin`, appended when missing.
KernelDeviceUse& UseOf(KernelStats& kernel, const std::string& plugin, const std::string& device) {
  for (KernelDeviceUse& use : kernel.devices)
    if (use.plugin == plugin && use.device == device) return use;
  KernelDeviceUse& use = kernel.devices.emplace_back();
  use.plugin = plugin;
  use.device = device;
  return use;
}

// Whether `target` holds `device` of `plugin`.
bool Holds(const StatsTarget& target, const std::string& plugin, const std::string& device) {
  const auto held = target.devices.find(plugin);
  return held != target.devices.end() && std::find(held->second.begin(), held->second.end(), device) != held->second.end();
}

// How many cgroup files the collector may keep open: half of the process's
// open-file limit, the rest left to connections, engine calls and watches.
size_t OpenFilesBudget() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) return 0;
  if (files.rlim_cur == RLIM_INFINITY) return size_t{1} << 20;
  return static_cast<size_t>(files.rlim_cur / 2);
}

}  // namespace

// How long a tracked kernel's other measures (memory cache, I/O, memory
// limit, OOM kill count, cpuset) are carried from its last full reading
// before they are read again; every sweep reads its cpu time, memory use and
// pids. Out-of-memory kills are noticed at once through the OomWatch all
// the same.
constexpr std::chrono::seconds kFullReadingEvery{5};

// Where one container's measures are, and its previous sample for cpu_percent.
struct StatsCollector::Tracked {
  std::optional<CgroupFiles> files;  // stats-type cgroup: found through the init pid
  CgroupSample full;                 // the last full reading (CgroupMeasures::kAll)
  SteadyClock::time_point full_at;   // when it was taken; unset: none yet
  bool has_previous = false;
  uint64_t previous_cpu_ns = 0;
  SteadyClock::time_point previous_at;
  OomWatch::Armed oom_watched;  // disarmed when the container is no longer tracked
};

// Runs one meter's Measure calls on a thread of its own, one job (all of the
// meter's devices) at a time, so that the sweep can stop waiting at a deadline
// while a stuck call goes on. Post and Wait are called from the sweeping
// thread only.
//
// The thread and the state it touches live in `Shared`, which the thread
// holds a reference to: a worker destroyed while its thread is stuck in a
// call detaches the thread, which finishes the call, sees `stop` and ends,
// releasing the meter and the state last.
class StatsCollector::MeterWorker {
 public:
  explicit MeterWorker(std::shared_ptr<DeviceMeter> meter)
      : plugin_(meter->Plugin()), shared_(std::make_shared<Shared>()) {
    shared_->meter = std::move(meter);
    thread_ = std::thread(&MeterWorker::Run, shared_);
  }

  ~MeterWorker() {
    bool in_call;
    {
      MutexLock lock(shared_->mutex);
      shared_->stop = true;
      in_call = shared_->posted != shared_->done;
    }
    shared_->cv.notify_all();
    if (in_call) {
      thread_.detach();  // ends by itself once the meter's call returns
    } else {
      thread_.join();
    }
  }

  const std::string& plugin() const { return plugin_; }
  // For Devices(), from the sweeping thread (Shared::meter is constant).
  DeviceMeter& meter() const { return *shared_->meter; }

  // Hands the thread a job: measure `devices`. False, leaving everything as
  // is, while the previous job is still running (a call stuck past its deadline).
  bool Post(const std::vector<std::string>& devices) {
    {
      MutexLock lock(shared_->mutex);
      if (shared_->posted != shared_->done) return false;
      shared_->devices = devices;
      ++shared_->posted;
    }
    shared_->cv.notify_all();
    return true;
  }

  // Waits for the posted job until `deadline`: one reading per device, in
  // the order posted, or nullopt when the job is not done by then.
  std::optional<std::vector<Result<DeviceReading>>> Wait(SteadyClock::time_point deadline) {
    MutexLock lock(shared_->mutex);
    if (!shared_->cv.wait_until(lock.native(), deadline,
                                [this]() REQUIRES(shared_->mutex) { return shared_->done == shared_->posted; }))
      return std::nullopt;
    return std::move(shared_->results);
  }

  // Owned by the sweeping thread: whether the last job overran its deadline
  // (so that recovery is logged once).
  bool overran = false;

 private:
  struct Shared {
    Mutex mutex;
    std::condition_variable cv;                  // signals a posted job, a finished job and stop
    bool stop GUARDED_BY(mutex) = false;
    uint64_t posted GUARDED_BY(mutex) = 0;       // jobs handed over
    uint64_t done GUARDED_BY(mutex) = 0;         // jobs finished; posted != done: a job runs
    std::vector<std::string> devices GUARDED_BY(mutex);            // the posted job's devices
    std::vector<Result<DeviceReading>> results GUARDED_BY(mutex);  // the last finished job's readings
    std::shared_ptr<DeviceMeter> meter;  // constant; Measure is called by the thread only
  };

  static void Run(std::shared_ptr<Shared> shared) {
    NameThisThread("device-meter");
    MutexLock lock(shared->mutex);
    for (;;) {
      shared->cv.wait(lock.native(),
                      [&]() REQUIRES(shared->mutex) { return shared->stop || shared->posted != shared->done; });
      if (shared->stop) return;
      const uint64_t job = shared->posted;
      const std::vector<std::string> devices = shared->devices;
      lock.Unlock();
      std::vector<Result<DeviceReading>> results;
      results.reserve(devices.size());
      for (const std::string& id : devices) results.push_back(shared->meter->Measure(id));
      lock.Lock();
      shared->results = std::move(results);
      shared->done = job;
      shared->cv.notify_all();
    }
  }

  const std::string plugin_;
  const std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

StatsCollector::StatsCollector(Options options, std::function<std::vector<StatsTarget>()> targets,
                               ContainerEngine& engine, std::vector<std::shared_ptr<DeviceMeter>> meters,
                               Clock& clock)
    : options_(std::move(options)),
      targets_(std::move(targets)),
      engine_(engine),
      proc_(options_.root + (options_.root.ends_with('/') ? "" : "/") + "proc/"),
      open_files_budget_(OpenFilesBudget()),
      clock_(clock) {
  for (auto& meter : meters) meters_.push_back(std::make_unique<MeterWorker>(std::move(meter)));
  if (options_.on_out_of_memory && options_.stats_type == StatsType::kCgroup)
    oom_watch_ = std::make_unique<OomWatch>(options_.on_out_of_memory);
  latest_ = NewSnapshot();
}

std::shared_ptr<StatsSnapshot> StatsCollector::NewSnapshot() const {
  auto snapshot = std::make_shared<StatsSnapshot>();
  snapshot->agent_id = options_.agent_id;
  snapshot->stats_type = WordOf(StatsTypeWords(), options_.stats_type);
  snapshot->interval_ms = options_.interval.count();
  return snapshot;
}

StatsCollector::~StatsCollector() { Stop(); }

void StatsCollector::Start() {
  if (loop_.joinable()) return;
  stop_requested_ = false;
  loop_ = std::thread(&StatsCollector::Loop, this);
}

void StatsCollector::Stop() {
  {
    MutexLock lock(loop_mutex_);
    stop_requested_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  stop_requested_ = false;  // SweepOnce may run again
}

std::shared_ptr<const StatsSnapshot> StatsCollector::Latest() const {
  MutexLock lock(latest_mutex_);
  return latest_;
}

std::shared_ptr<const StatsSnapshot> StatsCollector::SweepOnce() { return Sweep(); }

void StatsCollector::Loop() {
  NameThisThread("stats");
  Clock::TimePoint next = clock_.Now();
  for (;;) {
    {
      MutexLock lock(loop_mutex_);
      clock_.WaitUntil(lock.native(), loop_cv_, next, [this]() REQUIRES(loop_mutex_) { return stop_requested_.load() || sweep_soon_; });
      sweep_soon_ = false;
    }
    if (stop_requested_) return;
    Sweep();
    const Clock::TimePoint now = clock_.Now();
    if (now < next) continue;  // an early sweep (SweepSoon): the interval's own one stays where it was
    next += options_.interval;
    if (next < now) next = now;  // a sweep longer than the interval: the next one starts at once
  }
}

void StatsCollector::SweepSoon() {
  {
    MutexLock lock(loop_mutex_);
    sweep_soon_ = true;
  }
  loop_cv_.notify_all();
}

StatsCollector::TimedSample StatsCollector::Sample(const StatsTarget& target, Tracked& tracked) {
  if (!tracked.files) {
    Result<ContainerInfo> info = engine_.Inspect(target.container_id);
    if (!info.ok())
      return {info.status(), SteadyClock::now(), /*container_gone=*/info.status().code() == Status::Code::kNotFound};
    if (!info->running || info->pid <= 0)
      return {Status::NotFound("container " + target.container_id + " is not running (state " + info->state + ")"),
              SteadyClock::now(), /*container_gone=*/true};
    Result<CgroupPaths> paths = Reader().Locate(info->pid);
    // kNotFound: its process has ended since the inspect said it runs: the
    // container has ended.
    if (!paths.ok())
      return {paths.status(), SteadyClock::now(), /*container_gone=*/paths.status().code() == Status::Code::kNotFound};
    if (!CgroupPathsName(*paths, target.container_id))  // it ended since the inspect, and its pid is another's
      return {Status::NotFound("process " + std::to_string(info->pid) + " is no longer in container " +
                               target.container_id + "'s cgroups: the container has ended"),
              SteadyClock::now(), /*container_gone=*/true};
    tracked.files.emplace(*paths, /*keep_open=*/kept_open_files_ < open_files_budget_);
    kept_open_files_ += tracked.files->OpenFiles();
    if (oom_watch_) {
      Result<OomWatch::Armed> armed = oom_watch_->Watch(target.kernel_id, target.container_id, paths->memory);
      if (armed.ok())
        tracked.oom_watched = std::move(*armed);
      else  // a warning the first time: the host may not let any cgroup be watched
        spdlog::log(std::exchange(oom_watch_warned_, true) ? spdlog::level::debug : spdlog::level::warn,
                    "kernel {}: its memory cgroup is not watched for out-of-memory kills: {}", target.kernel_id,
                    armed.status().message());
    }
  }
  const SteadyClock::time_point now = SteadyClock::now();
  // A kernel located just now has no full reading yet: it gets one.
  const bool full_due = tracked.full_at == SteadyClock::time_point{} || now - tracked.full_at >= kFullReadingEvery;
  Result<CgroupSample> sample = tracked.files->Read(full_due ? CgroupMeasures::kAll : CgroupMeasures::kLive);
  if (sample.ok() && full_due) {
    tracked.full = *sample;
    tracked.full_at = now;
  } else if (sample.ok()) {
    sample->memory_cache_bytes = tracked.full.memory_cache_bytes;
    sample->io_read_bytes = tracked.full.io_read_bytes;
    sample->io_write_bytes = tracked.full.io_write_bytes;
    sample->memory_limit_bytes = tracked.full.memory_limit_bytes;
    sample->oom_kills = tracked.full.oom_kills;
    sample->cpuset_cpus = tracked.full.cpuset_cpus;
  }
  return {std::move(sample), SteadyClock::now()};
}

const CgroupReader& StatsCollector::Reader() {
  if (!reader_) reader_.emplace(options_.root);
  return *reader_;
}

void StatsCollector::Untrack(const std::string& container_id) {
  auto it = tracked_.find(container_id);
  if (it == tracked_.end()) return;
  if (it->second->files) kept_open_files_ -= it->second->files->OpenFiles();
  tracked_.erase(it);
}

std::vector<StatsCollector::TimedSample> StatsCollector::EngineSamples(const std::vector<StatsTarget>& targets) {
  std::vector<std::optional<TimedSample>> fetched(targets.size());
  std::atomic<size_t> next{0};
  auto fetch = [&] {
    for (size_t i; (i = next++) < targets.size() && !stop_requested_;) {
      Result<ContainerStats> stats = engine_.Stats(targets[i].container_id);
      const SteadyClock::time_point at = SteadyClock::now();
      if (!stats.ok()) {
        const bool gone = stats.status().code() == Status::Code::kNotFound;
        fetched[i] = TimedSample{stats.status(), at, /*container_gone=*/gone};
        continue;
      }
      CgroupSample sample;
      sample.cpu_usage_ns = stats->cpu_usage_ns;
      sample.memory_used_bytes = stats->memory_used_bytes;
      sample.memory_limit_bytes = stats->memory_limit_bytes;
      sample.memory_cache_bytes = stats->memory_cache_bytes;
      sample.pids = stats->pids;
      sample.io_read_bytes = stats->io_read_bytes;
      sample.io_write_bytes = stats->io_write_bytes;
      fetched[i] = TimedSample{sample, at};
    }
  };
  {
    std::vector<std::jthread> callers;
    for (size_t n = 1; n < std::min(kEngineStatsCalls, targets.size()); ++n)
      callers.emplace_back([&fetch] {
        NameThisThread("stats-fetch");
        fetch();
      });
    fetch();
  }
  std::vector<TimedSample> samples;
  samples.reserve(targets.size());
  for (auto& one : fetched)  // empty only when Stop() cut the sweep short
    samples.push_back(one ? std::move(*one) : TimedSample{Status::Unavailable("the stats loop is stopping"), {}});
  return samples;
}

std::shared_ptr<const StatsSnapshot> StatsCollector::Sweep() {
  const SteadyClock::time_point start = SteadyClock::now();
  std::shared_ptr<StatsSnapshot> snapshot = NewSnapshot();

  const std::vector<StatsTarget> targets = targets_();
  std::map<std::string_view, const StatsTarget*> by_container;
  for (const StatsTarget& target : targets) by_container.emplace(target.container_id, &target);

  std::vector<TimedSample> engine_samples;
  if (options_.stats_type == StatsType::kDocker) engine_samples = EngineSamples(targets);
  for (size_t i = 0; i < targets.size(); ++i) {
    if (stop_requested_) return nullptr;
    const StatsTarget& target = targets[i];
    std::unique_ptr<Tracked>& tracked = tracked_[target.container_id];
    if (!tracked) tracked = std::make_unique<Tracked>();
    TimedSample timed = engine_samples.empty() ? Sample(target, *tracked) : std::move(engine_samples[i]);
    const Result<CgroupSample>& sample = timed.sample;
    if (!sample.ok()) {
      // A container that failed last sweep and that the engine now says is
      // gone was counted then: it has nothing more to skip until the agent
      // learns of its end and drops it from the targets.
      const bool failed_before = !failing_.insert(target.container_id).second;
      if (!(failed_before && timed.container_gone)) ++skipped_total_;
      spdlog::debug("kernel {}: stats sample skipped, its container will be located afresh: {}", target.kernel_id,
                    sample.status().message());
      Untrack(target.container_id);
      continue;
    }
    failing_.erase(target.container_id);
    const SteadyClock::time_point at = timed.at;
    KernelStats kernel;
    kernel.kernel_id = target.kernel_id;
    kernel.container_id = target.container_id;
    kernel.sampled_at_ms = clock_.UnixMillis();
    kernel.sample = *sample;
    kernel.cpu_quota_millis = target.cpu_quota_millis;
    if (tracked->has_previous && sample->cpu_usage_ns >= tracked->previous_cpu_ns && at > tracked->previous_at) {
      const double wall_ns = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(at - tracked->previous_at).count());
      kernel.cpu_percent = static_cast<double>(sample->cpu_usage_ns - tracked->previous_cpu_ns) / wall_ns * 100.0;
    }
    tracked->has_previous = true;
    tracked->previous_cpu_ns = sample->cpu_usage_ns;
    tracked->previous_at = at;
    snapshot->agent.memory_used_bytes += sample->memory_used_bytes;
    snapshot->kernels.emplace(target.kernel_id, std::move(kernel));
  }
  std::vector<std::string> gone;
  for (const auto& [container_id, entry] : tracked_)
    if (!by_container.contains(container_id)) gone.push_back(container_id);
  for (const std::string& container_id : gone) Untrack(container_id);
  std::erase_if(failing_, [&](const std::string& container_id) { return !by_container.contains(container_id); });

  snapshot->agent.memory_capacity_bytes = options_.memory_share_bytes;
  SampleCores(*snapshot);
  if (stop_requested_) return nullptr;
  SampleDevices(by_container, *snapshot);
  if (stop_requested_) return nullptr;

  snapshot->sweeps_total = ++sweeps_total_;
  snapshot->skipped_samples_total = skipped_total_;
  snapshot->attribution_unavailable = attribution_unavailable_;
  snapshot->collected_at_ms = clock_.UnixMillis();
  snapshot->sweep_us =
      std::chrono::duration_cast<std::chrono::microseconds>(SteadyClock::now() - start).count();
  std::shared_ptr<const StatsSnapshot> published = std::move(snapshot);
  {
    MutexLock lock(latest_mutex_);
    latest_ = published;
  }
  if (options_.on_sweep) options_.on_sweep(*published);
  return published;
}

void StatsCollector::SampleCores(StatsSnapshot& snapshot) {
  std::vector<CoreStats>& cores = snapshot.agent.cores;
  cores.resize(options_.cores.size());
  for (size_t i = 0; i < cores.size(); ++i) cores[i].core = options_.cores[i];
  std::vector<bool> seen(cores.size(), false);

  // "cpu3 4705 356 584 3699 23 23 0 0 0 0": user nice system idle iowait irq
  // softirq steal guest guest_nice, in jiffies; guest time is already in user.
  const std::string path = proc_ + "stat";
  const int error = ForEachLine(path.c_str(), [&](std::string_view line) {
    if (!line.starts_with("cpu") || line.size() < 4 || line[3] < '0' || line[3] > '9') return;
    std::string_view fields[9];  // "cpuN", then the first 8 counters
    const size_t count = SplitFields(line, fields, 9);
    uint64_t core = 0;
    if (count < 6 || !ParseNumber(fields[0].substr(3), core)) return;  // not even idle and iowait
    const auto found = std::find(options_.cores.begin(), options_.cores.end(), static_cast<int>(core));
    if (found == options_.cores.end()) return;
    uint64_t ticks[8] = {};
    uint64_t total = 0;
    for (size_t i = 1; i < count; ++i) {
      if (!ParseNumber(fields[i], ticks[i - 1])) return;
      total += ticks[i - 1];
    }
    const uint64_t busy = total - ticks[3] - ticks[4];

    const size_t index = static_cast<size_t>(found - options_.cores.begin());
    seen[index] = true;
    auto previous = previous_core_ticks_.find(static_cast<int>(core));
    if (previous != previous_core_ticks_.end()) {
      const auto [previous_busy, previous_total] = previous->second;
      if (total > previous_total && busy >= previous_busy) {
        const double share = static_cast<double>(busy - previous_busy) / static_cast<double>(total - previous_total);
        cores[index].utilization_percent = std::min(100.0, share * 100.0);
      }
      previous->second = {busy, total};
    } else {
      previous_core_ticks_.emplace(static_cast<int>(core), std::make_pair(busy, total));
    }
  });
  if (error != 0) spdlog::debug("cannot read {}: {}; core utilisation is left out of this sample", path, std::strerror(error));
  // A core missing from this reading (offline) starts afresh when it returns.
  for (size_t i = 0; i < cores.size(); ++i)
    if (!seen[i]) previous_core_ticks_.erase(cores[i].core);
}

void StatsCollector::SampleDevices(const std::map<std::string_view, const StatsTarget*>& by_container,
                                   StatsSnapshot& snapshot) {
  // Every meter gets its job first, so that they all run under one deadline.
  std::vector<std::vector<std::string>> devices(meters_.size());
  std::vector<bool> posted(meters_.size());
  for (size_t m = 0; m < meters_.size(); ++m) {
    devices[m] = meters_[m]->meter().Devices();
    posted[m] = meters_[m]->Post(devices[m]);
  }
  const SteadyClock::time_point deadline = SteadyClock::now() + options_.meter_deadline;
  const long long deadline_ms = options_.meter_deadline.count();

  for (size_t m = 0; m < meters_.size(); ++m) {
    MeterWorker& worker = *meters_[m];
    const std::string& plugin = worker.plugin();
    std::optional<std::vector<Result<DeviceReading>>> readings;
    std::string unanswered;  // why the whole meter is skipped
    if (!posted[m]) {
      unanswered = plugin + " meter is still busy with a call that overran its " + std::to_string(deadline_ms) +
                   " ms deadline; skipped this sample";
    } else if (readings = worker.Wait(deadline); !readings) {
      unanswered = plugin + " meter did not answer within " + std::to_string(deadline_ms) + " ms; skipped this sample";
      worker.overran = true;
      spdlog::warn("{} meter did not answer within {} ms; its devices are reported unmeasured until the call returns",
                   plugin, deadline_ms);
    } else if (worker.overran) {
      worker.overran = false;
      spdlog::info("{} meter answers again", plugin);
    }

    for (size_t d = 0; d < devices[m].size(); ++d) {
      DeviceStats& device = snapshot.agent.devices.emplace_back();
      device.plugin = plugin;
      device.device = devices[m][d];
      if (!readings) {
        device.error = unanswered;
        ++skipped_total_;
        continue;
      }
      const Result<DeviceReading>& reading = (*readings)[d];
      if (!reading.ok()) {
        device.error = reading.status().message();
        ++skipped_total_;
        spdlog::debug("device {}: {}", device.device, device.error);
        continue;
      }
      device.measured = true;
      device.memory_used_bytes = reading->memory_used_bytes;
      device.memory_total_bytes = reading->memory_total_bytes;
      device.utilization_percent = reading->utilization_percent;
      device.memory_utilization_percent = reading->memory_utilization_percent;
      if (attribution_unavailable_.empty()) Attribute(*reading, by_container, device, snapshot);
    }
  }

  for (const auto& [plugin, ids] : options_.unmetered_devices) {
    for (const std::string& id : ids) {
      DeviceStats& device = snapshot.agent.devices.emplace_back();
      device.plugin = plugin;
      device.device = id;
    }
  }

  if (!attribution_unavailable_.empty()) {  // found out during this sweep: undo what was attributed before
    for (DeviceStats& device : snapshot.agent.devices) {
      device.foreign.clear();
      device.foreign_memory_bytes = 0;
    }
    for (auto& [id, kernel] : snapshot.kernels) kernel.devices.clear();
  }
}

void StatsCollector::Attribute(const DeviceReading& reading,
                               const std::map<std::string_view, const StatsTarget*>& by_container,
                               DeviceStats& device, StatsSnapshot& snapshot) {
  // Every kernel holding the device gets an entry, busy or not.
  for (const auto& [container, target] : by_container) {
    if (!Holds(*target, device.plugin, device.device)) continue;
    if (auto kernel = snapshot.kernels.find(target->kernel_id); kernel != snapshot.kernels.end())
      UseOf(kernel->second, device.plugin, device.device);
  }

  const uint64_t sweep = sweeps_total_ + 1;
  for (const DeviceProcess& process : reading.processes) {
    const int pid = static_cast<int>(process.host_pid);
    Result<int> kernel_pid = Reader().NamespacePid(pid);
    if (!kernel_pid.ok()) {
      if (kernel_pid.status().code() == Status::Code::kFailedPrecondition) {
        attribution_unavailable_ =
            "per-process GPU attribution is unavailable: this host's kernel gives no NSpid in /proc/<pid>/status "
            "(Linux 4.1 or later does), so GPU processes are neither attributed to kernels nor reported as "
            "foreign; run slotd on Linux 4.1 or later";
        spdlog::warn("{}", attribution_unavailable_);
        return;
      }
      if (kernel_pid.status().code() == Status::Code::kNotFound) continue;  // gone since the meter listed it
    }

    std::string container_id;
    if (Result<std::string> id = Reader().ContainerIdOfPid(pid); id.ok()) {
      container_id = std::move(*id);
    } else {
      struct stat info;
      const bool gone = id.status().code() == Status::Code::kNotFound &&
                        ::stat((proc_ + std::to_string(pid)).c_str(), &info) != 0;
      if (gone) continue;
      // No container, or its cgroup cannot be read: not a kernel's either way.
      if (id.status().code() != Status::Code::kNotFound)
        spdlog::debug("device {}: process {}: {}", device.device, pid, id.status().message());
    }

    if (auto target = by_container.find(container_id); !container_id.empty() && target != by_container.end()) {
      // A kernel's own process, even on a device it does not hold. A kernel
      // whose sample was skipped this sweep is not in the snapshot: its
      // process is neither attributed nor foreign this time.
      auto kernel = snapshot.kernels.find(target->second->kernel_id);
      if (kernel == snapshot.kernels.end()) continue;
      KernelDeviceUse& use = UseOf(kernel->second, device.plugin, device.device);
      KernelProcessUse& use_process = use.processes.emplace_back();
      use_process.host_pid = process.host_pid;
      if (kernel_pid.ok()) use_process.kernel_pid = *kernel_pid;
      use_process.memory_bytes = process.memory_bytes;
      use.memory_used_bytes += process.memory_bytes;
      continue;
    }

    device.foreign.push_back({process.host_pid, process.memory_bytes, container_id});
    device.foreign_memory_bytes += process.memory_bytes;
    auto [warned, first_time] = warned_foreign_.try_emplace({device.device, process.host_pid}, sweep);
    warned->second = sweep;
    if (first_time) {
      spdlog::warn("device {}: process {} ({}) uses {} and is not a kernel of agent {}; reported as foreign usage",
                   device.device, pid, container_id.empty() ? "no container" : "container " + container_id.substr(0, 12),
                   process.memory_bytes == 0 ? "an unknown amount of device memory" : DescribeSize(process.memory_bytes), options_.agent_id);
    }
  }
  // Forget the processes no longer on this device, so that a return warns again.
  for (auto it = warned_foreign_.lower_bound({device.device, 0});
       it != warned_foreign_.end() && it->first.first == device.device;) {
    it = it->second == sweep ? std::next(it) : warned_foreign_.erase(it);
  }
}

}  // namespace slotd
