// StatsCollector: sweeps of kernels measured through fake cgroup trees (and
// the fake engine's stats), the agent's cores from a fake /proc/stat, and
// devices from fake meters: attribution of their processes, foreign usage,
// failing and stuck meters; the loop itself.
#include "common/units.h"
#include "stats/collector.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "testing/fake_clock.h"
#include "testing/fake_engine.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr char kAgent[] = "a1";

// cgroup v1 mounts as /proc/self/mountinfo shows them.
const std::string kMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n";
const char* const kControllers[] = {"cpu,cpuacct", "memory", "blkio", "pids"};

// The measures written into a fake container cgroup.
struct Measures {
  uint64_t cpu_ns = 0;
  uint64_t memory = 0;
  uint64_t limit = 0;
  uint64_t cache = 0;
  uint64_t pids = 0;
  uint64_t read = 0;
  uint64_t write = 0;
};

// A directory holding a fake proc/ and sys/fs/cgroup/ tree; removed at the end.
class CollectorHost : public TempTree {
 public:
  CollectorHost() : TempTree("collector_test") { Write("proc/self/mountinfo", kMountinfo); }

  // A process `pid` in cgroup `path` (every v1 hierarchy), with a status
  // file that has an NSpid line ending in `ns_pid` (none when 0).
  void AddProcess(int pid, const std::string& path, int ns_pid) const {
    const std::string dir = "proc/" + std::to_string(pid);
    Write(dir + "/cgroup", "8:pids:" + path + "\n7:blkio:" + path + "\n4:memory:" + path + "\n2:cpu,cpuacct:" + path +
                               "\n1:name=systemd:" + path + "\n");
    std::string status = "Name:\tworker\nPid:\t" + std::to_string(pid) + "\n";
    if (ns_pid > 0) status += "NSpid:\t" + std::to_string(pid) + (ns_pid != pid ? "\t" + std::to_string(ns_pid) : "") + "\n";
    Write(dir + "/status", status);
  }

  // The v1 cgroup files of container `id` (cgroupfs driver: /docker/<id>).
  void SetMeasures(const std::string& id, const Measures& m) const {
    const std::string at = "/docker/" + id;
    Write("sys/fs/cgroup/cpu,cpuacct" + at + "/cpuacct.usage", std::to_string(m.cpu_ns) + "\n");
    Write("sys/fs/cgroup/memory" + at + "/memory.usage_in_bytes", std::to_string(m.memory) + "\n");
    Write("sys/fs/cgroup/memory" + at + "/memory.limit_in_bytes", std::to_string(m.limit) + "\n");
    Write("sys/fs/cgroup/memory" + at + "/memory.stat", "cache 1\ntotal_cache " + std::to_string(m.cache) + "\n");
    Write("sys/fs/cgroup/pids" + at + "/pids.current", std::to_string(m.pids) + "\n");
    Write("sys/fs/cgroup/blkio" + at + "/blkio.throttle.io_service_bytes_recursive",
          "8:0 Read " + std::to_string(m.read) + "\n8:0 Write " + std::to_string(m.write) + "\n8:0 Total " +
              std::to_string(m.read + m.write) + "\nTotal " + std::to_string(m.read + m.write) + "\n");
  }

  // Removes container `id`'s cgroup directories, as the kernel does when it exits.
  void RemoveCgroup(const std::string& id) const {
    for (const char* controller : kControllers) Remove(std::string("sys/fs/cgroup/") + controller + "/docker/" + id);
  }
};

// A DeviceMeter whose readings the test sets, and which can be made to block.
class FakeMeter : public DeviceMeter {
 public:
  explicit FakeMeter(std::vector<std::string> devices) : devices_(std::move(devices)) {}

  std::string Plugin() const override { return "cuda"; }
  std::vector<std::string> Devices() const override { return devices_; }
  Result<DeviceReading> Measure(const std::string& id) override {
    std::unique_lock lock(mutex_);
    ++calls_;
    blocked_cv_.wait(lock, [this] { return !blocked_; });
    auto found = readings_.find(id);
    if (found == readings_.end()) return Status::NotFound("no reading for " + id);
    return found->second;
  }

