// EngineLease: the mark a running agent keeps in its container engine so
// that two agents with one id never run against one engine. The claims
// directory keeps apart the agents that share it; two agents with the same
// id but different claims directories (a copied config, a second claims-dir)
// would not see each other there, yet each would take the other's containers
// for its own, since an agent's containers are known by its id. The engine is
// the ground they share: each agent keeps there a volume named for its id and
// claims directory, labelled with both, its node and its pid, and refuses to
// start while another agent of its id, with another claims directory, is
// alive (holds its liveness lock there, NodeClaims::IsLive).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "engine/container_engine.h"

namespace slotd {

// Label keys of a lease volume.
namespace lease_label {
inline constexpr char kAgentId[] = "ai.backend.slotd.lease.agent-id";
inline constexpr char kClaimsDir[] = "ai.backend.slotd.lease.claims-dir";
inline constexpr char kNode[] = "ai.backend.slotd.lease.node";
inline constexpr char kPid[] = "ai.backend.slotd.lease.pid";
}  // namespace lease_label

// Who holds a lease: enough to find the agent and tell whether it lives.
struct LeaseHolder {
  std::string agent_id;
  std::string claims_dir;
  std::string node;
  int pid = 0;
};

class EngineLease {
 public:
  // Whether the agent `agent_id` registered in `claims_dir` is alive now.
  using IsLive = std::function<bool(const std::string& claims_dir, const std::string& agent_id)>;

  // Records `me`'s lease in `engine`, then looks at every lease of its id:
  // one of another claims directory whose agent is alive is a refusal
  // (kFailedPrecondition naming that claims directory, node and pid, and
  // what to do); one whose agent is dead is removed. kUnavailable (with the
  // engine's message) when the engine cannot be asked. Two agents that start
  // at once may both refuse; neither runs beside the other.
  static Result<std::unique_ptr<EngineLease>> Take(ContainerEngine& engine, const LeaseHolder& me,
                                                   const IsLive& is_live);

  // The volume name of `holder`'s lease: slotd-lease-<len(id)>-<id>-<hash of
  // the claims directory>, unique per (id, claims directory).
  static std::string VolumeName(const LeaseHolder& holder);

  // Removes the lease from the engine (a clean stop); errors are logged.
  void Release();

 private:
  EngineLease(ContainerEngine& engine, std::string volume) : engine_(engine), volume_(std::move(volume)) {}

  ContainerEngine& engine_;
  const std::string volume_;
};

}  // namespace slotd
