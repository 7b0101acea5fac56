#include "fleet/prometheus_sd.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

namespace slotd {

std::string PrometheusTargets(const std::vector<AgentDocument>& agents) {
  std::vector<const AgentDocument*> sorted;
  for (const AgentDocument& agent : agents) sorted.push_back(&agent);
  std::sort(sorted.begin(), sorted.end(), [](const AgentDocument* a, const AgentDocument* b) { return a->id < b->id; });
  nlohmann::json groups = nlohmann::json::array();
  for (const AgentDocument* agent : sorted)
    groups.push_back({{"targets", {agent->address}},
                      {"labels", {{"node", agent->node}, {"agent_id", agent->id}, {"scaling_group", agent->scaling_group}}}});
  return groups.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::trunc | std::ios::binary);
    out << text;
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      return Status::Unavailable("cannot write " + temp + ": " + std::strerror(errno) +
                                 " (check that its directory exists and is writable)");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temp.c_str());
    return Status::Unavailable("cannot replace " + path + ": " + why);
  }
  return Status::Ok();
}

}  // namespace slotd