  void Set(const std::string& id, Result<DeviceReading> reading) {
    std::lock_guard lock(mutex_);
    readings_.insert_or_assign(id, std::move(reading));
  }
  // While blocked, Measure waits (a wedged driver).
  void Block() {
    std::lock_guard lock(mutex_);
    blocked_ = true;
  }
  void Release() {
    {
      std::lock_guard lock(mutex_);
      blocked_ = false;
    }
    blocked_cv_.notify_all();
  }
  int calls() const {
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  const std::vector<std::string> devices_;
  mutable std::mutex mutex_;
  std::condition_variable blocked_cv_;
  std::map<std::string, Result<DeviceReading>> readings_;  // guarded by mutex_
  bool blocked_ = false;                                  // guarded by mutex_
  int calls_ = 0;                                         // guarded by mutex_
};

// Sends spdlog's default logger into a string while alive.
class LogCapture {
 public:
  LogCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text_);
    sink->set_pattern("%l %v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~LogCapture() { spdlog::set_default_logger(previous_); }
  // What was logged since the last call.
  std::string Take() {
    std::string taken = text_.str();
    text_.str("");
    return taken;
  }

 private:
  std::ostringstream text_;
  std::shared_ptr<spdlog::logger> previous_;
};

// How many times `needle` occurs in `text`.
int Count(const std::string& text, const std::string& needle) {
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

class CollectorTest : public ::testing::Test {
 protected:
  // One running container of the fake engine with a cgroup and a process.
  struct Container {
    std::string id;
    int pid = 0;
  };

  // A running container named `name` whose init process has a cgroup with `measures`.
  Container AddContainer(const std::string& name, const Measures& measures = {}) {
    Result<std::string> id = engine_.AddContainer(name, {});
    EXPECT_TRUE(id.ok()) << id.status().message();
    Container c{*id, engine_.Peek(*id)->pid};
    host_.AddProcess(c.pid, "/docker/" + c.id, 1);
    host_.SetMeasures(c.id, measures);
    return c;
  }

  // Makes `container` a target of kernel `kernel`, holding `gpus` of the cuda plugin.
  void AddTarget(const std::string& kernel, const Container& container, std::vector<std::string> gpus = {}) {
    StatsTarget target{kernel, container.id, {}};
    if (!gpus.empty()) target.devices["cuda"] = std::move(gpus);
    std::lock_guard lock(targets_mutex_);
    targets_.push_back(std::move(target));
  }
  void RemoveTarget(const std::string& kernel) {
    std::lock_guard lock(targets_mutex_);
    std::erase_if(targets_, [&](const StatsTarget& t) { return t.kernel_id == kernel; });
  }

  StatsCollector::Options Options() const {
    StatsCollector::Options options;
    options.agent_id = kAgent;
    options.root = host_.root();
    options.memory_share_bytes = 4 * kGiB;
    options.meter_deadline = std::chrono::seconds(30);  // only the stuck-meter tests expect an overrun
    return options;
  }

  std::unique_ptr<StatsCollector> Make(StatsCollector::Options options,
                                       std::vector<std::shared_ptr<DeviceMeter>> meters = {},
                                       Clock& clock = Clock::Real()) {
    return std::make_unique<StatsCollector>(
        std::move(options),
        [this] {
          std::lock_guard lock(targets_mutex_);
          return targets_;
        },
        engine_, std::move(meters), clock);
  }

  CollectorHost host_;
  FakeEngine engine_;
  std::mutex targets_mutex_;
  std::vector<StatsTarget> targets_;  // guarded by targets_mutex_
};

TEST_F(CollectorTest, LatestBeforeAnySweepNamesTheAgentOnly) {
  StatsCollector::Options options = Options();
  options.stats_type = StatsType::kDocker;
  options.interval = milliseconds(250);
  auto collector = Make(options);
  std::shared_ptr<const StatsSnapshot> latest = collector->Latest();
  ASSERT_NE(latest, nullptr);
  EXPECT_EQ(latest->agent_id, kAgent);
  EXPECT_EQ(latest->stats_type, "docker");
  EXPECT_EQ(latest->interval_ms, 250);
  EXPECT_EQ(latest->collected_at_ms, 0);
  EXPECT_EQ(latest->sweeps_total, 0u);
  EXPECT_TRUE(latest->kernels.empty());
}

TEST_F(CollectorTest, ReadsEveryCgroupMeasureAndCpuPercentOverTwoSweeps) {
  const Container a = AddContainer("ka", {1'000'000'000, 64 * kMiB, 256 * kMiB, 8 * kMiB, 5, 4096, 1024});
  const Container b = AddContainer("kb", {2'000'000'000, 32 * kMiB, 0, 0, 1, 0, 0});
  AddTarget("k-a", a);
  AddTarget("k-b", b);
  auto collector = Make(Options());

  const auto t0 = steady_clock::now();
  std::shared_ptr<const StatsSnapshot> first = collector->SweepOnce();
  const auto t1 = steady_clock::now();
  EXPECT_EQ(collector->Latest(), first);
  EXPECT_EQ(first->sweeps_total, 1u);
  EXPECT_EQ(first->skipped_samples_total, 0u);
  EXPECT_GT(first->collected_at_ms, 0);
  ASSERT_EQ(first->kernels.size(), 2u);
  const KernelStats& ka = first->kernels.at("k-a");
  EXPECT_EQ(ka.container_id, a.id);
  EXPECT_GT(ka.sampled_at_ms, 0);
  EXPECT_EQ(ka.sample.cpu_usage_ns, 1'000'000'000u);
  EXPECT_EQ(ka.sample.memory_used_bytes, 64 * kMiB);
  EXPECT_EQ(ka.sample.memory_limit_bytes, 256 * kMiB);
  EXPECT_EQ(ka.sample.memory_cache_bytes, 8 * kMiB);
  EXPECT_EQ(ka.sample.pids, 5u);
  EXPECT_EQ(ka.sample.io_read_bytes, 4096u);
  EXPECT_EQ(ka.sample.io_write_bytes, 1024u);
  EXPECT_FALSE(ka.cpu_percent.has_value());  // no previous sample
  EXPECT_EQ(first->kernels.at("k-b").sample.memory_limit_bytes, 0u);
  EXPECT_EQ(first->agent.memory_capacity_bytes, 4 * kGiB);
  EXPECT_EQ(first->agent.memory_used_bytes, 96 * kMiB);

  // a uses 50 ms of cpu between the two samples; b none.
  std::this_thread::sleep_for(milliseconds(20));
  host_.SetMeasures(a.id, {1'050'000'000, 64 * kMiB, 256 * kMiB, 8 * kMiB, 5, 4096, 1024});
  const auto t2 = steady_clock::now();
  std::shared_ptr<const StatsSnapshot> second = collector->SweepOnce();
  const auto t3 = steady_clock::now();
  EXPECT_EQ(second->sweeps_total, 2u);
  ASSERT_EQ(second->kernels.size(), 2u);
  const std::optional<double> percent = second->kernels.at("k-a").cpu_percent;
  ASSERT_TRUE(percent.has_value());
  // The wall time between the two samples lies between t2 - t1 and t3 - t0.
  const double shortest_ns = std::chrono::duration<double, std::nano>(t2 - t1).count();
  const double longest_ns = std::chrono::duration<double, std::nano>(t3 - t0).count();
  EXPECT_GE(*percent, 50e6 / longest_ns * 100 * 0.999);
  EXPECT_LE(*percent, 50e6 / shortest_ns * 100 * 1.001);
  ASSERT_TRUE(second->kernels.at("k-b").cpu_percent.has_value());
  EXPECT_EQ(*second->kernels.at("k-b").cpu_percent, 0.0);

  // The init pid is learnt once per container.
  collector->SweepOnce();
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kInspect), 2);
}

TEST_F(CollectorTest, AVanishedCgroupCostsOneSkippedSampleAndIsLocatedAfreshLater) {
  const Container a = AddContainer("ka", {1000, kMiB});
  const Container b = AddContainer("kb", {2000, 2 * kMiB});
  AddTarget("k-a", a);
  AddTarget("k-b", b);
  auto collector = Make(Options());
  ASSERT_EQ(collector->SweepOnce()->kernels.size(), 2u);

  host_.RemoveCgroup(a.id);
  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  EXPECT_EQ(snapshot->skipped_samples_total, 1u);
  ASSERT_EQ(snapshot->kernels.size(), 1u);
  EXPECT_EQ(snapshot->kernels.count("k-b"), 1u);
  EXPECT_EQ(snapshot->agent.memory_used_bytes, 2 * kMiB);
  // Its container still runs, so each sweep that cannot read it skips a sample.
  EXPECT_EQ(collector->SweepOnce()->skipped_samples_total, 2u);

  // The container comes back (restarted: a new init pid): found afresh.
  ASSERT_TRUE(engine_.Restart(a.id, std::chrono::seconds(1)).ok());
  const int new_pid = engine_.Peek(a.id)->pid;
  ASSERT_NE(new_pid, a.pid);
  host_.Remove("proc/" + std::to_string(a.pid));
  host_.AddProcess(new_pid, "/docker/" + a.id, 1);
  host_.SetMeasures(a.id, {500, 3 * kMiB});
  const int inspects = engine_.CallCount(FakeEngine::Method::kInspect);
  snapshot = collector->SweepOnce();
  EXPECT_EQ(snapshot->skipped_samples_total, 2u);
  ASSERT_EQ(snapshot->kernels.size(), 2u);
  EXPECT_EQ(snapshot->kernels.at("k-a").sample.memory_used_bytes, 3 * kMiB);
  EXPECT_FALSE(snapshot->kernels.at("k-a").cpu_percent.has_value());  // a new start: no previous sample
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kInspect), inspects + 1);
}

TEST_F(CollectorTest, AKernelWhoseContainerIsGoneIsSkippedUntilItLeavesTheTargets) {
  const Container a = AddContainer("ka", {1000, kMiB});
  const Container b = AddContainer("kb", {2000, kMiB});
  AddTarget("k-a", a);
  AddTarget("k-b", b);
  auto collector = Make(Options());
  collector->SweepOnce();

  ASSERT_TRUE(engine_.RemoveBehindBack(a.id).ok());
  host_.RemoveCgroup(a.id);
  EXPECT_EQ(collector->SweepOnce()->skipped_samples_total, 1u);
  // The agent has not learnt of its end yet: the engine says it is gone, so
  // the sweeps until then skip it without counting it again.
  for (int sweep = 0; sweep < 3; ++sweep) {
    std::shared_ptr<const StatsSnapshot> meanwhile = collector->SweepOnce();
    EXPECT_EQ(meanwhile->skipped_samples_total, 1u);
    EXPECT_EQ(meanwhile->kernels.count("k-a"), 0u);
  }
  RemoveTarget("k-a");
  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  EXPECT_EQ(snapshot->skipped_samples_total, 1u);
  ASSERT_EQ(snapshot->kernels.size(), 1u);
  EXPECT_EQ(snapshot->kernels.count("k-b"), 1u);
}

// An inspect can say a container runs just before its process ends: a
// process that is gone is a container that is gone, counted once.
TEST_F(CollectorTest, AContainerWhoseProcessEndedBeforeTheEngineSaysSoCostsOneSkippedSample) {
  const Container a = AddContainer("ka", {1000, kMiB});
  AddTarget("k-a", a);
  auto collector = Make(Options());
  ASSERT_EQ(collector->SweepOnce()->kernels.size(), 1u);

  host_.RemoveCgroup(a.id);
  host_.Remove("proc/" + std::to_string(a.pid));
  ASSERT_TRUE(engine_.Peek(a.id)->running);
  for (int sweep = 0; sweep < 3; ++sweep) {
    std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
    EXPECT_EQ(snapshot->skipped_samples_total, 1u) << "sweep " << sweep;
    EXPECT_TRUE(snapshot->kernels.empty());
  }
}

TEST_F(CollectorTest, AKernelLeavingTheTargetsDropsOutAndIsForgotten) {
  const Container a = AddContainer("ka", {1000, kMiB});
  const Container b = AddContainer("kb", {2000, kMiB});
  AddTarget("k-a", a);
  AddTarget("k-b", b);
  auto collector = Make(Options());
  collector->SweepOnce();
  RemoveTarget("k-a");
  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  ASSERT_EQ(snapshot->kernels.size(), 1u);
  EXPECT_EQ(snapshot->kernels.count("k-b"), 1u);
  EXPECT_EQ(snapshot->skipped_samples_total, 0u);

  // Back in the targets: located afresh, with no previous sample.
  AddTarget("k-a", a);
  snapshot = collector->SweepOnce();
  ASSERT_EQ(snapshot->kernels.size(), 2u);
  EXPECT_FALSE(snapshot->kernels.at("k-a").cpu_percent.has_value());
  EXPECT_TRUE(snapshot->kernels.at("k-b").cpu_percent.has_value());
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kInspect), 3);
}

TEST_F(CollectorTest, DockerStatsTypeReadsTheEngineEachSweep) {
  const Container a = AddContainer("ka");
  host_.RemoveCgroup(a.id);  // not read with stats-type docker
  AddTarget("k-a", a);
  ContainerStats stats{3'000'000'000, 100 * kMiB, 512 * kMiB, 10 * kMiB, 9, 700, 300};
  engine_.SetStats(a.id, stats);
  StatsCollector::Options options = Options();
  options.stats_type = StatsType::kDocker;
  auto collector = Make(options);

  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  EXPECT_EQ(snapshot->stats_type, "docker");
  ASSERT_EQ(snapshot->kernels.size(), 1u);
  const CgroupSample& s = snapshot->kernels.at("k-a").sample;
  EXPECT_EQ(s.cpu_usage_ns, 3'000'000'000u);
  EXPECT_EQ(s.memory_used_bytes, 100 * kMiB);
  EXPECT_EQ(s.memory_limit_bytes, 512 * kMiB);
  EXPECT_EQ(s.memory_cache_bytes, 10 * kMiB);
  EXPECT_EQ(s.pids, 9u);
  EXPECT_EQ(s.io_read_bytes, 700u);
  EXPECT_EQ(s.io_write_bytes, 300u);
  EXPECT_FALSE(snapshot->kernels.at("k-a").cpu_percent.has_value());

  stats.cpu_usage_ns += 10'000'000;
  engine_.SetStats(a.id, stats);
  snapshot = collector->SweepOnce();
  ASSERT_TRUE(snapshot->kernels.at("k-a").cpu_percent.has_value());
  EXPECT_GT(*snapshot->kernels.at("k-a").cpu_percent, 0.0);
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kStats), 2);
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kInspect), 0);

  ASSERT_TRUE(engine_.KillBehindBack(a.id, 137).ok());  // the engine refuses stats of a stopped container
  snapshot = collector->SweepOnce();
  EXPECT_TRUE(snapshot->kernels.empty());
  EXPECT_EQ(snapshot->skipped_samples_total, 1u);
}

TEST_F(CollectorTest, DockerStatsTypeAsksTheEngineForSeveralKernelsAtOnceAndKeepsEachOwnReading) {
  StatsCollector::Options options = Options();
  options.stats_type = StatsType::kDocker;
  constexpr int kKernels = 20;  // more than the calls made at once
  for (int i = 0; i < kKernels; ++i) {
    const Container c = AddContainer("kd" + std::to_string(i));
    AddTarget("k-" + std::to_string(i), c);
    engine_.SetStats(c.id, ContainerStats{0, static_cast<uint64_t>(i + 1) * kMiB, 0, 0, static_cast<uint64_t>(i), 0, 0});
  }
  ASSERT_TRUE(engine_.KillBehindBack(engine_.Peek("kd7")->id, 137).ok());  // one not running: skipped alone
  auto collector = Make(options);
  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kStats), kKernels);
  ASSERT_EQ(snapshot->kernels.size(), static_cast<size_t>(kKernels - 1));
  EXPECT_EQ(snapshot->skipped_samples_total, 1u);
  for (int i = 0; i < kKernels; ++i) {
    if (i == 7) continue;
    const CgroupSample& s = snapshot->kernels.at("k-" + std::to_string(i)).sample;
    EXPECT_EQ(s.memory_used_bytes, static_cast<uint64_t>(i + 1) * kMiB) << i;
    EXPECT_EQ(s.pids, static_cast<uint64_t>(i)) << i;
  }
}

