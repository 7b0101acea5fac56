#include "resources/cpu_plugin.h"

#include "common/units.h"

namespace slotd {

CpuPlugin::CpuPlugin(std::vector<int> allowed_cores) : allowed_(allowed_cores.begin(), allowed_cores.end()) {}

Status CpuPlugin::Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) {
  std::vector<int> picked;
  for (int core : allowed_) {
    if (static_cast<int>(picked.size()) == request.cpu) break;
    if (!holder_.count(core)) picked.push_back(core);
  }
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
      return Status::FailedPrecondition("cpu core " + std::to_string(core) + " is already held by kernel " + it->second);
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
