// The check that keeps a new agent off resources still used by containers of
// other owners (for example the kernels of a dead agent whose claims are
// void): read from their ai.backend.allocations labels in one label-filtered
// list; such containers are never inspected or changed.
#pragma once

#include "engine/container_engine.h"
#include "node/claims.h"

namespace slotd {

// kFailedPrecondition naming each running container of another owner whose
// recorded allocation holds one of `mine`'s cores, devices or host ports, its
// owner and the remedy; kUnavailable when the engine cannot be listed.
Status CheckForeignHolders(ContainerEngine& engine, const AgentClaims& mine);

}  // namespace slotd