TEST_F(CollectorTest, CoreUtilisationComesFromProcStatDeltas) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  host_.Write("proc/stat",
              "cpu  300 0 300 3000 30 0 0 0 0 0\n"
              "cpu0 100 0 100 1000 10 0 0 0 0 0\n"
              "cpu1 100 0 100 1000 10 0 0 0 0 0\n"
              "cpu2 100 0 100 1000 10 0 0 0 0 0\n"
              "intr 12345 0 0\nctxt 999\n");
  StatsCollector::Options options = Options();
  options.cores = {0, 2};
  auto collector = Make(options);

  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  ASSERT_EQ(snapshot->agent.cores.size(), 2u);
  EXPECT_EQ(snapshot->agent.cores[0].core, 0);
  EXPECT_EQ(snapshot->agent.cores[1].core, 2);
  EXPECT_FALSE(snapshot->agent.cores[0].utilization_percent.has_value());
  EXPECT_FALSE(snapshot->agent.cores[1].utilization_percent.has_value());

  // cpu0: 30 user + 10 system + 5 irq + 5 steal busy of 100 (40 idle, 10 iowait); cpu2: all idle.
  host_.Write("proc/stat",
              "cpu  400 0 400 3200 50 10 0 10 0 0\n"
              "cpu0 130 0 110 1040 20 5 0 5 7 0\n"
              "cpu1 170 0 190 1060 20 5 0 5 0 0\n"
              "cpu2 100 0 100 1100 10 0 0 0 0 0\n");
  snapshot = collector->SweepOnce();
  ASSERT_EQ(snapshot->agent.cores.size(), 2u);
  ASSERT_TRUE(snapshot->agent.cores[0].utilization_percent.has_value());
  EXPECT_DOUBLE_EQ(*snapshot->agent.cores[0].utilization_percent, 50.0);
  ASSERT_TRUE(snapshot->agent.cores[1].utilization_percent.has_value());
  EXPECT_DOUBLE_EQ(*snapshot->agent.cores[1].utilization_percent, 0.0);

  // cpu2 goes offline (missing), then returns: no figure until two readings again.
  host_.Write("proc/stat", "cpu0 230 0 110 1040 20 5 0 5 7 0\n");
  snapshot = collector->SweepOnce();
  EXPECT_DOUBLE_EQ(*snapshot->agent.cores[0].utilization_percent, 100.0);
  EXPECT_FALSE(snapshot->agent.cores[1].utilization_percent.has_value());
  host_.Write("proc/stat", "cpu0 230 0 110 1140 20 5 0 5 7 0\ncpu2 100 0 200 1100 10 0 0 0 0 0\n");
  snapshot = collector->SweepOnce();
  EXPECT_DOUBLE_EQ(*snapshot->agent.cores[0].utilization_percent, 0.0);
  EXPECT_FALSE(snapshot->agent.cores[1].utilization_percent.has_value());
}

