#include "agent/kernel_store.h"

#include <utility>

namespace slotd {

KernelStore::KernelStore(std::string agent_id, std::vector<std::unique_ptr<ResourcePlugin>> plugins, EventHub& hub,
                         const Clock& clock)
    : plugins(std::move(plugins)), table(agent_id, this->plugins, hub, clock), agent_id_(std::move(agent_id)) {}

Result<Kernel> KernelStore::Get(const std::string& kernel_id) const {
  MutexLock lock(mutex);
  const Kernel* kernel = table.Find(kernel_id);
  if (!kernel) return Unknown(kernel_id);
  return *kernel;
}

Status KernelStore::Unknown(const std::string& kernel_id) const {
  return Status::NotFound("no kernel " + kernel_id + " on agent " + agent_id_);
}

}  // namespace slotd
