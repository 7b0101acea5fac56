// The cpu plugin: whole cores from the agent's allowed-cores, applied as the
// container's cpuset, and CPU quotas from the agent's shared pool. Slot types
// "cpu" (a count of exclusive cores) and "cpu_shared" (millicores of quota).
// Cores on the placement's NUMA node are taken first.
//
// The shared pool is the allowed cores that no kernel holds exclusively. A
// shared kernel runs on all of them (its cpuset is the pool) under a CFS
// quota of its millicores; the quotas of the shared kernels add up to at most
// the pool's cores x 1000 x shared-overcommit. The pool shrinks as exclusive
// cores are given: a core is never given while that would leave the pool
// without the cores its shared kernels' quotas need (at least one core while
// any shared kernel runs).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "resources/plugin.h"

namespace slotd {

class CpuPlugin : public ResourcePlugin {
 public:
  // `core_numa_node` maps cores to NUMA nodes; a core missing from it is on
  // node 0. `shared_overcommit` (at least 1): how many times its cores' worth
  // of quota the shared pool gives out.
  CpuPlugin(std::vector<int> allowed_cores, std::map<int, int> core_numa_node, int shared_overcommit = 1);

  // The CFS period a shared kernel's quota is a part of, in microseconds.
  static constexpr int64_t kQuotaPeriodUs = 100'000;

  std::string Name() const override { return "cpu"; }
  // Exclusive cores: free cores of out.numa_node first, then the
  // lowest-numbered others; refused when what is left would not hold the
  // shared kernels' quotas. A shared quota: refused past the pool's capacity.
  Status Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) override;
  Status Claim(const std::string& kernel_id, const Allocation& alloc) override;
  void Free(const std::string& kernel_id) override;
  // Exclusive: cpuset_cpus is the held cores. Shared: cpuset_cpus is the
  // pool as it is now, with the quota over kQuotaPeriodUs.
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;
  // "cpu" (cores: capacity, used, free for an exclusive kernel) and
  // "cpu_shared" (millicores of the pool: capacity, used, free, its cores).
  nlohmann::json Describe() const override;
  int Wanted(const ResourceRequest& request) const override { return request.cpu; }
  std::map<int, int> FreeByNumaNode() const override;

 private:
  int NodeOf(int core) const;
  // The allowed cores no kernel holds exclusively, `without` those too.
  std::vector<int> Pool(const std::vector<int>& without = {}) const;
  // The quota `cores` pool cores give out, in millicores.
  int64_t CapacityMillis(size_t cores) const;
  // Sets kernel_id's quota (0: none), keeping shared_millis_ its sum.
  void HoldShared(const std::string& kernel_id, int millis);
  // The pool cores the shared kernels' quotas need: 0 without any, else at
  // least 1.
  size_t CoresNeededByShared() const;

  const std::set<int> allowed_;
  const std::map<int, int> core_numa_node_;
  const int shared_overcommit_;
  std::map<int, std::string> holder_;  // core -> kernel id
  std::map<std::string, int> shared_;  // kernel id -> millicores of quota
  int64_t shared_millis_ = 0;           // shared_'s quotas added up: no walk over every kernel per call
};

}  // namespace slotd
