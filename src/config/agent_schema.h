// The agent's config schema: the key table of every section of agent.toml
// and the rules that join keys (the port range's order, the cores and
// memory left after the reservations, mock allow-lists against the
// declared devices).
#pragma once

#include "config/schema.h"

namespace slotd {

// Every section this version accepts, in the order messages and docs list
// them. Built on first use, then shared.
const Schema& AgentSchema();

}  // namespace slotd
