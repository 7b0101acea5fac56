// RenderMetrics: the /metrics exposition of a hand-built stats snapshot —
// which series exist, their labels and values in base units, that a kernel's
// series exist only while the snapshot has it, and (where promtool is
// installed) that `promtool check metrics` finds nothing to say.
#include "api/metrics.h"
#include "common/units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace slotd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;


// One sample line of the exposition.
struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// Parses the sample lines of `text` (name{k="v",...} value); comment lines
// are skipped. Label values here never hold a quote or a backslash.
std::vector<Sample> ParseSamples(const std::string& text) {
  std::vector<Sample> samples;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    Sample sample;
    size_t end_of_name = line.find_first_of("{ ");
    sample.name = line.substr(0, end_of_name);
    size_t pos = end_of_name;
    if (line[pos] == '{') {
      size_t close = line.find('}', pos);
      std::string labels = line.substr(pos + 1, close - pos - 1);
      size_t at = 0;
      while (at < labels.size()) {
        size_t eq = labels.find('=', at);
        size_t value_end = labels.find('"', eq + 2);
        sample.labels[labels.substr(at, eq - at)] = labels.substr(eq + 2, value_end - eq - 2);
        at = value_end + 1;
        if (at < labels.size() && labels[at] == ',') ++at;
      }
      pos = close + 1;
    }
    sample.value = std::stod(line.substr(pos + 1));
    samples.push_back(std::move(sample));
  }
  return samples;
}

// The samples named `name`.
std::vector<Sample> Named(const std::vector<Sample>& samples, const std::string& name) {
  std::vector<Sample> out;
  for (const Sample& s : samples)
    if (s.name == name) out.push_back(s);
  return out;
}

// The value of the one sample named `name` whose labels include `labels`; NaN
// (and a test failure) when there is not exactly one.
double ValueOf(const std::vector<Sample>& samples, const std::string& name,
               const std::map<std::string, std::string>& labels = {}) {
  std::vector<double> found;
  for (const Sample& s : Named(samples, name)) {
    bool match = true;
    for (const auto& [key, value] : labels) match = match && s.labels.count(key) && s.labels.at(key) == value;
    if (match) found.push_back(s.value);
  }
  EXPECT_EQ(found.size(), 1u) << name;
  return found.size() == 1 ? found[0] : std::nan("");
}

// A kernel with cpu, memory, pids and I/O, using `gpu_bytes` of GPU-a (none when 0).
KernelStats MeasuredKernel(const std::string& id, std::optional<double> cpu_percent, uint64_t gpu_bytes) {
  KernelStats k;
  k.kernel_id = id;
  k.container_id = std::string(64, 'c');
  k.sampled_at_ms = 1'700'000'000'000;
  k.sample.cpu_usage_ns = 2'500'000'000;
  k.sample.memory_used_bytes = 3 * kGiB;
  k.sample.memory_limit_bytes = 4 * kGiB;
  k.sample.memory_cache_bytes = kGiB;
  k.sample.pids = 7;
  k.sample.io_read_bytes = 1000;
  k.sample.io_write_bytes = 2000;
  k.cpu_percent = cpu_percent;
  if (gpu_bytes > 0) {
    KernelDeviceUse use;
    use.plugin = "cuda";
    use.device = "GPU-a";
    use.memory_used_bytes = gpu_bytes;
    use.processes.push_back({1234, 4321, gpu_bytes});
    k.devices.push_back(use);
  }
  return k;
}

// Agent a1 after a sweep: kernels k1 (a GPU) and k2 (no limit, first sample),
// cores 0 (measured) and 1 (first sweep), GPU-a measured with one foreign
// process, mock0 not measured.
StatsSnapshot Snapshot() {
  StatsSnapshot s;
  s.agent_id = "a1";
  s.stats_type = "cgroup";
  s.collected_at_ms = 1'700'000'000'500;
  s.interval_ms = 1000;
  s.sweep_us = 2500;
  s.sweeps_total = 12;
  s.skipped_samples_total = 3;
  s.kernels["k1"] = MeasuredKernel("k1", 150.0, 2 * kGiB);
  KernelStats k2 = MeasuredKernel("k2", std::nullopt, 0);
  k2.sample.memory_limit_bytes = 0;
  s.kernels["k2"] = k2;
  s.agent.cores = {{0, 25.0}, {1, std::nullopt}};
  s.agent.memory_capacity_bytes = 8 * kGiB;
  s.agent.memory_used_bytes = 6 * kGiB;
  DeviceStats gpu;
  gpu.plugin = "cuda";
  gpu.device = "GPU-a";
  gpu.measured = true;
  gpu.memory_used_bytes = 3 * kGiB;
  gpu.memory_total_bytes = 80 * kGiB;
  gpu.utilization_percent = 40;
  gpu.memory_utilization_percent = 10;
  gpu.foreign.push_back({999, kGiB, std::string(64, 'f')});
  gpu.foreign_memory_bytes = kGiB;
  DeviceStats mock;
  mock.plugin = "mock";
  mock.device = "mock0";
  s.agent.devices = {gpu, mock};
  return s;
}

