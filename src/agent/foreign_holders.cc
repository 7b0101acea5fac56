#include "agent/foreign_holders.h"

#include <algorithm>
#include <optional>

#include "agent/kernel.h"
#include "agent/label_codec.h"
#include "common/json_reader.h"
#include "resources/allocation.h"

namespace slotd {

Result<std::vector<ContainerInfo>> ListOwnedContainers(ContainerEngine& engine) {
  auto listed = engine.List({label::kOwner});
  if (!listed.ok()) return listed.status().WithPrefix("listing the node's containers to check what they hold");
  return listed;
}

Status CheckForeignHolders(const std::vector<ContainerInfo>& listed, const AgentClaims& mine) {
  std::string problems;
  for (const auto& info : listed) {
    const std::string& owner = info.labels.at(label::kOwner);
    if (owner == mine.agent_id || !info.running) continue;
    auto text = info.labels.find(label::kAllocations);
    if (text == info.labels.end()) continue;
    std::optional<nlohmann::json> parsed = ParseJsonWithin(text->second);
    auto alloc = parsed ? AllocationFromLabel(std::move(*parsed)) : Result<Allocation>(Status::InvalidArgument("not JSON"));
    if (!alloc.ok()) continue;  // not a record this agent can read; it claims nothing here
    std::vector<std::string> held;
    for (int core : alloc->cores)
      if (std::binary_search(mine.cores.begin(), mine.cores.end(), core)) held.push_back("cpu core " + std::to_string(core));
    for (const auto& [plugin, ids] : alloc->devices) {
      auto own = mine.devices.find(plugin);
      if (own == mine.devices.end()) continue;
      for (const auto& id : ids)
        if (std::any_of(own->second.begin(), own->second.end(),
                        [&](const std::string& claim) { return DevicesOverlap(claim, id); }))
          held.push_back(plugin + " device " + id);
    }
    for (const auto& port : alloc->ports)
      if (port.host_port >= mine.port_first && port.host_port <= mine.port_last)
        held.push_back("host port " + std::to_string(port.host_port));
    for (const auto& what : held)
      problems += "\n  " + what + ": held by running container " + info.name + " of agent " + owner;
  }
  if (problems.empty()) return Status::Ok();
  return Status::FailedPrecondition(
      "agent " + mine.agent_id + " would share resources with containers of other owners:" + problems +
      "\n  Start their own agent again (it adopts them), or remove those containers (docker rm -f NAME), or take "
      "these resources out of this agent's config");
}

}  // namespace slotd
