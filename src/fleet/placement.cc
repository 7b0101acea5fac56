#include "fleet/placement.h"

#include <algorithm>
#include <limits>

#include "common/units.h"

namespace slotd {

namespace {

bool Eligible(const AgentDocument& agent, const PlacementRequest& request) {
  return !agent.draining && (request.scaling_group.empty() || agent.scaling_group == request.scaling_group);
}

// The free amount of `slot` on `agent`; 0 when it has no such slot.
int64_t FreeOf(const AgentDocument& agent, const std::string& slot) {
  auto it = agent.slots.find(slot);
  return it == agent.slots.end() ? 0 : std::max<int64_t>(it->second.free, 0);
}

bool Fits(const AgentDocument& agent, const PlacementRequest& request) {
  return std::all_of(request.slots.begin(), request.slots.end(),
                     [&](const auto& wanted) { return wanted.second <= 0 || FreeOf(agent, wanted.first) >= wanted.second; });
}

// What stays free of the requested slots after placing `request` on `agent`,
// as fractions of each slot's capacity, summed: lower is a tighter fit.
double Leftover(const AgentDocument& agent, const PlacementRequest& request) {
  double left = 0;
  for (const auto& [slot, amount] : request.slots) {
    if (amount <= 0) continue;
    auto it = agent.slots.find(slot);
    if (it == agent.slots.end() || it->second.capacity <= 0) continue;
    left += static_cast<double>(it->second.free - amount) / static_cast<double>(it->second.capacity);
  }
  return left;
}

// How much of `request` `agent` could take: the sum over the requested slots
// of free / requested, each capped at 1 — for "the largest free slice".
double Coverage(const AgentDocument& agent, const PlacementRequest& request) {
  double covered = 0;
  for (const auto& [slot, amount] : request.slots)
    if (amount > 0) covered += std::min(1.0, static_cast<double>(FreeOf(agent, slot)) / static_cast<double>(amount));
  return covered;
}

std::string SlotAmount(const std::string& slot, int64_t amount) {
  return slot + " " + (slot == "mem" ? DescribeSize(static_cast<uint64_t>(std::max<int64_t>(amount, 0))) : std::to_string(amount));
}

}  // namespace

std::string DescribeSlots(const std::map<std::string, int64_t>& slots) {
  std::string text;
  for (const auto& [slot, amount] : slots)
    if (amount > 0) text += (text.empty() ? "" : ", ") + SlotAmount(slot, amount);
  return text.empty() ? "nothing" : text;
}

std::vector<size_t> RankAgents(const std::vector<AgentDocument>& agents, const PlacementRequest& request) {
  std::vector<size_t> ranked;
  for (size_t i = 0; i < agents.size(); ++i)
    if (Eligible(agents[i], request) && Fits(agents[i], request)) ranked.push_back(i);
  std::vector<double> leftover(agents.size(), 0);
  for (size_t i : ranked) leftover[i] = Leftover(agents[i], request);
  std::sort(ranked.begin(), ranked.end(), [&](size_t a, size_t b) {
    if (leftover[a] != leftover[b]) return leftover[a] < leftover[b];
    if (agents[a].kernels != agents[b].kernels) return agents[a].kernels < agents[b].kernels;
    return agents[a].id < agents[b].id;
  });
  return ranked;
}

std::string NoPlacementMessage(const std::vector<AgentDocument>& agents, const PlacementRequest& request) {
  std::string message = "no agent can take " + DescribeSlots(request.slots);
  if (!request.scaling_group.empty()) message += " in scaling group " + request.scaling_group;
  int draining = 0, other_group = 0;
  const AgentDocument* largest = nullptr;
  double best = -1;
  for (const AgentDocument& agent : agents) {
    if (!request.scaling_group.empty() && agent.scaling_group != request.scaling_group) {
      ++other_group;
      continue;
    }
    if (agent.draining) {
      ++draining;
      continue;
    }
    const double covered = Coverage(agent, request);
    if (covered > best) best = covered, largest = &agent;
  }
  if (agents.empty()) return message + ": no agent is registered";
  if (largest == nullptr) {
    message += ": every agent is draining or in another scaling group";
  } else {
    std::map<std::string, int64_t> free;
    for (const auto& [slot, amount] : request.slots)
      if (amount > 0) free[slot] = FreeOf(*largest, slot);
    std::string slice;
    for (const auto& [slot, amount] : free) slice += (slice.empty() ? "" : ", ") + SlotAmount(slot, amount);
    message += ": the largest free slice is agent " + largest->id + " on node " + largest->node + " with " + slice;
  }
  message += " (" + std::to_string(agents.size()) + (agents.size() == 1 ? " agent" : " agents");
  if (draining > 0) message += "; " + std::to_string(draining) + " draining";
  if (other_group > 0) message += "; " + std::to_string(other_group) + " in other scaling groups";
  return message + ")";
}

}  // namespace slotd
