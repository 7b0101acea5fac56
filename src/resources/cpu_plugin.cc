#include "resources/cpu_plugin.h"

#include <algorithm>

#include "common/units.h"

namespace slotd {

CpuPlugin::CpuPlugin(std::vector<int> allowed_cores, std::map<int, int> core_numa_node)
    : allowed_(allowed_cores.begin(), allowed_cores.end()), core_numa_node_(std::move(core_numa_node)) {}

int CpuPlugin::NodeOf(int core) const {
  auto it = core_numa_node_.find(core);
  return it == core_numa_node_.end() ? 0 : it->second;
}

std::map<int, int> CpuPlugin::FreeByNumaNode() const {
  std::map<int, int> free;
  for (int core : allowed_)
    if (!holder_.count(core)) ++free[NodeOf(core)];
  return free;
}

Status CpuPlugin::Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) {
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
  for (int core : picked) holder_[core] = kernel_id;
  out.cores = picked;
  return Status::Ok();
}

Status CpuPlugin::Claim(const std::string& kernel_id, const Allocation& alloc) {
  for (int core : alloc.cores) {
    if (!allowed_.count(core))
      return Status::FailedPrecondition("cpu core " + std::to_string(core) + " is not in this agent's allowed-cores (" +
                                        FormatCoreList({allowed_.begin(), allowed_.end()}) + ")");
    auto it = holder_.find(core);
    if (it != holder_.end() && it->second != kernel_id)
      return Status::ResourceExhausted("cpu core " + std::to_string(core) + " is already held by kernel " + it->second);
  }
  for (int core : alloc.cores) holder_[core] = kernel_id;
  return Status::Ok();
}

void CpuPlugin::Free(const std::string& kernel_id) {
  std::erase_if(holder_, [&](const auto& entry) { return entry.second == kernel_id; });
}

void CpuPlugin::Apply(const Allocation& alloc, ContainerSpec& spec) const {
  spec.cpuset_cpus = FormatCoreList(alloc.cores);
}

nlohmann::json CpuPlugin::Describe() const {
  size_t used = holder_.size();
  return {{"cpu",
           {{"capacity", allowed_.size()},
            {"used", used},
            {"free", allowed_.size() - used},
            {"cores", FormatCoreList({allowed_.begin(), allowed_.end()})}}}};
}

}  // namespace slotd