// Processes of a GPU, each (host pid, bytes).
DeviceReading Gpu(std::vector<std::pair<int, uint64_t>> processes, uint64_t used = 0) {
  DeviceReading reading;
  reading.memory_used_bytes = used;
  reading.memory_total_bytes = 80 * kGiB;
  reading.utilization_percent = 40;
  reading.memory_utilization_percent = 12;
  for (const auto& [pid, bytes] : processes) reading.processes.push_back({static_cast<unsigned>(pid), bytes});
  return reading;
}

TEST_F(CollectorTest, AttributesGpuProcessesToKernelsAndReportsTheRestAsForeign) {
  const Container a = AddContainer("ka");
  const Container b = AddContainer("kb");
  const Container other = AddContainer("other-agents");  // not a target of this agent
  AddTarget("k-a", a, {"GPU-0"});
  AddTarget("k-b", b, {"GPU-1"});
  const int loose = 777;   // a process in no container
  const int vanished = 888;  // listed by the meter, gone from /proc
  const int second = 5555;  // a second process of kernel a
  host_.AddProcess(loose, "/user.slice/user-1000.slice/session-3.scope", loose);
  host_.AddProcess(second, "/docker/" + a.id, 17);  // a second process of kernel a
  auto meter = std::make_shared<FakeMeter>(std::vector<std::string>{"GPU-0", "GPU-1"});
  meter->Set("GPU-0", Gpu({{a.pid, 1 * kGiB},
                           {second, 512 * kMiB},
                           {other.pid, 2 * kGiB},
                           {loose, 512 * kMiB},
                           {vanished, 64 * kMiB},
                           {b.pid, 256 * kMiB}},
                          5 * kGiB));
  meter->Set("GPU-1", Gpu({}, 300 * kMiB));
  LogCapture log;
  auto collector = Make(Options(), {meter});

  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  EXPECT_TRUE(snapshot->attribution_unavailable.empty());
  ASSERT_EQ(snapshot->agent.devices.size(), 2u);
  const DeviceStats& gpu0 = snapshot->agent.devices[0];
  EXPECT_EQ(gpu0.plugin, "cuda");
  EXPECT_EQ(gpu0.device, "GPU-0");
  EXPECT_TRUE(gpu0.measured);
  EXPECT_TRUE(gpu0.error.empty());
  EXPECT_EQ(gpu0.memory_used_bytes, 5 * kGiB);
  EXPECT_EQ(gpu0.memory_total_bytes, 80 * kGiB);
  EXPECT_EQ(gpu0.utilization_percent, 40u);
  EXPECT_EQ(gpu0.memory_utilization_percent, 12u);
  ASSERT_EQ(gpu0.foreign.size(), 2u);
  EXPECT_EQ(gpu0.foreign[0].host_pid, static_cast<unsigned>(other.pid));
  EXPECT_EQ(gpu0.foreign[0].container_id, other.id);
  EXPECT_EQ(gpu0.foreign[0].memory_bytes, 2 * kGiB);
  EXPECT_EQ(gpu0.foreign[1].host_pid, static_cast<unsigned>(loose));
  EXPECT_EQ(gpu0.foreign[1].container_id, "");
  EXPECT_EQ(gpu0.foreign_memory_bytes, 2 * kGiB + 512 * kMiB);
  const DeviceStats& gpu1 = snapshot->agent.devices[1];
  EXPECT_TRUE(gpu1.measured);
  EXPECT_TRUE(gpu1.foreign.empty());

  // Kernel a: its two processes on its GPU.
  const KernelStats& ka = snapshot->kernels.at("k-a");
  ASSERT_EQ(ka.devices.size(), 1u);
  EXPECT_EQ(ka.devices[0].plugin, "cuda");
  EXPECT_EQ(ka.devices[0].device, "GPU-0");
  EXPECT_EQ(ka.devices[0].memory_used_bytes, 1 * kGiB + 512 * kMiB);
  ASSERT_EQ(ka.devices[0].processes.size(), 2u);
  EXPECT_EQ(ka.devices[0].processes[0].host_pid, static_cast<unsigned>(a.pid));
  EXPECT_EQ(ka.devices[0].processes[0].kernel_pid, 1);
  EXPECT_EQ(ka.devices[0].processes[0].memory_bytes, 1 * kGiB);
  EXPECT_EQ(ka.devices[0].processes[1].kernel_pid, 17);
  // Kernel b: its own process on a GPU it does not hold is still its own; its
  // idle GPU has an entry too.
  const KernelStats& kb = snapshot->kernels.at("k-b");
  ASSERT_EQ(kb.devices.size(), 2u);
  EXPECT_EQ(kb.devices[0].device, "GPU-0");
  EXPECT_EQ(kb.devices[0].memory_used_bytes, 256 * kMiB);
  ASSERT_EQ(kb.devices[0].processes.size(), 1u);
  EXPECT_EQ(kb.devices[0].processes[0].host_pid, static_cast<unsigned>(b.pid));
  EXPECT_EQ(kb.devices[1].device, "GPU-1");
  EXPECT_EQ(kb.devices[1].memory_used_bytes, 0u);
  EXPECT_TRUE(kb.devices[1].processes.empty());

  // One warning per foreign process while it stays.
  std::string logged = log.Take();
  EXPECT_EQ(Count(logged, "reported as foreign usage"), 2) << logged;
  EXPECT_NE(logged.find("warning device GPU-0: process " + std::to_string(other.pid) + " (container " +
                        other.id.substr(0, 12) + ") uses 2g and is not a kernel of agent a1; reported as "
                        "foreign usage"),
            std::string::npos)
      << logged;
  EXPECT_NE(logged.find("warning device GPU-0: process 777 (no container) uses 512m and is not a kernel of "
                        "agent a1; reported as foreign usage"),
            std::string::npos)
      << logged;
  collector->SweepOnce();
  EXPECT_EQ(Count(log.Take(), "foreign usage"), 0);

  // The loose process leaves, then returns: warned again.
  meter->Set("GPU-0", Gpu({{a.pid, 1 * kGiB}, {other.pid, 2 * kGiB}}));
  snapshot = collector->SweepOnce();
  EXPECT_EQ(snapshot->agent.devices[0].foreign.size(), 1u);
  EXPECT_EQ(Count(log.Take(), "foreign usage"), 0);
  meter->Set("GPU-0", Gpu({{a.pid, 1 * kGiB}, {other.pid, 2 * kGiB}, {loose, 512 * kMiB}}));
  collector->SweepOnce();
  logged = log.Take();
  EXPECT_EQ(Count(logged, "foreign usage"), 1) << logged;
  EXPECT_NE(logged.find("process 777 (no container)"), std::string::npos) << logged;
}

