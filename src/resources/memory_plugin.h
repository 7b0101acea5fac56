// The memory plugin: a byte share of the agent's memory size, applied as the
// container's memory limit. Slot type "mem" (bytes).
#pragma once

#include <map>

#include "resources/plugin.h"

namespace slotd {

class MemoryPlugin : public ResourcePlugin {
 public:
  explicit MemoryPlugin(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  std::string Name() const override { return "mem"; }
  Status Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) override;
  Status Claim(const std::string& kernel_id, const Allocation& alloc) override;
  void Free(const std::string& kernel_id) override;
  // Sets memory_bytes to the held share.
  void Apply(const Allocation& alloc, ContainerSpec& spec) const override;
  nlohmann::json Describe() const override;

 private:
  // Sets kernel_id's share (0: none), keeping used_ its sum.
  void Hold(const std::string& kernel_id, uint64_t bytes);

  const uint64_t capacity_;
  std::map<std::string, uint64_t> held_;  // kernel id -> bytes
  uint64_t used_ = 0;                     // held_'s bytes added up: no walk over every kernel per call
};

}  // namespace slotd
