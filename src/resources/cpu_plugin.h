// The cpu plugin: whole cores from the agent's allowed-cores, applied as the
// container's cpuset. Slot type "cpu" (a count of cores).
#pragma once

#include <map>
#include <set>

#include "resources/plugin.h"

namespace slotd {

class CpuPlugin : public ResourcePlugin {
 public:
  explicit CpuPlugin(std::vector<int> allowed_cores);

  std::string Name() const override { return "cpu"; }
  // Takes the lowest-numbered free cores.
  Status Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) override;
  Status Claim(const std::string& kernel_id, const Allocation& alloc) override;
  void Free(const std::string& kernel_id) override;
  // Sets cpuset_cpus to the held cores.
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;
  nlohmann::json Describe() const override;

 private:
  const std::set<int> allowed_;
  std::map<int, std::string> holder_;  // core -> kernel id
};

}  // namespace slotd
