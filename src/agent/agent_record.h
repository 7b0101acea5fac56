// AgentRecord: what the agent keeps of its own state across restarts, in
// <var-base-path>/state.json: whether it is draining (closed to new
// kernels), its drained devices, the devices' health marks (an Xid stays
// until the operator clears it, restart or not), and the devices it owned,
// so that a changed layout (MIG instances gone or new, a GPU missing) is
// reported at start. Kernels are not in it: their record is their labels.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "resources/device_health.h"

namespace slotd {

struct AgentRecord {
  bool draining = false;          // the agent takes no new kernels
  int64_t draining_since = 0;     // unix seconds; 0 when not draining
  std::optional<int64_t> drain_deadline;  // unix seconds when its kernels are stopped; unset: never
  std::map<std::string, std::set<std::string>> drained;              // plugin -> device ids
  std::map<std::string, std::map<std::string, DeviceMark>> marks;     // plugin -> device id -> mark
  std::map<std::string, std::vector<std::string>> owned;             // plugin -> device ids

  // Reads `path`; an absent file is an empty record. kInvalidArgument naming
  // the file when it is not a record (the agent then starts from an empty one).
  static Result<AgentRecord> Load(const std::string& path);
  // Writes `path` whole or not at all (WriteFileAtomically): on failure
  // (kUnavailable naming the path) the previous record stays as it was.
  Status Save(const std::string& path) const;

  bool operator==(const AgentRecord&) const = default;
};

}  // namespace slotd
