#include "agent/agent_record.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/json_reader.h"

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
  std::optional<json> doc = ParseJsonWithin(text.str());
  if (!doc) return Status::InvalidArgument(path + " is not an agent state record (not JSON)");
  const JsonReader reader(std::move(*doc));
  const JsonField root = reader.Root();
  record.draining = root.Optional("draining").Bool();
  record.draining_since = root.Optional("draining_since").Int();
  if (root.Has("drain_deadline") && !root["drain_deadline"].IsNull()) record.drain_deadline = root["drain_deadline"].Int();
  for (const auto& [plugin, ids] : root.Optional("drained").Members())
    for (const JsonField& id : ids.Elements()) record.drained[plugin].insert(id.String());
  for (const auto& [plugin, ids] : root.Optional("owned").Members())
    for (const JsonField& id : ids.Elements()) record.owned[plugin].push_back(id.String());
  for (const auto& [plugin, marks] : root.Optional("marks").Members())
    for (const auto& [id, mark] : marks.Members())
      record.marks[plugin][id] = DeviceMark{mark["reason"].String(), mark["since"].Int()};
  if (Status s = reader.Check(path + " is not an agent state record"); !s.ok()) return s;
  return record;
}

Status AgentRecord::Save(const std::string& path) const {
  json marks_json = json::object();
  for (const auto& [plugin, marks] : marks)
    for (const auto& [id, mark] : marks) marks_json[plugin][id] = {{"reason", mark.reason}, {"since", mark.since}};
  const json doc = {{"draining", draining},
                    {"draining_since", draining_since},
                    {"drain_deadline", drain_deadline ? json(*drain_deadline) : json(nullptr)},
                    {"drained", drained},
                    {"marks", marks_json},
                    {"owned", owned}};
  return WriteFileAtomically(path, doc.dump(2) + "\n");
}

}  // namespace slotd
