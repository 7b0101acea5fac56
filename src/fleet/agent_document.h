// AgentDocument: what an agent publishes about itself under
// <namespace>/agents/<agent-id> in etcd, and what `slotctl cluster` and
// `slotctl run --place` read back. One schema, written and read here.
//
// The document changes only when the agent's state does (slots, drains,
// device health, kernels): it carries no time that ticks, so an idle agent
// never rewrites it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace slotd {

// "<key_namespace>/agents/": the prefix of every agent's key.
inline std::string AgentsPrefix(const std::string& key_namespace) { return key_namespace + "/agents/"; }
// "<key_namespace>/agents/<agent_id>": where an agent's document lives.
inline std::string AgentKey(const std::string& key_namespace, const std::string& agent_id) {
  return AgentsPrefix(key_namespace) + agent_id;
}

// One slot type's numbers: cores, bytes, ports or devices.
struct SlotUse {
  int64_t capacity = 0;
  int64_t used = 0;
  int64_t free = 0;  // what a new kernel could get now: for devices, neither held, unhealthy nor drained

  bool operator==(const SlotUse&) const = default;
};

// One device of the agent.
struct RegisteredDevice {
  std::string id;      // as allowed-devices names it: "GPU-…", "MIG-…", "mock0"
  std::string slot;    // "cuda.device", "cuda.mig-1c18g", "mock.device"
  std::string health;  // "healthy", "unhealthy", "unknown"
  bool drained = false;
  bool held = false;   // a kernel holds it

  bool operator==(const RegisteredDevice&) const = default;
};

struct AgentDocument {
  std::string id;
  std::string node;
  std::string address;  // "host:port" of the agent's HTTP API
  std::string scheme = "http";  // how the API at `address` speaks: "http", or "https" (TLS); an older agent's: "http"
  std::string version;
  std::string scaling_group;
  bool draining = false;
  std::optional<int64_t> drain_deadline;  // unix seconds when its kernels are stopped; unset: none
  std::map<std::string, SlotUse> slots;  // "cpu", "mem", "ports", and one per device slot type
  std::vector<RegisteredDevice> devices;
  int64_t kernels = 0;  // kernels the agent holds for its users (not yet terminated; warm pools' not counted)
  int64_t warm = 0;     // WARM kernels of its warm pools, ready to be given

  bool operator==(const AgentDocument&) const = default;

  // Fills slots and devices from the agent's resources as GET /v1/agent
  // describes them (each slot's capacity/used/free, and its devices' health,
  // drain and holder).
  void SetResources(const nlohmann::json& described);

  nlohmann::json ToJson() const;
  // The base URL of the agent's API: "<scheme>://<address>".
  std::string Url() const { return scheme + "://" + address; }

  // Reads a document from etcd: anything not an object with a valid id, or
  // with a field of the wrong type (or a scheme other than http and https),
  // is an error naming the field. Unknown fields are ignored (a newer agent
  // may add some).
  static Result<AgentDocument> FromJson(std::string_view text);
};

}  // namespace slotd
