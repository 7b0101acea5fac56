// HostFacts::Detect: the host as this process sees it, from gethostname,
// sched_getaffinity, /proc/meminfo, /sys/devices/system/node and the
// environment. Anything it cannot read is left empty or 0; the config's
// defaults then report what is missing.
#include "config/host_facts.h"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "common/units.h"

namespace slotd {
namespace {

// Where the kernel lists each NUMA node's cores, as node<N>/cpulist.
constexpr const char* kNumaNodeDir = "/sys/devices/system/node";

// Maps every core to its NUMA node from `<node_dir>/node<N>/cpulist`. Empty
// when the directory is missing (a kernel without NUMA); a node without
// cores (memory only) adds nothing.
std::map<int, int> ReadCoreNumaNodes(const std::string& node_dir) {
  std::map<int, int> core_numa_node;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(node_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 4 || name.rfind("node", 0) != 0 ||
        !std::all_of(name.begin() + 4, name.end(), [](unsigned char c) { return std::isdigit(c); })) {
      continue;
    }
    const int node = std::atoi(name.c_str() + 4);
    std::ifstream file(entry.path() / "cpulist");
    std::string cpulist;
    if (!std::getline(file, cpulist)) continue;
    Result<std::vector<int>> cores = ParseCoreList(cpulist);
    if (!cores.ok()) continue;
    for (int core : *cores) core_numa_node[core] = node;
  }
  return core_numa_node;
}

}  // namespace

HostFacts HostFacts::Detect() {
  HostFacts facts;

  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) facts.hostname = name;

  cpu_set_t* set = CPU_ALLOC(kCoreLimit);
  const size_t set_size = CPU_ALLOC_SIZE(kCoreLimit);
  if (set != nullptr && sched_getaffinity(0, set_size, set) == 0) {
    for (int core = 0; core < kCoreLimit; ++core) {
      if (CPU_ISSET_S(core, set_size, set)) facts.cpuset.push_back(core);
    }
  }
  if (set != nullptr) CPU_FREE(set);

  facts.core_numa_node = ReadCoreNumaNodes(kNumaNodeDir);

  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kib) == 1) {
      facts.memory_bytes = static_cast<uint64_t>(kib) * 1024;
      break;
    }
  }

  if (const char* docker_host = std::getenv("DOCKER_HOST")) facts.docker_host_env = docker_host;
  rlimit memlock{};
  if (getrlimit(RLIMIT_MEMLOCK, &memlock) == 0 && memlock.rlim_max != RLIM_INFINITY)
    facts.memlock_limit = static_cast<int64_t>(memlock.rlim_max);
  return facts;
}

}  // namespace slotd