MetricsFacts Facts() {
  MetricsFacts facts;
  facts.kernels_by_state = {{"PREPARING", 0}, {"RUNNING", 2}, {"TERMINATING", 0}, {"TERMINATED", 1}, {"ERROR", 0}};
  facts.engine_reachable = true;
  return facts;
}

TEST(MetricsTest, EverySeriesHasTheAgentIdAndItsOwnLabels) {
  std::vector<Sample> samples = ParseSamples(RenderMetrics(Snapshot(), Facts()));
  ASSERT_FALSE(samples.empty());
  for (const Sample& s : samples) {
    EXPECT_EQ(s.labels.count("agent_id") ? s.labels.at("agent_id") : "", "a1") << s.name;
    const bool kernel = s.name.rfind("slotd_kernel_", 0) == 0;
    const bool device = s.name.rfind("slotd_device_", 0) == 0 || s.name == "slotd_kernel_device_memory_used_bytes" ||
                        s.name == "slotd_kernel_device_processes";
    EXPECT_EQ(s.labels.count("kernel_id"), kernel ? 1u : 0u) << s.name;
    EXPECT_EQ(s.labels.count("plugin"), device ? 1u : 0u) << s.name;
    EXPECT_EQ(s.labels.count("device"), device ? 1u : 0u) << s.name;
    EXPECT_EQ(s.labels.count("core"), s.name == "slotd_agent_core_usage_ratio" ? 1u : 0u) << s.name;
  }
}

TEST(MetricsTest, KernelSeriesInBaseUnits) {
  std::vector<Sample> samples = ParseSamples(RenderMetrics(Snapshot(), Facts()));
  const std::map<std::string, std::string> k1 = {{"kernel_id", "k1"}};
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_cpu_seconds_total", k1), 2.5);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_cpu_usage_ratio", k1), 1.5);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_memory_used_bytes", k1), 3.0 * kGiB);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_memory_limit_bytes", k1), 4.0 * kGiB);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_memory_cache_bytes", k1), 1.0 * kGiB);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_pids", k1), 7);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_io_read_bytes_total", k1), 1000);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_io_write_bytes_total", k1), 2000);
  EXPECT_DOUBLE_EQ(
      ValueOf(samples, "slotd_kernel_device_memory_used_bytes", {{"kernel_id", "k1"}, {"plugin", "cuda"}, {"device", "GPU-a"}}),
      2.0 * kGiB);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_device_processes", k1), 1);

  // k2: first sample (no cpu ratio), no memory limit, no device.
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernel_cpu_seconds_total", {{"kernel_id", "k2"}}), 2.5);
  EXPECT_EQ(Named(samples, "slotd_kernel_cpu_usage_ratio").size(), 1u);
  EXPECT_EQ(Named(samples, "slotd_kernel_memory_limit_bytes").size(), 1u);
  EXPECT_EQ(Named(samples, "slotd_kernel_device_memory_used_bytes").size(), 1u);
}

TEST(MetricsTest, AgentDeviceAndStatsSeries) {
  std::vector<Sample> samples = ParseSamples(RenderMetrics(Snapshot(), Facts()));
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_agent_kernels"), 2);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_agent_memory_capacity_bytes"), 8.0 * kGiB);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_agent_memory_used_bytes"), 6.0 * kGiB);
  // Core 1 has no figure yet (first sweep): no series rather than a made-up 0.
  std::vector<Sample> cores = Named(samples, "slotd_agent_core_usage_ratio");
  ASSERT_EQ(cores.size(), 1u);
  EXPECT_EQ(cores[0].labels.at("core"), "0");
  EXPECT_DOUBLE_EQ(cores[0].value, 0.25);

  const std::map<std::string, std::string> gpu = {{"plugin", "cuda"}, {"device", "GPU-a"}};
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_measured", gpu), 1);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_memory_used_bytes", gpu), 3.0 * kGiB);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_memory_total_bytes", gpu), 80.0 * kGiB);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_utilization_ratio", gpu), 0.4);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_memory_utilization_ratio", gpu), 0.1);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_foreign_memory_bytes", gpu), 1.0 * kGiB);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_foreign_processes", gpu), 1);
  // mock0 is not measured: only the 0 of slotd_device_measured.
  const std::map<std::string, std::string> mock = {{"plugin", "mock"}, {"device", "mock0"}};
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_measured", mock), 0);
  for (const Sample& s : samples) {
    if (s.name == "slotd_device_measured") continue;
    EXPECT_NE(s.labels.count("device") ? s.labels.at("device") : "", "mock0") << s.name;
  }

  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_sweeps_total"), 12);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_skipped_samples_total"), 3);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_sweep_duration_seconds"), 0.0025);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_interval_seconds"), 1);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_last_sweep_timestamp_seconds"), 1'700'000'000.5);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_attribution_available"), 1);

  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_engine_reachable"), 1);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernels", {{"state", "RUNNING"}}), 2);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_kernels", {{"state", "TERMINATED"}}), 1);
  EXPECT_EQ(Named(samples, "slotd_kernels").size(), 5u);
}

