// The key table of agent.toml's [[pool]] entries (warm pools): each entry
// a pool of started kernels of one shape, kept ready for the creates that
// ask for it. AddCoreSections (agent_schema.h) registers it.
#pragma once

#include "config/schema.h"

namespace slotd {

// The keys of one [[pool]] entry.
KeyTable<PoolConfig> PoolKeys();

}  // namespace slotd
