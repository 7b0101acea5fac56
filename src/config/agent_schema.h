// The core sections of agent.toml: [agent], [api], [node], [container],
// [resource], [resource.cpu] and [resource.memory], with the rules that join
// their keys (the port range's order, the cores and memory left after the
// reservations). The device plugins' sections are not here: each plugin
// declares its own (resources/device_kinds.h), and resources/agent_config.h
// puts the whole schema together.
#pragma once

#include "config/schema.h"

namespace slotd {

// Registers the core sections in `schema`, in the order messages and docs
// list them.
void AddCoreSections(Schema& schema);

}  // namespace slotd
