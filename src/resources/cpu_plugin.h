// The cpu plugin: whole cores from the agent's allowed-cores, applied as the
// container's cpuset. Slot type "cpu" (a count of cores). Cores on the
// placement's NUMA node are taken first.
#pragma once

#include <map>
#include <set>

#include "resources/plugin.h"

namespace slotd {

class CpuPlugin : public ResourcePlugin {
 public:
  // `core_numa_node` maps cores to NUMA nodes; a core missing from it is on node 0.
  CpuPlugin(std::vector<int> allowed_cores, std::map<int, int> core_numa_node);

  std::string Name() const override { return "cpu"; }
  // Takes free cores of out.numa_node first, then the lowest-numbered others.
  Status Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) override;
  Status Claim(const std::string& kernel_id, const Allocation& alloc) override;
  void Free(const std::string& kernel_id) override;
  // Sets cpuset_cpus to the held cores.
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;
  nlohmann::json Describe() const override;
  int Wanted(const ResourceRequest& request) const override { return request.cpu; }
  std::map<int, int> FreeByNumaNode() const override;

 private:
  int NodeOf(int core) const;

  const std::set<int> allowed_;
  const std::map<int, int> core_numa_node_;
  std::map<int, std::string> holder_;  // core -> kernel id
};

}  // namespace slotd
