// What the agent says of a kernel's cgroup, checked against the cgroup files
// themselves, read here without the agent's reader: the stats (CPU time,
// memory, page cache, the memory limit, pids), a shared kernel's quota and
// cores as its pool moves, and the devices a kernel can reach. The files are
// found the way an operator would: the container's first pid, its
// /proc/<pid>/cgroup line, and /sys/fs/cgroup. On a cgroup v2 host (scripts/test
// --vm) the v2 names are read (cpu.stat, memory.current, memory.max, cpu.max,
// cpuset.cpus.effective), on a v1 host the v1 ones, so each test holds on both.
#include <sys/vfs.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "common/units.h"
#include "integration/harness.h"
#include "testing/eventually.h"

namespace slotd::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr long kCgroup2Magic = 0x63677270;  // CGROUP2_SUPER_MAGIC

// Whether /sys/fs/cgroup is the unified (v2) hierarchy.
bool UnifiedHost() {
  struct statfs fs{};
  return ::statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == kCgroup2Magic;
}

// The directory of the cgroup that process `pid` is in: on v2, the path of
// its "0::" line under /sys/fs/cgroup; on v1, the path of the line naming
// `v1_controller` under /sys/fs/cgroup/<v1_controller>. Empty when not found.
std::string CgroupDirOf(pid_t pid, const std::string& v1_controller) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  const bool unified = UnifiedHost();
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (unified && line.rfind("0::", 0) == 0) return "/sys/fs/cgroup" + path;
    if (unified) continue;
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');)
      if (c == v1_controller) return "/sys/fs/cgroup/" + v1_controller + path;
  }
  return "";
}

// Kernel `id`'s first process, as the engine says.
pid_t PidOf(const AgentProcess& agent, const std::string& id) {
  const json k = agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200);
  Result<ContainerInfo> info = Engine().Inspect(k["container_id"]);
  EXPECT_TRUE(info.ok()) << info.status().message();
  return info.ok() ? info->pid : -1;
}

// The file of process `pid`'s cgroup named `v2_name` on a v2 host and
// `v1_name` in the `v1_controller` hierarchy on a v1 host, without its last
// newline; "(unreadable: PATH)" when it cannot be read.
std::string CgroupFile(pid_t pid, const std::string& v1_controller, const std::string& v1_name,
                       const std::string& v2_name) {
  const std::string dir = CgroupDirOf(pid, v1_controller);
  const std::string path = dir + "/" + (UnifiedHost() ? v2_name : v1_name);
  std::ifstream in(path);
  if (dir.empty() || !in) return "(unreadable: " + path + ")";
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// The number after `key` and a space on a line of a flat-keyed file's text.
uint64_t KeyedValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + " ", 0) == 0) return std::stoull(line.substr(key.size() + 1));
  ADD_FAILURE() << "no \"" << key << "\" in:\n" << text;
  return 0;
}

uint64_t Number(const std::string& text) {
  try {
    return std::stoull(text);
  } catch (const std::exception&) {
    ADD_FAILURE() << "not a number: " << text;
    return 0;
  }
}

// The CPU time process `pid`'s cgroup has used, in nanoseconds, as its file says
// (v2: cpu.stat usage_usec; v1: cpuacct.usage).
uint64_t CgroupCpuNs(pid_t pid) {
  if (UnifiedHost()) return KeyedValue(CgroupFile(pid, "", "", "cpu.stat"), "usage_usec") * 1000;
  return Number(CgroupFile(pid, "cpuacct", "cpuacct.usage", ""));
}

// Memory charged to process `pid`'s cgroup (v2: memory.current; v1:
// memory.usage_in_bytes) and its page cache part (v2: memory.stat "file";
// v1: memory.stat "total_cache").
uint64_t CgroupMemoryBytes(pid_t pid) {
  return Number(CgroupFile(pid, "memory", "memory.usage_in_bytes", "memory.current"));
}
uint64_t CgroupCacheBytes(pid_t pid) {
  return KeyedValue(CgroupFile(pid, "memory", "memory.stat", "memory.stat"),
                    UnifiedHost() ? "file" : "total_cache");
}