TEST_F(CollectorTest, WithoutNSpidNothingIsAttributedAndNothingIsForeign) {
  const Container a = AddContainer("ka");
  host_.AddProcess(a.pid, "/docker/" + a.id, 0);  // a kernel before Linux 4.1: no NSpid line
  AddTarget("k-a", a, {"GPU-0"});
  host_.AddProcess(777, "/user.slice", 0);
  auto meter = std::make_shared<FakeMeter>(std::vector<std::string>{"GPU-0"});
  meter->Set("GPU-0", Gpu({{777, kGiB}, {a.pid, kGiB}}, 2 * kGiB));
  LogCapture log;
  auto collector = Make(Options(), {meter});

  for (int sweep = 1; sweep <= 2; ++sweep) {
    std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
    EXPECT_NE(snapshot->attribution_unavailable.find("per-process GPU attribution is unavailable: "),
              std::string::npos)
        << snapshot->attribution_unavailable;
    EXPECT_NE(snapshot->attribution_unavailable.find("NSpid"), std::string::npos);
    ASSERT_EQ(snapshot->agent.devices.size(), 1u);
    EXPECT_TRUE(snapshot->agent.devices[0].measured);
    EXPECT_EQ(snapshot->agent.devices[0].memory_used_bytes, 2 * kGiB);
    EXPECT_TRUE(snapshot->agent.devices[0].foreign.empty());
    EXPECT_EQ(snapshot->agent.devices[0].foreign_memory_bytes, 0u);
    EXPECT_TRUE(snapshot->kernels.at("k-a").devices.empty());
  }
  const std::string logged = log.Take();
  EXPECT_EQ(Count(logged, "per-process GPU attribution is unavailable"), 1) << logged;
  EXPECT_EQ(Count(logged, "foreign usage"), 0) << logged;
}

