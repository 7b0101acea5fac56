// Allocation: everything one kernel holds, in the form written to the
// container's `ai.backend.allocations` label and read back on restore.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "model/container.h"

namespace slotd {

struct Allocation {
  std::vector<int> cores;      // sorted exclusive CPU cores (cpu plugin)
  // A CPU quota from the agent's shared pool, in millicores (cpu plugin);
  // 0: none. A kernel holds either cores or a shared quota, never both.
  int shared_cpu_millis = 0;
  uint64_t mem_bytes = 0;      // memory limit (memory plugin)
  std::map<std::string, std::vector<std::string>> devices;  // plugin name -> device ids
  std::vector<PortBinding> ports;  // host ports from the agent's port range
  // The NUMA node the placement preferred (the node of its devices and cores
  // when one node could hold them all); unset when no single node could.
  std::optional<int> numa_node;

  bool operator==(const Allocation&) const;

  // The API form (a kernel's "allocations"): {"cpu":[0,1],"mem":268435456,
  // "devices":{"mock":["mock0"]},"ports":[{"container":8080,"host":30001}],
  // "numa_node":0}, with "cpu_shared": 250 (millicores) for a shared quota.
  // The container label has its own codec (model/label_codec.h).
  nlohmann::json ToJson() const;
};

// What a kernel asks for: whole cores or a shared CPU quota, memory bytes,
// and whole devices per slot type.
struct ResourceRequest {
  // The /dev/shm size when the request gives none: Docker's own, or all of
  // mem when mem is smaller.
  static constexpr uint64_t kDefaultShm = 64ull << 20;

  int cpu = 1;  // exclusive cores; 0 when shared_cpu_millis is set
  // A quota from the shared pool, in millicores (resources.cpu 0.25, "250m",
  // or a whole number with cpu_policy "shared"); 0: exclusive cores.
  int shared_cpu_millis = 0;
  uint64_t mem_bytes = 256ull << 20;
  // The size of /dev/shm, counted within mem_bytes; unset: ShmBytes() picks.
  std::optional<uint64_t> shm_bytes;
  // The size of the kernel's scratch (/home/work); unset: [container] scratch-size.
  std::optional<uint64_t> scratch_bytes;
  std::map<std::string, int> devices;  // slot type ("mock.device") -> count
  std::vector<int> ports;              // container ports that need a host port

  // The /dev/shm size the kernel gets: shm_bytes, or kDefaultShm capped at mem_bytes.
  uint64_t ShmBytes() const { return shm_bytes ? *shm_bytes : std::min(kDefaultShm, mem_bytes); }

  bool operator==(const ResourceRequest&) const = default;
};

}  // namespace slotd
