// agent.toml as a whole: the core sections (config/agent_schema.h) followed
// by every device kind's section (resources/device_kinds.h).
#pragma once

#include <string>

#include "common/status.h"
#include "config/config.h"
#include "config/host_facts.h"
#include "config/schema.h"

namespace slotd {

// Every section this version accepts, in the order messages and docs list
// them. Built on first use, then shared.
const Schema& AgentSchema();

// Parses and validates `path`. On failure the Status message holds every
// problem, one per line, "<file>:<line>: <key.path>: <what is wrong>".
Result<Config> LoadConfig(const std::string& path, const HostFacts& host = HostFacts::Detect());

// Same, from text already in memory; `path` is used only in messages.
Result<Config> ParseConfig(const std::string& text, const std::string& path, const HostFacts& host);

}  // namespace slotd