TEST_F(CollectorTest, AFailedMeasureMarksThatDeviceUnmeasured) {
  auto meter = std::make_shared<FakeMeter>(std::vector<std::string>{"GPU-0", "GPU-1"});
  meter->Set("GPU-0", Gpu({}, kGiB));
  meter->Set("GPU-1", Status::Unavailable("NVML: GPU-1: GPU is lost"));
  auto collector = Make(Options(), {meter});
  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  ASSERT_EQ(snapshot->agent.devices.size(), 2u);
  EXPECT_TRUE(snapshot->agent.devices[0].measured);
  EXPECT_FALSE(snapshot->agent.devices[1].measured);
  EXPECT_EQ(snapshot->agent.devices[1].error, "NVML: GPU-1: GPU is lost");
  EXPECT_EQ(snapshot->agent.devices[1].memory_total_bytes, 0u);
  EXPECT_EQ(snapshot->skipped_samples_total, 1u);
}

TEST_F(CollectorTest, DevicesWithoutAMeterAreListedUnmeasuredAfterTheMeteredOnes) {
  auto meter = std::make_shared<FakeMeter>(std::vector<std::string>{"GPU-0"});
  meter->Set("GPU-0", Gpu({}, kGiB));
  StatsCollector::Options options = Options();
  options.unmetered_devices["mock"] = {"mock0", "mock2"};
  auto collector = Make(options, {meter});
  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  ASSERT_EQ(snapshot->agent.devices.size(), 3u);
  EXPECT_EQ(snapshot->agent.devices[0].device, "GPU-0");
  EXPECT_TRUE(snapshot->agent.devices[0].measured);
  for (int i : {1, 2}) {
    const DeviceStats& device = snapshot->agent.devices[i];
    EXPECT_EQ(device.plugin, "mock");
    EXPECT_FALSE(device.measured);
    EXPECT_EQ(device.error, "");
  }
  EXPECT_EQ(snapshot->agent.devices[2].device, "mock2");
  EXPECT_EQ(snapshot->skipped_samples_total, 0u);
}

