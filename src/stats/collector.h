// StatsCollector: the stats loop. Every interval it sweeps this agent's
// running kernels and its slice of the node, and publishes one immutable
// StatsSnapshot that the API reads without waiting on a sweep.
//
// Per kernel (stats-type "cgroup"): the container's init pid is learnt once
// through the engine (Inspect of an owned container) and its cgroup
// directories once through CgroupReader::Locate, whose files are then kept
// open (CgroupFiles, up to half of the process's open-file limit for all
// kernels together): a sweep reads each file with one pread. Every sweep
// reads a kernel's cpu time, memory use and pids (CgroupMeasures::kLive);
// its other measures (memory cache, I/O, memory limit, OOM kill count,
// cpuset) are read at its first sweep and then every 5 s, and carried in
// between. With stats-type "docker" each kernel costs one one-shot
// ContainerEngine::Stats call instead, up to kEngineStatsCalls at a time.
//
// Failure costs one sample, never more: a kernel whose container vanished or
// whose cgroup cannot be read is left out of that sweep (counted in
// skipped_samples_total, logged at debug) and located afresh next time. A
// container that then turns out to be gone or stopped (as the engine answers)
// is left out of the sweeps that follow without being counted again, until
// the agent learns of its end. Each
// DeviceMeter call runs on that meter's own worker thread under a deadline;
// an overrun marks the device not measured for that sweep, and while the call
// is still stuck later sweeps skip the meter at once.
//
// GPU processes are attributed through the reader: a process's host pid ->
// its container (ContainerIdOfPid) -> the kernel running in that container;
// its pid inside the container comes from NamespacePid. A process in any
// other container, or in none, is foreign usage (in the snapshot, plus one
// warning log per process when it first appears). Without NSpid support,
// attribution is reported unavailable instead of guessed.
//
// Thread-safety: Latest() may be called from any thread. Start/Stop from one
// thread. SweepOnce must not run while the loop runs (tests and benches use it
// instead of Start).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "config/choices.h"
#include "engine/container_engine.h"
#include "stats/cgroup.h"
#include "resources/device_meter.h"
#include "stats/measures.h"
#include "stats/oom_watch.h"

namespace slotd {

// One running kernel to measure.
struct StatsTarget {
  std::string kernel_id;
  std::string container_id;
  std::map<std::string, std::vector<std::string>> devices;  // plugin name -> device ids it holds
  int cpu_quota_millis = 0;  // a shared kernel's CPU quota; 0: it has exclusive cores
};

class StatsCollector {
 public:
  struct Options {
    std::string agent_id;
    StatsType stats_type = StatsType::kCgroup;
    std::chrono::milliseconds interval{1000};       // between sweep starts
    std::chrono::milliseconds meter_deadline{500};  // per DeviceMeter::Measure call
    std::vector<int> cores;                         // the agent's allowed cores
    uint64_t memory_share_bytes = 0;
    // Owned devices of plugins without a meter (mock), by plugin name: listed
    // in every snapshot as not measured, with no error.
    std::map<std::string, std::vector<std::string>> unmetered_devices;
    std::string root = "/";                         // where proc/ and sys/fs/cgroup/ are (tests: a fake tree)
    // Called with each sweep's snapshot once it is published, from the
    // sweeping thread (the agent's idle tracking); unset: nothing.
    std::function<void(const StatsSnapshot&)> on_sweep;
    // stats-type "cgroup": called, from the out-of-memory watch's thread, as
    // soon as a measured kernel's memory cgroup runs out of memory (OomWatch),
    // for engines that do not say so themselves; a kernel is watched from
    // the sweep that first locates its cgroup. Unset: nothing is watched.
    OomWatch::Notify on_out_of_memory;
  };

  // `targets` returns the agent's running kernels (called once per sweep,
  // from the collector's thread). `engine` and `clock` must outlive the
  // collector; `clock` paces the sweeps and dates the snapshots (the rates
  // between two readings use the real time the counters advance in).
  StatsCollector(Options options, std::function<std::vector<StatsTarget>()> targets, ContainerEngine& engine,
                 std::vector<std::shared_ptr<DeviceMeter>> meters, Clock& clock = Clock::Real());
  ~StatsCollector();  // Stop()

  // Starts the loop: a first sweep at once, then one every interval.
  void Start();
  // Ends the loop and joins it. A sweep in progress is abandoned after the
  // kernel it is reading or the meter wait it is in (at most meter_deadline).
  // A meter call stuck past its deadline is left to finish on its own thread;
  // the destructor detaches such a thread, which ends once the call returns.
  void Stop();

  // Asks the loop for a sweep now, before the interval's next one (a
  // kernel started: its stats and its out-of-memory watch begin at once).
  // Requests made while a sweep runs make one sweep after it. Any thread.
  void SweepSoon() EXCLUDES(loop_mutex_);

