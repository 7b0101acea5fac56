#include "resources/memory_plugin.h"

#include "common/units.h"

namespace slotd {

void MemoryPlugin::Hold(const std::string& kernel_id, uint64_t bytes) {
  auto it = held_.find(kernel_id);
  if (it != held_.end()) {
    used_ -= it->second;
    held_.erase(it);
  }
  if (bytes == 0) return;
  held_[kernel_id] = bytes;
  used_ += bytes;
}

Status MemoryPlugin::Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) {
  uint64_t free = capacity_ - used_;
  if (request.mem_bytes > free)
    return Status::ResourceExhausted("insufficient mem: requested " + FormatSize(request.mem_bytes) + ", free " +
                                     FormatSize(free) + " of " + FormatSize(capacity_));
  Hold(kernel_id, request.mem_bytes);
  out.mem_bytes = request.mem_bytes;
  return Status::Ok();
}

Status MemoryPlugin::Claim(const std::string& kernel_id, const Allocation& alloc) {
  uint64_t others = used_ - (held_.count(kernel_id) ? held_.at(kernel_id) : 0);
  if (alloc.mem_bytes > capacity_)
    return Status::FailedPrecondition("memory " + FormatSize(alloc.mem_bytes) + " is more than this agent's " +
                                      FormatSize(capacity_));
  if (alloc.mem_bytes > capacity_ - others)
    return Status::ResourceExhausted("memory " + FormatSize(alloc.mem_bytes) + " does not fit: " +
                                      FormatSize(capacity_ - others) + " free of this agent's " +
                                      FormatSize(capacity_));
  Hold(kernel_id, alloc.mem_bytes);
  return Status::Ok();
}

void MemoryPlugin::Free(const std::string& kernel_id) { Hold(kernel_id, 0); }

void MemoryPlugin::Apply(const Allocation& alloc, ContainerSpec& spec) const {
  spec.memory_bytes = static_cast<int64_t>(alloc.mem_bytes);
}

nlohmann::json MemoryPlugin::Describe() const {
  return {{"mem", {{"capacity", capacity_}, {"used", used_}, {"free", capacity_ - used_}}}};
}

}  // namespace slotd