// The CPU quota of process `pid`'s cgroup as "<quota> <period>" in microseconds, "max" for
// none (v2: cpu.max; v1: cpu.cfs_quota_us, -1 for none, and cpu.cfs_period_us).
std::string CgroupQuota(pid_t pid) {
  if (UnifiedHost()) return CgroupFile(pid, "", "", "cpu.max");
  std::string quota = CgroupFile(pid, "cpu", "cpu.cfs_quota_us", "");
  if (quota == "-1") quota = "max";
  return quota + " " + CgroupFile(pid, "cpu", "cpu.cfs_period_us", "");
}

// The cores process `pid`'s cgroup asks for and those it gets (v2:
// cpuset.cpus and cpuset.cpus.effective; v1: cpuset.cpus and
// cpuset.effective_cpus), as "<asked>/<effective>".
std::string CgroupCores(pid_t pid) {
  return CgroupFile(pid, "cpuset", "cpuset.cpus", "cpuset.cpus") + "/" +
         CgroupFile(pid, "cpuset", "cpuset.effective_cpus", "cpuset.cpus.effective");
}

// Polls kernel `id`'s stats until two sweeps in a row agree on `field` (a
// JSON pointer) and `ready(body)` holds; returns the last body.
json SettledStats(const AgentProcess& agent, const std::string& id, const std::string& field,
                  const std::function<bool(const json&)>& ready) {
  json body, last;
  const auto deadline = std::chrono::steady_clock::now() + ScaledLimit(std::chrono::seconds(30));
  do {
    last = body;
    std::this_thread::sleep_for(milliseconds(500));  // 500 ms: more than two sweeps of 200 ms
    body = agent.CallJson("GET", "/v1/kernels/" + id + "/stats", nullptr, 200);
    const json::json_pointer at(field);
    if (body.value("measured", false) && ready(body) && last.contains(at) && body.contains(at) &&
        last[at] == body[at])
      break;
  } while (std::chrono::steady_clock::now() < deadline);
  return body;
}

AgentOptions CgroupAgent(const std::string& name) {
  AgentOptions o = TwoCoreAgent(name, "stats-interval = \"200ms\"\n");
  o.memory = "1g";
  return o;
}

