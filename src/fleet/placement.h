// Placement: which registered agent a new kernel should go to. A pure
// function of the agents' documents, used by `slotctl run --place`.
//
// An agent can take a request when it is not draining, is in the requested
// scaling group (when one is given), and every requested slot has at least
// that much free (a device's free count leaves out held, unhealthy and
// drained devices, so those are skipped too). Among those, best fit: the
// agent that the request leaves with the least free capacity — the sum, over
// the requested slots, of what stays free as a fraction of the slot's
// capacity — so that large free slices stay whole for large requests. Ties
// go to the agent with fewer kernels, then to the smaller id.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fleet/agent_document.h"

namespace slotd {

struct PlacementRequest {
  std::map<std::string, int64_t> slots;  // "cpu" cores, "mem" bytes, "ports", "cuda.device", ...; 0s are ignored
  std::string scaling_group;             // empty: any
};

// The indexes of the agents in `agents` that can take `request`, best fit first.
std::vector<size_t> RankAgents(const std::vector<AgentDocument>& agents, const PlacementRequest& request);

// Why no agent can take `request`, for the user: what was asked, the largest
// free slice of the agents that were eligible (not draining, in the group),
// and how many were left out for draining or another scaling group, e.g.
// "no agent can take cpu 4, mem 8 GiB, cuda.device 1: the largest free slice is
// agent gpu1-a on node gpu1 with cpu 2, mem 64 GiB, cuda.device 1 (3 agents;
// 1 draining)".
std::string NoPlacementMessage(const std::vector<AgentDocument>& agents, const PlacementRequest& request);

// A request's slots as the messages write them: "cpu 4, mem 8 GiB, cuda.device 1".
std::string DescribeSlots(const std::map<std::string, int64_t>& slots);

}  // namespace slotd
