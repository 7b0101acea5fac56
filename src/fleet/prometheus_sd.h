// Prometheus file-based service discovery for a fleet of agents: one target
// per registered agent (its API address, whose /metrics Prometheus scrapes)
// with the labels node, agent_id and scaling_group, and __scheme__ "https"
// for an agent whose API speaks TLS.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "fleet/agent_document.h"

namespace slotd {

// The file_sd JSON of `agents`: [{"targets": ["host:port"], "labels": {...}}, ...], in agent id order.
std::string PrometheusTargets(const std::vector<AgentDocument>& agents);

}  // namespace slotd
