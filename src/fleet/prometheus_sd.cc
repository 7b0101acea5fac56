#include "fleet/prometheus_sd.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace slotd {

std::string PrometheusTargets(const std::vector<AgentDocument>& agents) {
  std::vector<const AgentDocument*> sorted;
  for (const AgentDocument& agent : agents) sorted.push_back(&agent);
  std::sort(sorted.begin(), sorted.end(), [](const AgentDocument* a, const AgentDocument* b) { return a->id < b->id; });
  nlohmann::json groups = nlohmann::json::array();
  for (const AgentDocument* agent : sorted) {
    nlohmann::json labels = {{"node", agent->node}, {"agent_id", agent->id}, {"scaling_group", agent->scaling_group}};
    if (agent->scheme == "https") labels["__scheme__"] = "https";  // overrides the scrape job's scheme
    groups.push_back({{"targets", {agent->address}}, {"labels", labels}});
  }
  return groups.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace slotd
