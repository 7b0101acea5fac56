// Node claims: what each agent of a node holds exclusively, recorded in the
// node's shared claims directory so that no core, device, port, path or id is
// ever held by two live agents at once.
//
// Layout of claims-dir:
//   claims.lock      flock held while an agent verifies and records its claims
//   <agent-id>.json  the agent's claims (AgentClaims as JSON)
//   <agent-id>.live  flock held by the agent for its whole life
// A claim counts only while its .live lock is held: the kernel drops the lock
// when the agent dies, even by SIGKILL, so a dead agent's claims are void
// without any clean-up step.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/lock_file.h"
#include "common/status.h"
#include "config/config.h"

namespace slotd {

// Everything one agent holds exclusively on its node.
struct AgentClaims {
  std::string agent_id;
  int pid = 0;
  std::string config_path;  // the agent's agent.toml, made absolute
  std::string api_host;
  int api_port = 0;  // 0: picked at bind time (then updated in the claim file)
  std::string ipc_base_path;
  std::string var_base_path;
  std::string scratch_root;  // empty in claims of agents that had none
  int port_first = 0;
  int port_last = 0;  // inclusive
  std::vector<int> cores;
  uint64_t memory_bytes = 0;
  std::map<std::string, std::vector<std::string>> devices;  // plugin ("cuda", "mock") -> device ids

  nlohmann::json ToJson() const;
  // Parses a claim file's JSON; kInvalidArgument naming the field.
  static Result<AgentClaims> FromJson(nlohmann::json j);
};

// The claims a config makes, with the device ids its plugins own.
AgentClaims ClaimsOf(const Config& config, const std::map<std::string, std::vector<std::string>>& devices);

// Whether two device claims meet. A claim names a device by its id, or a part
// of a device as "<whole>/<part>" (a MIG instance of a GPU): two claims meet
// when one is the other, when one is a whole device and the other a part of
// it, or when both end in the same id (a part named with and without its
// whole). "GPU-a" meets "GPU-a/MIG-1"; "GPU-a/MIG-1" does not meet "GPU-a/MIG-2".
bool DevicesOverlap(const std::string& a, const std::string& b);

// One value two claim sets both hold: what ("cpu core") and which ("3").
struct Clash {
  std::string what;
  std::string value;
};

// Every value `a` and `b` both claim: agent id, API port (when both are
// fixed), ipc and var paths, a scratch root that is, contains or lies
// inside one of the other's paths, overlapping port ranges, cores, devices
// (DevicesOverlap; the value names both claims when they differ).
std::vector<Clash> FindClashes(const AgentClaims& a, const AgentClaims& b);

// A registration in the claims directory, live for the object's lifetime.
class NodeClaims {
 public:
  // Under the directory lock: reads every live claim in `dir`, refuses when
  // one clashes with `mine` (naming the other agent, its pid and the value)
  // or when the live memory shares and `mine` add up to more than
  // `node_memory`, runs `extra_check` (kept under the lock so that what it
  // checks cannot change meanwhile), then records `mine` and takes its
  // liveness lock. Errors are kFailedPrecondition; I/O errors kUnavailable.
  static Result<std::unique_ptr<NodeClaims>> Register(const std::string& dir, const AgentClaims& mine,
                                                      uint64_t node_memory,
                                                      const std::function<Status()>& extra_check);

  // Whether agent `agent_id` registered in `dir` is alive now (holds its
  // liveness lock there).
  static bool IsLive(const std::string& dir, const std::string& agent_id);

  // The live claims in `dir`, sorted by agent id; dead agents' files are skipped.
  static Result<std::vector<AgentClaims>> ReadLive(const std::string& dir);

  // Rewrites this agent's claim file with the API port actually bound.
  Status SetApiPort(int port);

  ~NodeClaims();

 private:
  NodeClaims(std::string dir, AgentClaims mine, std::unique_ptr<LockFile> live)
      : dir_(std::move(dir)), mine_(std::move(mine)), live_(std::move(live)) {}

  const std::string dir_;
  AgentClaims mine_;
  std::unique_ptr<LockFile> live_;
};

}  // namespace slotd
