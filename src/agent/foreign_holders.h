// The check that keeps a new agent off resources still used by containers of
// other owners (for example the kernels of a dead agent whose claims are
// void, or of an agent started again with fewer cores): read from their
// ai.backend.allocations labels in one label-filtered list, which the
// agent's restore then adopts its own kernels from, and from the cpuset each
// running one's inspect shows (a shared kernel's cores are in no label);
// such containers are never changed.
#pragma once

#include <vector>

#include "engine/container_engine.h"
#include "node/claims.h"

namespace slotd {

// kFailedPrecondition naming each running container of another owner whose
// recorded allocation holds one of `mine`'s cores, devices or host ports, or
// whose cpuset (ContainerInfo::cpuset_cpus, as InspectForeignCpusets fills
// it; empty: not inspected, or not limited to any cores, when only its label
// counts) lets it run on one of `mine`'s cores, its owner and the remedy. A
// cpuset that is no core list is refused as such. `listed`: the node's
// owner-labelled containers (ListOwnedContainers).
Status CheckForeignHolders(const std::vector<ContainerInfo>& listed, const AgentClaims& mine);

// Fills in cpuset_cpus of each running container of `listed` whose owner is
// not `agent_id` and that records an allocation, from its inspect (read
// only). One gone meanwhile is left as listed; any other error is the
// engine's, naming the container.
Status InspectForeignCpusets(ContainerEngine& engine, std::vector<ContainerInfo>& listed, const std::string& agent_id);

// Every container with an owner label, of any agent: the one list an
// agent's start needs. Errors: the engine's (kUnavailable), saying what the
// list was for.
Result<std::vector<ContainerInfo>> ListOwnedContainers(ContainerEngine& engine);

}  // namespace slotd