TEST_F(CollectorTest, AStuckMeterIsSkippedAtOnceUntilItsCallReturns) {
  const Container a = AddContainer("ka", {1000, kMiB});
  AddTarget("k-a", a, {"GPU-0"});
  auto meter = std::make_shared<FakeMeter>(std::vector<std::string>{"GPU-0", "GPU-1"});
  meter->Set("GPU-0", Gpu({{a.pid, kGiB}}, kGiB));
  meter->Set("GPU-1", Gpu({}));
  meter->Block();
  StatsCollector::Options options = Options();
  options.meter_deadline = milliseconds(50);
  auto collector = Make(options, {meter});

  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  ASSERT_EQ(snapshot->agent.devices.size(), 2u);
  for (const DeviceStats& device : snapshot->agent.devices) {
    EXPECT_FALSE(device.measured);
    EXPECT_EQ(device.error, "cuda meter did not answer within 50 ms; skipped this sample");
  }
  EXPECT_EQ(snapshot->kernels.size(), 1u);  // the kernel's own sample is unaffected
  EXPECT_TRUE(snapshot->kernels.at("k-a").devices.empty());
  EXPECT_EQ(snapshot->skipped_samples_total, 2u);

  // Still stuck: skipped without a new call.
  snapshot = collector->SweepOnce();
  for (const DeviceStats& device : snapshot->agent.devices) {
    EXPECT_FALSE(device.measured);
    EXPECT_EQ(device.error, "cuda meter is still busy with a call that overran its 50 ms deadline; skipped this sample");
  }
  EXPECT_EQ(meter->calls(), 1);

  // The call returns: a later sweep measures again.
  meter->Release();
  const auto limit = steady_clock::now() + std::chrono::seconds(20);
  do {
    snapshot = collector->SweepOnce();
  } while (!snapshot->agent.devices[0].measured && steady_clock::now() < limit);
  ASSERT_TRUE(snapshot->agent.devices[0].measured) << snapshot->agent.devices[0].error;
  EXPECT_TRUE(snapshot->agent.devices[1].measured);
  ASSERT_EQ(snapshot->kernels.at("k-a").devices.size(), 1u);
  EXPECT_EQ(snapshot->kernels.at("k-a").devices[0].memory_used_bytes, kGiB);
}

