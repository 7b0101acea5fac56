// The check that keeps a new agent off resources still used by containers of
// other owners (for example the kernels of a dead agent whose claims are
// void): read from their ai.backend.allocations labels in one label-filtered
// list, which the agent's restore then adopts its own kernels from; such
// containers are never inspected or changed.
#pragma once

#include <vector>

#include "engine/container_engine.h"
#include "node/claims.h"

namespace slotd {

// kFailedPrecondition naming each running container of another owner whose
// recorded allocation holds one of `mine`'s cores, devices or host ports, its
// owner and the remedy. `listed`: the node's owner-labelled containers
// (ListOwnedContainers).
Status CheckForeignHolders(const std::vector<ContainerInfo>& listed, const AgentClaims& mine);

// Every container with an owner label, of any agent: the one list an
// agent's start needs. Errors: the engine's (kUnavailable), saying what the
// list was for.
Result<std::vector<ContainerInfo>> ListOwnedContainers(ContainerEngine& engine);

}  // namespace slotd