// slotd_build_info is one series of value 1 whose labels are the facts' build.
TEST(MetricsTest, BuildInfoCarriesVersionCommitAndLabelFormat) {
  MetricsFacts facts = Facts();
  facts.build = {"1.2.3", "abc1234-dirty", 7};
  std::vector<Sample> samples = ParseSamples(RenderMetrics(Snapshot(), facts));
  std::vector<Sample> info = Named(samples, "slotd_build_info");
  ASSERT_EQ(info.size(), 1u);
  EXPECT_DOUBLE_EQ(info[0].value, 1);
  EXPECT_EQ(info[0].labels.at("version"), "1.2.3");
  EXPECT_EQ(info[0].labels.at("commit"), "abc1234-dirty");
  EXPECT_EQ(info[0].labels.at("label_format"), "7");
  EXPECT_EQ(info[0].labels.at("agent_id"), "a1");
}

// A kernel has series only while the snapshot has it: nothing is remembered
// from an earlier scrape.
TEST(MetricsTest, KernelSeriesOnlyForKernelsInTheSnapshot) {
  StatsSnapshot snapshot = Snapshot();
  std::vector<Sample> before = ParseSamples(RenderMetrics(snapshot, Facts()));
  snapshot.kernels.erase("k1");
  std::vector<Sample> after = ParseSamples(RenderMetrics(snapshot, Facts()));

  std::set<std::string> kernels_before, kernels_after;
  for (const Sample& s : before)
    if (s.labels.count("kernel_id")) kernels_before.insert(s.labels.at("kernel_id"));
  for (const Sample& s : after)
    if (s.labels.count("kernel_id")) kernels_after.insert(s.labels.at("kernel_id"));
  EXPECT_EQ(kernels_before, (std::set<std::string>{"k1", "k2"}));
  EXPECT_EQ(kernels_after, (std::set<std::string>{"k2"}));
  EXPECT_TRUE(Named(after, "slotd_kernel_device_memory_used_bytes").empty());
  EXPECT_DOUBLE_EQ(ValueOf(after, "slotd_agent_kernels"), 1);
}

// Before the first sweep: the agent's slice and counters, nothing measured.
// Without attribution no process is called foreign, so no foreign series.
TEST(MetricsTest, BeforeTheFirstSweepAndWithoutAttribution) {
  StatsSnapshot empty;
  empty.agent_id = "a1";
  empty.stats_type = "cgroup";
  empty.interval_ms = 250;
  empty.agent.cores = {{0, std::nullopt}};
  empty.agent.memory_capacity_bytes = kGiB;
  std::vector<Sample> samples = ParseSamples(RenderMetrics(empty, Facts()));
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_sweeps_total"), 0);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_interval_seconds"), 0.25);
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_agent_kernels"), 0);
  EXPECT_TRUE(Named(samples, "slotd_stats_sweep_duration_seconds").empty());
  EXPECT_TRUE(Named(samples, "slotd_stats_last_sweep_timestamp_seconds").empty());
  EXPECT_TRUE(Named(samples, "slotd_stats_attribution_available").empty());
  EXPECT_TRUE(Named(samples, "slotd_agent_core_usage_ratio").empty());

  StatsSnapshot blind = Snapshot();
  blind.attribution_unavailable = "no NSpid in /proc/1/status";
  blind.agent.devices[0].foreign.clear();
  blind.agent.devices[0].foreign_memory_bytes = 0;
  samples = ParseSamples(RenderMetrics(blind, Facts()));
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_stats_attribution_available"), 0);
  EXPECT_TRUE(Named(samples, "slotd_device_foreign_memory_bytes").empty());
  EXPECT_TRUE(Named(samples, "slotd_device_foreign_processes").empty());
  EXPECT_DOUBLE_EQ(ValueOf(samples, "slotd_device_memory_used_bytes", {{"device", "GPU-a"}}), 3.0 * kGiB);
}

// Every family has HELP and TYPE; counters end in _total.
TEST(MetricsTest, EveryFamilyHasHelpAndType) {
  const std::string text = RenderMetrics(Snapshot(), Facts());
  std::set<std::string> names;
  for (const Sample& s : ParseSamples(text)) names.insert(s.name);
  for (const std::string& name : names) {
    EXPECT_THAT(text, HasSubstr("# HELP " + name + " ")) << name;
    const bool counter = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
    EXPECT_THAT(text, HasSubstr("# TYPE " + name + (counter ? " counter" : " gauge"))) << name;
  }
}

// The path of `program` on $PATH; empty when it is not there.
std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

// `promtool check metrics` (lint included) accepts the exposition without a word.
TEST(MetricsTest, PromtoolFindsNothingToSay) {
  const std::string promtool = FindOnPath("promtool");
  if (promtool.empty()) GTEST_SKIP() << "promtool is not installed (Debian package prometheus; scripts/setup)";
  char templ[] = "/tmp/slotd-metrics-XXXXXX";
  int fd = ::mkstemp(templ);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(templ) << RenderMetrics(Snapshot(), Facts());
  const std::string command = promtool + " check metrics < " + templ + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  int status = ::pclose(pipe);
  ::unlink(templ);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_EQ(output, "");
}

}  // namespace
}  // namespace slotd