TEST_F(CollectorTest, DestroyingTheCollectorDoesNotWaitForAStuckMeter) {
  auto meter = std::make_shared<FakeMeter>(std::vector<std::string>{"GPU-0"});
  meter->Set("GPU-0", Gpu({}));
  meter->Block();
  StatsCollector::Options options = Options();
  options.meter_deadline = milliseconds(20);
  auto collector = Make(options, {meter});
  EXPECT_FALSE(collector->SweepOnce()->agent.devices[0].measured);
  collector.reset();  // must return while the call is stuck

  // Once the call returns, the meter's thread ends and lets go of the meter.
  meter->Release();
  const auto limit = steady_clock::now() + std::chrono::seconds(20);
  while (meter.use_count() > 1 && steady_clock::now() < limit) std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(meter.use_count(), 1);
}

// Polls `collector` until its latest snapshot has at least `sweeps` sweeps (or 20 s pass).
std::shared_ptr<const StatsSnapshot> WaitForSweeps(const StatsCollector& collector, uint64_t sweeps) {
  const auto limit = steady_clock::now() + std::chrono::seconds(20);
  std::shared_ptr<const StatsSnapshot> latest = collector.Latest();
  while (latest->sweeps_total < sweeps && steady_clock::now() < limit) {
    std::this_thread::sleep_for(milliseconds(5));
    latest = collector.Latest();
  }
  return latest;
}

TEST_F(CollectorTest, TheLoopSweepsEveryIntervalAndStops) {
  const Container a = AddContainer("ka", {1000, kMiB});
  AddTarget("k-a", a);
  StatsCollector::Options options = Options();
  options.interval = milliseconds(10);
  auto collector = Make(options);
  collector->Start();
  std::shared_ptr<const StatsSnapshot> latest = WaitForSweeps(*collector, 2);
  collector->Stop();
  EXPECT_GE(latest->sweeps_total, 2u);
  EXPECT_EQ(latest->kernels.size(), 1u);
  EXPECT_TRUE(latest->kernels.at("k-a").cpu_percent.has_value());

  // Stopped: Latest stays, SweepOnce works again.
  const uint64_t swept = collector->Latest()->sweeps_total;
  EXPECT_EQ(collector->SweepOnce()->sweeps_total, swept + 1);
}

TEST_F(CollectorTest, StopDoesNotWaitForTheNextInterval) {
  StatsCollector::Options options = Options();
  options.interval = std::chrono::hours(1);
  auto collector = Make(options);
  collector->Start();
  EXPECT_EQ(WaitForSweeps(*collector, 1)->sweeps_total, 1u);  // the first sweep runs at once
  collector->Stop();  // would hang for an hour if it waited
  collector->Start();
  EXPECT_EQ(WaitForSweeps(*collector, 2)->sweeps_total, 2u);
}

// The interval is waited on the collector's clock: with a clock that moves
// only when told, each move of one interval gives exactly one more sweep.
TEST_F(CollectorTest, TheLoopSweepsOncePerIntervalOfItsClock) {
  FakeClock clock;
  StatsCollector::Options options = Options();
  options.interval = std::chrono::hours(1);
  auto collector = Make(options, {}, clock);
  const Clock::TimePoint start = clock.Now();
  collector->Start();
  EXPECT_EQ(WaitForSweeps(*collector, 1)->sweeps_total, 1u);  // the first sweep runs at once
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(clock.WaitForWaiterUntil(start + i * options.interval)) << "interval " << i;
    EXPECT_EQ(collector->Latest()->sweeps_total, static_cast<uint64_t>(i));
    clock.Advance(options.interval);
    EXPECT_EQ(WaitForSweeps(*collector, i + 1)->sweeps_total, static_cast<uint64_t>(i + 1));
  }
  collector->Stop();
}

// A snapshot is dated by the collector's clock: its wall time, to the millisecond.
TEST_F(CollectorTest, SnapshotsAndSamplesAreDatedByItsClock) {
  const Container a = AddContainer("ka", {1'000'000'000, 64 * kMiB, 256 * kMiB, 8 * kMiB, 5, 4096, 1024});
  AddTarget("k-a", a);
  FakeClock clock;
  clock.Advance(std::chrono::milliseconds(1234));
  auto collector = Make(Options(), {}, clock);
  std::shared_ptr<const StatsSnapshot> snapshot = collector->SweepOnce();
  EXPECT_EQ(snapshot->collected_at_ms, clock.UnixMillis());
  EXPECT_EQ(snapshot->collected_at_ms % 1000, 234);
  EXPECT_EQ(snapshot->kernels.at("k-a").sampled_at_ms, clock.UnixMillis());
}

}  // namespace
}  // namespace slotd
