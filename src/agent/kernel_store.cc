#include "agent/kernel_store.h"

#include <algorithm>

#include <utility>

namespace slotd {

KernelStore::KernelStore(std::string agent_id, std::vector<std::unique_ptr<ResourcePlugin>> plugins, EventHub& hub,
                         const Clock& clock)
    : plugins(std::move(plugins)), table(agent_id, mutex, this->plugins, hub, clock), agent_id_(std::move(agent_id)) {}

Result<Kernel> KernelStore::Get(const std::string& kernel_id) const {
  MutexLock lock(mutex);
  const Kernel* kernel = table.Find(kernel_id);
  if (!kernel) return Unknown(kernel_id);
  return *kernel;
}

Status KernelStore::Unknown(const std::string& kernel_id) const {
  return Status::NotFound("no kernel " + kernel_id + " on agent " + agent_id_);
}

std::vector<KernelStore::RunningKernel> KernelStore::RunningKernels() const {
  MutexLock lock(mutex);
  std::vector<RunningKernel> running;
  for (const auto& [id, kernel] : table.All())
    if (kernel.state() == KernelState::kRunning && !kernel.container_id.empty())
      running.push_back({id, kernel.container_id, kernel.allocation.devices, kernel.allocation.shared_cpu_millis});
  return running;
}

int KernelStore::ActiveKernels() const {
  MutexLock lock(mutex);
  return std::count_if(table.All().begin(), table.All().end(), [](const auto& entry) {
    const Kernel& kernel = entry.second;
    return kernel.warm_pool.empty() && kernel.state() != KernelState::kTerminated &&
           kernel.state() != KernelState::kError;
  });
}

}  // namespace slotd
