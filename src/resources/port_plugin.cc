#include "resources/port_plugin.h"

namespace slotd {

Status PortPlugin::Allocate(const std::string& kernel_id, const ResourceRequest& request, Allocation& out) {
  std::vector<PortBinding> picked;
  for (int port = first_; port <= last_ && picked.size() < request.ports.size(); ++port) {
    if (!holder_.count(port)) picked.push_back({request.ports[picked.size()], port});
  }
  if (picked.size() < request.ports.size()) {
    return Status::ResourceExhausted("insufficient ports: requested " + std::to_string(request.ports.size()) +
                                     ", free " + std::to_string(Capacity() - holder_.size()) + " of " +
                                     std::to_string(Capacity()) + " in port-range " + std::to_string(first_) + "-" +
                                     std::to_string(last_));
  }
  for (const auto& binding : picked) holder_[binding.host_port] = kernel_id;
  out.ports = picked;
  return Status::Ok();
}

Status PortPlugin::Claim(const std::string& kernel_id, const Allocation& alloc) {
  for (const auto& binding : alloc.ports) {
    if (binding.host_port < first_ || binding.host_port > last_)
      return Status::FailedPrecondition("host port " + std::to_string(binding.host_port) +
                                        " is outside this agent's port-range " + std::to_string(first_) + "-" +
                                        std::to_string(last_));
    auto it = holder_.find(binding.host_port);
    if (it != holder_.end() && it->second != kernel_id)
      return Status::ResourceExhausted("host port " + std::to_string(binding.host_port) +
                                        " is already held by kernel " + it->second);
  }
  for (const auto& binding : alloc.ports) holder_[binding.host_port] = kernel_id;
  return Status::Ok();
}

void PortPlugin::Free(const std::string& kernel_id) {
  std::erase_if(holder_, [&](const auto& entry) { return entry.second == kernel_id; });
}

void PortPlugin::Apply(const Allocation& alloc, ContainerSpec& spec) const { spec.ports = alloc.ports; }

nlohmann::json PortPlugin::Describe() const {
  int used = static_cast<int>(holder_.size());
  return {{"ports",
           {{"capacity", Capacity()},
            {"used", used},
            {"free", Capacity() - used},
            {"range", {first_, last_}}}}};
}

}  // namespace slotd
