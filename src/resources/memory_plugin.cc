#include "resources/memory_plugin.h"

#include "common/units.h"

namespace slotd {

uint64_t MemoryPlugin::Used() const {
  uint64_t used = 0;
  for (const auto& [kernel, bytes] : held_) used += bytes;
  return used;
}

Status MemoryPlugin::Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) {
  uint64_t free = capacity_ - Used();
  if (request.mem_bytes > free)
    return Status::ResourceExhausted("insufficient mem: requested " + FormatSize(request.mem_bytes) + ", free " +
                                     FormatSize(free) + " of " + FormatSize(capacity_));
  held_[kernel_id] = request.mem_bytes;
  out.mem_bytes = request.mem_bytes;
  return Status::Ok();
}

Status MemoryPlugin::Claim(const std::string& kernel_id, const Allocation& alloc) {
  uint64_t others = Used() - (held_.count(kernel_id) ? held_.at(kernel_id) : 0);
  if (alloc.mem_bytes > capacity_)
    return Status::FailedPrecondition("memory " + FormatSize(alloc.mem_bytes) + " is more than this agent's " +
                                      FormatSize(capacity_));
  if (alloc.mem_bytes > capacity_ - others)
    return Status::ResourceExhausted("memory " + FormatSize(alloc.mem_bytes) + " does not fit: " +
                                      FormatSize(capacity_ - others) + " free of this agent's " +
                                      FormatSize(capacity_));
  held_[kernel_id] = alloc.mem_bytes;
  return Status::Ok();
}

void MemoryPlugin::Free(const std::string& kernel_id) { held_.erase(kernel_id); }

void MemoryPlugin::Apply(const Allocation& alloc, ContainerSpec& spec) const {
  spec.memory_bytes = static_cast<int64_t>(alloc.mem_bytes);
}

nlohmann::json MemoryPlugin::Describe() const {
  uint64_t used = Used();
  return {{"mem", {{"capacity", capacity_}, {"used", used}, {"free", capacity_ - used}}}};
}

}  // namespace slotd