  // One sweep on the caller's thread; publishes and returns its snapshot.
  std::shared_ptr<const StatsSnapshot> SweepOnce();

  // The latest snapshot; before the first sweep, an empty one
  // (collected_at_ms 0) that names the agent, stats type and interval.
  std::shared_ptr<const StatsSnapshot> Latest() const;

 private:
  class MeterWorker;  // runs one meter's calls on its own thread, under the deadline
  struct Tracked;     // per container: where its measures are, and its previous cpu sample

  // An empty snapshot naming the agent, the stats type and the interval.
  std::shared_ptr<StatsSnapshot> NewSnapshot() const;
  // One sweep; nullptr when Stop() asked it to end early (nothing published then).
  std::shared_ptr<const StatsSnapshot> Sweep();
  // The loop thread's body.
  void Loop();
  // One target's sample and when it was taken. stats-type "cgroup": reads
  // its cgroup, locating its container first when `tracked` is new.
  struct TimedSample {
    Result<CgroupSample> sample;
    std::chrono::steady_clock::time_point at;
    bool container_gone = false;  // the engine says the container does not exist or does not run
  };
  TimedSample Sample(const StatsTarget& target, Tracked& tracked);
  // The cgroup reader, made on first use on the sweeping thread: reading
  // mountinfo, which every container's mounts lengthen, is kept off the
  // agent's start.
  const CgroupReader& Reader();
  // Forgets the container's Tracked entry, closing its kept files.
  void Untrack(const std::string& container_id);
  // stats-type "docker": every target's engine stats, in `targets` order,
  // fetched by up to kEngineStatsCalls calls at a time (each takes the
  // engine about a second or two).
  std::vector<TimedSample> EngineSamples(const std::vector<StatsTarget>& targets);
  static constexpr size_t kEngineStatsCalls = 8;
  // Fills `snapshot.agent.cores` from <root>/proc/stat and the previous sweep's ticks.
  void SampleCores(StatsSnapshot& snapshot);
  // Measures every meter's devices into `snapshot.agent.devices` and
  // attributes their processes to `snapshot.kernels` or as foreign usage.
  // `by_container`: this sweep's targets by container id.
  void SampleDevices(const std::map<std::string_view, const StatsTarget*>& by_container, StatsSnapshot& snapshot);
  // Attributes the processes of one measured device; sets
  // attribution_unavailable_ (and stops) when the host has no NSpid.
  void Attribute(const DeviceReading& reading, const std::map<std::string_view, const StatsTarget*>& by_container,
                 DeviceStats& device, StatsSnapshot& snapshot);

  const Options options_;
  const std::function<std::vector<StatsTarget>()> targets_;
  ContainerEngine& engine_;
  const std::string proc_;  // "<root>/proc/"
  std::vector<std::unique_ptr<MeterWorker>> meters_;

  // Watches the located kernels' memory cgroups (options_.on_out_of_memory
  // set); before tracked_, whose entries hold its watches.
  std::unique_ptr<OomWatch> oom_watch_;
  // Owned by the sweeping thread (the loop, or SweepOnce's caller).
  std::optional<CgroupReader> reader_;  // made by the first sweep that needs it: see Reader()
  std::map<std::string, std::unique_ptr<Tracked>> tracked_;           // container id -> where its measures are
  std::set<std::string> failing_;  // this sweep's targets whose last sample failed
  size_t kept_open_files_ = 0;  // cgroup files held open by tracked_'s entries
  const size_t open_files_budget_;  // how many may be: half of the open-file limit at construction
  std::map<int, std::pair<uint64_t, uint64_t>> previous_core_ticks_;  // core -> (busy, total) jiffies
  std::map<std::pair<std::string, unsigned>, uint64_t> warned_foreign_;  // (device, pid) -> last sweep seen
  bool oom_watch_warned_ = false;  // a failure to watch a kernel's cgroup was logged as a warning
  std::string attribution_unavailable_;  // set once, when the host turns out to have no NSpid
  uint64_t sweeps_total_ = 0;
  uint64_t skipped_total_ = 0;

  mutable Mutex latest_mutex_;
  std::shared_ptr<const StatsSnapshot> latest_ GUARDED_BY(latest_mutex_);

  Mutex loop_mutex_;
  std::condition_variable loop_cv_;
  Clock& clock_;  // paces Loop, dates the snapshots
  // Written under loop_mutex_ (so the loop's wait sees it); read without it
  // between a sweep's kernels.
  std::atomic<bool> stop_requested_{false};
  bool sweep_soon_ GUARDED_BY(loop_mutex_) = false;  // SweepSoon asked, not yet begun
  std::thread loop_;  // used by Start/Stop only
};

}  // namespace slotd
