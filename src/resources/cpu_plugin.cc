#include "resources/cpu_plugin.h"

#include <algorithm>

#include "common/units.h"

namespace slotd {

CpuPlugin::CpuPlugin(std::vector<int> allowed_cores, std::map<int, int> core_numa_node, int shared_overcommit)
    : allowed_(allowed_cores.begin(), allowed_cores.end()),
      core_numa_node_(std::move(core_numa_node)),
      shared_overcommit_(std::max(1, shared_overcommit)) {}

int CpuPlugin::NodeOf(int core) const {
  auto it = core_numa_node_.find(core);
  return it == core_numa_node_.end() ? 0 : it->second;
}

std::vector<int> CpuPlugin::Pool(const std::vector<int>& without) const {
  std::vector<int> pool;
  for (int core : allowed_)
    if (!holder_.count(core) && std::find(without.begin(), without.end(), core) == without.end()) pool.push_back(core);
  return pool;
}

int64_t CpuPlugin::CapacityMillis(size_t cores) const {
  return static_cast<int64_t>(cores) * 1000 * shared_overcommit_;
}

void CpuPlugin::HoldShared(const std::string& kernel_id, int millis) {
  auto it = shared_.find(kernel_id);
  if (it != shared_.end()) {
    shared_millis_ -= it->second;
    shared_.erase(it);
  }
  if (millis <= 0) return;
  shared_[kernel_id] = millis;
  shared_millis_ += millis;
}

size_t CpuPlugin::CoresNeededByShared() const {
  if (shared_.empty()) return 0;
  const int64_t per_core = CapacityMillis(1);
  return static_cast<size_t>(std::max<int64_t>(1, (shared_millis_ + per_core - 1) / per_core));
}

std::map<int, int> CpuPlugin::FreeByNumaNode() const {
  std::map<int, int> free;
  for (int core : allowed_)
    if (!holder_.count(core)) ++free[NodeOf(core)];
  return free;
}

Status CpuPlugin::Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) {
  if (request.shared_cpu_millis > 0) {
    const std::vector<int> pool = Pool();
    const int64_t capacity = CapacityMillis(pool.size()), used = shared_millis_;
    if (used + request.shared_cpu_millis > capacity)
      return Status::ResourceExhausted(
          "insufficient shared cpu: requested " + FormatMillicores(request.shared_cpu_millis) + ", free " +
          FormatMillicores(std::max<int64_t>(0, capacity - used)) + " of " + FormatMillicores(capacity) +
          " in the shared pool (cores " + (pool.empty() ? "none" : FormatCoreList(pool)) + ", the allowed cores no " +
          "kernel holds exclusively)");
    HoldShared(kernel_id, request.shared_cpu_millis);
    out.shared_cpu_millis = request.shared_cpu_millis;
    return Status::Ok();
  }
  std::vector<int> picked;
  // Two passes: the preferred node's cores, then any.
  for (bool preferred_pass : {true, false}) {
    for (int core : allowed_) {
      if (static_cast<int>(picked.size()) == request.cpu) break;
      if (holder_.count(core) || std::find(picked.begin(), picked.end(), core) != picked.end()) continue;
      if (preferred_pass && (!out.numa_node || NodeOf(core) != *out.numa_node)) continue;
      picked.push_back(core);
    }
  }
  std::sort(picked.begin(), picked.end());
  if (static_cast<int>(picked.size()) < request.cpu) {
    size_t free = allowed_.size() - holder_.size();
    return Status::ResourceExhausted("insufficient cpu: requested " + std::to_string(request.cpu) + ", free " +
                                     std::to_string(free) + " of " + std::to_string(allowed_.size()));
  }
  const size_t left = Pool(picked).size();
  if (left < CoresNeededByShared() || CapacityMillis(left) < shared_millis_)
    return Status::ResourceExhausted(
        "insufficient cpu: requested " + std::to_string(request.cpu) + " exclusive core(s), but the shared pool (cores " +
        FormatCoreList(Pool()) + ") holds " + std::to_string(shared_.size()) + " shared kernel(s) with " +
        FormatMillicores(shared_millis_) + " of quota, which " + std::to_string(left) +
        " core(s) left to it could not run; ask for fewer cores, or delete shared kernels first");
  for (int core : picked) holder_[core] = kernel_id;
  out.cores = picked;
  return Status::Ok();
}

Status CpuPlugin::Claim(const std::string& kernel_id, const Allocation& alloc) {
  if (alloc.shared_cpu_millis > 0 && !alloc.cores.empty())
    return Status::FailedPrecondition("kernel " + kernel_id + " is recorded with both exclusive cores and a shared quota");
  for (int core : alloc.cores) {
    if (!allowed_.count(core))
      return Status::FailedPrecondition("cpu core " + std::to_string(core) + " is not in this agent's allowed-cores (" +
                                        FormatCoreList({allowed_.begin(), allowed_.end()}) + ")");
    auto it = holder_.find(core);
    if (it != holder_.end() && it->second != kernel_id)
      return Status::ResourceExhausted("cpu core " + std::to_string(core) + " is already held by kernel " + it->second);
  }
  for (int core : alloc.cores) holder_[core] = kernel_id;
  // A shared quota is taken back as recorded, even past the pool's capacity
  // (a config changed since): the kernel runs, and new shared kernels wait.
  if (alloc.shared_cpu_millis > 0) HoldShared(kernel_id, alloc.shared_cpu_millis);
  return Status::Ok();
}

void CpuPlugin::Free(const std::string& kernel_id) {
  std::erase_if(holder_, [&](const auto& entry) { return entry.second == kernel_id; });
  HoldShared(kernel_id, 0);
}

void CpuPlugin::Apply(const Allocation& alloc, ContainerSpec& spec) const {
  if (alloc.shared_cpu_millis > 0) {
    spec.cpuset_cpus = FormatCoreList(Pool());
    spec.cpu_period_us = kQuotaPeriodUs;
    spec.cpu_quota_us = kQuotaPeriodUs * alloc.shared_cpu_millis / 1000;
    return;
  }
  spec.cpuset_cpus = FormatCoreList(alloc.cores);
}

nlohmann::json CpuPlugin::Describe() const {
  const size_t used = holder_.size();
  const std::vector<int> pool = Pool();
  const int64_t capacity = CapacityMillis(pool.size()), shared = shared_millis_;
  return {{"cpu",
           {{"capacity", allowed_.size()},
            {"used", used},
            {"free", pool.size() - std::min(pool.size(), CoresNeededByShared())},
            {"cores", FormatCoreList({allowed_.begin(), allowed_.end()})}}},
          {"cpu_shared",
           {{"capacity", capacity},
            {"used", shared},
            {"free", std::max<int64_t>(0, capacity - shared)},
            {"kernels", shared_.size()},
            {"cores", pool.empty() ? std::string() : FormatCoreList(pool)}}}};
}

}  // namespace slotd
