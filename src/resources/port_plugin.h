// The ports plugin: host ports from the agent's container port-range, one per
// container port a kernel asks for, bound to it by the engine.
#pragma once

#include <map>

#include "resources/plugin.h"

namespace slotd {

class PortPlugin : public ResourcePlugin {
 public:
  PortPlugin(int first, int last) : first_(first), last_(last) {}

  std::string Name() const override { return "ports"; }
  // Takes the lowest free host port for each requested container port.
  Status Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) override;
  Status Claim(const std::string& kernel_id, const Allocation& alloc) override;
  void Free(const std::string& kernel_id) override;
  // Sets spec.ports to the held bindings.
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;
  nlohmann::json Describe() const override;

 private:
  int Capacity() const { return last_ - first_ + 1; }

  const int first_;
  const int last_;  // inclusive
  std::map<int, std::string> holder_;  // host port -> kernel id
};

}  // namespace slotd
