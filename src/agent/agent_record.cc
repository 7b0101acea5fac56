#include "agent/agent_record.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"

namespace slotd {

using nlohmann::json;

Result<AgentRecord> AgentRecord::Load(const std::string& path) {
  AgentRecord record;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return record;
    return Status::Unavailable("cannot read " + path + ": " + std::strerror(errno));
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const json doc = json::parse(text.str());
    record.draining = doc.value("draining", false);
    record.draining_since = doc.value("draining_since", int64_t{0});
    record.drained = doc.value("drained", json::object()).get<std::map<std::string, std::set<std::string>>>();
    record.owned = doc.value("owned", json::object()).get<std::map<std::string, std::vector<std::string>>>();
    const json all_marks = doc.value("marks", json::object());
    for (const auto& [plugin, marks] : all_marks.items())
      for (const auto& [id, mark] : marks.items())
        record.marks[plugin][id] = DeviceMark{mark.at("reason").get<std::string>(), mark.at("since").get<int64_t>()};
  } catch (const json::exception& e) {
    return Status::InvalidArgument(path + " is not an agent state record (" + e.what() + ")");
  }
  return record;
}

Status AgentRecord::Save(const std::string& path) const {
  json marks_json = json::object();
  for (const auto& [plugin, marks] : marks)
    for (const auto& [id, mark] : marks) marks_json[plugin][id] = {{"reason", mark.reason}, {"since", mark.since}};
  const json doc = {{"draining", draining},
                    {"draining_since", draining_since},
                    {"drained", drained},
                    {"marks", marks_json},
                    {"owned", owned}};
  return WriteFileAtomically(path, doc.dump(2) + "\n");
}

}  // namespace slotd