TEST(Cgroup, AKernelsStatsAreWhatItsCgroupFilesSay) {
  AgentProcess agent(CgroupAgent("files"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Spins for about two seconds, keeps 32 MiB in a variable and 8 MiB in
  // the page cache of a file, then sleeps, so that every measure holds still.
  json k = SleepKernel("files", "256m");
  k["command"] = {"sh", "-c",
                  "end=$(( $(date +%s) + 2 )); while [ $(date +%s) -lt $end ]; do :; done; "
                  "head -c 8388608 /dev/zero > /tmp/cached; "
                  "a=$(head -c 33554432 /dev/zero | tr '\\000' a); sleep 3600; echo ${#a}"};
  agent.CreateKernel(k);

  json stats = SettledStats(agent, "files", "/cpu/usage_ns", [](const json& b) {
    return b["cpu"]["usage_ns"].get<uint64_t>() > 500'000'000u && b["memory"]["used_bytes"].get<uint64_t>() >= 32 * kMiB;
  });
  // The page cache is read with the full readings, every few seconds. Most
  // of the file, not all of it: the host may write back and drop some pages.
  stats = SettledStats(agent, "files", "/memory/cache_bytes",
                       [](const json& b) { return b["memory"]["cache_bytes"].get<uint64_t>() >= 6 * kMiB; });
  stats = SettledStats(agent, "files", "/memory/used_bytes", [](const json&) { return true; });
  ASSERT_TRUE(stats.value("measured", false)) << stats.dump();
  const pid_t pid = PidOf(agent, "files");
  const uint64_t cpu_file = CgroupCpuNs(pid), memory_file = CgroupMemoryBytes(pid);
  const uint64_t cache_file = CgroupCacheBytes(pid);
  SCOPED_TRACE(stats.dump() + (UnifiedHost() ? "\non a cgroup v2 host" : "\non a cgroup v1 host"));

  const double cpu_agent = stats["cpu"]["usage_ns"].get<double>();
  EXPECT_LE(std::fabs(cpu_agent - double(cpu_file)), 0.05 * double(cpu_file)) << "the cgroup's file: " << cpu_file;
  const auto within_a_mib = [](uint64_t a, uint64_t b) { return (a > b ? a - b : b - a) <= kMiB; };
  EXPECT_TRUE(within_a_mib(stats["memory"]["used_bytes"], memory_file)) << "the cgroup's file: " << memory_file;
  EXPECT_TRUE(within_a_mib(stats["memory"]["cache_bytes"], cache_file)) << "the cgroup's file: " << cache_file;
  EXPECT_GE(cache_file, 6 * kMiB);
  EXPECT_EQ(stats["memory"]["limit_bytes"].get<uint64_t>(), 256 * kMiB);
  EXPECT_EQ(Number(CgroupFile(pid, "memory", "memory.limit_in_bytes", "memory.max")), 256 * kMiB);
  EXPECT_EQ(stats["pids"].get<uint64_t>(), Number(CgroupFile(pid, "pids", "pids.current", "pids.current")));
}

TEST(Cgroup, ASharedKernelKeepsItsQuotaWhileItsCoresFollowThePool) {
  AgentProcess agent(CgroupAgent("pool"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json shared = SleepKernel("shared", "16m");
  shared["resources"]["cpu"] = "250m";
  agent.CreateKernel(shared);
  const pid_t pid = PidOf(agent, "shared");
  SCOPED_TRACE(UnifiedHost() ? "on a cgroup v2 host" : "on a cgroup v1 host");
  EXPECT_EQ(CgroupQuota(pid), "25000 100000");
  EXPECT_EQ(CgroupCores(pid), "0-1/0-1");
  if (EngineIsPodman()) GTEST_SKIP() << "Podman cannot move a running container's cores";

  // An exclusive kernel takes core 0: the shared one moves to core 1 and
  // keeps its share; the exclusive one has a core and no quota.
  const std::string core = std::to_string(agent.CreateKernel(SleepKernel("exclusive"))["allocations"]["cpu"][0].get<int>());
  const pid_t exclusive = PidOf(agent, "exclusive");
  const std::string rest = core == "0" ? "1" : "0";
  EXPECT_TRUE(Eventually([&] { return CgroupCores(pid) == rest + "/" + rest; }))
      << CgroupCores(pid);
  EXPECT_EQ(CgroupQuota(pid), "25000 100000");
  EXPECT_EQ(CgroupCores(exclusive), core + "/" + core);
  EXPECT_EQ(CgroupQuota(exclusive).substr(0, 4), "max ");

  // It goes: the shared kernel has both cores again, and still its share.
  agent.CallJson("DELETE", "/v1/kernels/exclusive", nullptr, 200);
  EXPECT_TRUE(Eventually([&] { return CgroupCores(pid) == "0-1/0-1"; })) << CgroupCores(pid);
  EXPECT_EQ(CgroupQuota(pid), "25000 100000");
}

// slotd hands a kernel no device node of its own (the mock and CUDA kinds
// name their devices in its environment; device requests go to the engine's
// driver): a kernel has the engine's standard nodes, reaches them, and
// nothing else of the host's /dev.
TEST(Cgroup, AKernelReachesTheEnginesStandardDevicesAndNoOthers) {
  AgentProcess agent(CgroupAgent("devices"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernel("devices"));
  const std::set<std::string> standard = {"console", "core", "fd",    "full",   "mqueue", "null",    "ptmx",
                                          "pts",     "random", "shm", "stderr", "stdin",  "stdout", "tty",
                                          "urandom", "zero"};
  std::istringstream listed(RunIn(agent, "devices", "ls -A /dev"));
  for (std::string name; listed >> name;) EXPECT_TRUE(standard.count(name)) << "/dev/" << name << " in the kernel";
  EXPECT_EQ(RunIn(agent, "devices", "head -c 8 /dev/urandom | wc -c; echo x > /dev/null && echo written"),
            "8\nwritten\n");
}

}  // namespace
}  // namespace slotd::testing
