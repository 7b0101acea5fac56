// The facts about this host that agent.toml's defaults are derived from:
// its name, the cores this process may use, their NUMA nodes, its memory,
// and $DOCKER_HOST. Read once from gethostname, /proc and /sys; tests build
// their own.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace slotd {

// Facts about the host that defaults are derived from. Tests pass their own.
struct HostFacts {
  std::string hostname;
  std::vector<int> cpuset;   // cores this process may run on
  std::map<int, int> core_numa_node;  // core -> NUMA node; a core missing here is on node 0
  uint64_t memory_bytes = 0; // total node memory
  std::string docker_host_env;  // $DOCKER_HOST, empty if unset
  int64_t memlock_limit = -1;   // this process's hard RLIMIT_MEMLOCK in bytes; -1: unlimited
  // Reads the real host: gethostname, sched_getaffinity, /proc/meminfo,
  // /sys/devices/system/node, $DOCKER_HOST and getrlimit(RLIMIT_MEMLOCK).
  static HostFacts Detect();
};

}  // namespace slotd
