#include "agent/foreign_holders.h"

#include <algorithm>
#include <optional>
#include <set>

#include "model/kernel.h"
#include "model/label_codec.h"
#include "common/json_reader.h"
#include "common/units.h"
#include "model/allocation.h"

namespace slotd {

Result<std::vector<ContainerInfo>> ListOwnedContainers(ContainerEngine& engine) {
  auto listed = engine.List({label::kOwner});
  if (!listed.ok()) return listed.status().WithPrefix("listing the node's containers to check what they hold");
  return listed;
}

namespace {

// Whether `info` is a running container of another owner than `agent_id`
// that records an allocation: a kernel whose holdings count against us.
bool IsForeignKernel(const ContainerInfo& info, const std::string& agent_id) {
  auto owner = info.labels.find(label::kOwner);
  return owner != info.labels.end() && owner->second != agent_id && info.running &&
         info.labels.count(label::kAllocations) > 0;
}

}  // namespace

Status InspectForeignCpusets(ContainerEngine& engine, std::vector<ContainerInfo>& listed, const std::string& agent_id) {
  for (ContainerInfo& info : listed) {
    if (!IsForeignKernel(info, agent_id)) continue;
    Result<ContainerInfo> inspected = engine.Inspect(info.id);
    if (!inspected.ok() && inspected.status().code() == Status::Code::kNotFound) continue;  // gone: holds nothing
    if (!inspected.ok())
      return inspected.status().WithPrefix("inspecting container " + info.name + " of agent " +
                                           info.labels.at(label::kOwner) + " to read the cores it runs on");
    info.cpuset_cpus = inspected->cpuset_cpus;
  }
  return Status::Ok();
}

Status CheckForeignHolders(const std::vector<ContainerInfo>& listed, const AgentClaims& mine) {
  std::string problems;
  for (const auto& info : listed) {
    if (!IsForeignKernel(info, mine.agent_id)) continue;
    const std::string& owner = info.labels.at(label::kOwner);
    std::optional<nlohmann::json> parsed = ParseJsonWithin(info.labels.at(label::kAllocations));
    auto alloc = parsed ? AllocationFromLabel(std::move(*parsed)) : Result<Allocation>(Status::InvalidArgument("not JSON"));
    if (!alloc.ok()) alloc = Allocation{};  // not a record this agent can read: its label claims nothing here
    // The cores its label records, and those its cpuset lets it run on
    // whatever the label says (a shared kernel's: the pool it was given).
    std::vector<std::string> held;
    std::set<int> cores(alloc->cores.begin(), alloc->cores.end());
    std::set<int> by_cpuset;
    if (!info.cpuset_cpus.empty()) {
      Result<std::vector<int>> cpuset = ParseCoreList(info.cpuset_cpus);
      if (!cpuset.ok())
        held.push_back("cpu cores (its cpuset \"" + info.cpuset_cpus.substr(0, 64) + "\" is no core list)");
      else
        for (int core : *cpuset)
          if (!cores.count(core)) by_cpuset.insert(core);
      cores.insert(by_cpuset.begin(), by_cpuset.end());
    }
    for (int core : cores)
      if (std::binary_search(mine.cores.begin(), mine.cores.end(), core))
        held.push_back("cpu core " + std::to_string(core) +
                       (by_cpuset.count(core) ? " (its cpuset: " + info.cpuset_cpus + ")" : ""));
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
