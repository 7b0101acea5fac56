// Start-up admission: whether this agent may run on its node, decided in
// one place and one order before it touches a container. Each step runs only
// after the one before it passed, and a refusal says what to do.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/lock_file.h"
#include "common/status.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "fleet/etcd_client.h"
#include "node/claims.h"
#include "node/engine_lease.h"

namespace slotd {

// What an admitted agent holds while it runs; each is let go when dropped
// (the engine lease only by Release, on a clean stop).
struct Admission {
  std::unique_ptr<LockFile> ipc_lock;  // <ipc-base-path>/agent.lock: the only agent of its ipc directory
  std::unique_ptr<NodeClaims> claims;  // its share of the node, registered among the node's agents
  std::unique_ptr<EngineLease> lease;  // its id, marked in the engine
  // The node's owner-labelled containers, as the foreign-holder check listed
  // them: Agent::Restore adopts the agent's own from this list.
  std::vector<ContainerInfo> listed;
};

// Where an agent registers in etcd ([etcd]).
struct EtcdSeat {
  const EtcdClient* client = nullptr;
  std::string key;         // the key of its document
  std::string lease_file;  // where it keeps its etcd lease between runs
};

// The seat of the agent of `config` in `client`'s cluster.
EtcdSeat EtcdSeatOf(const Config& config, const EtcdClient& client);

// Admits the agent of `config`, which claims `mine` of a node with
// `node_memory` bytes, in this order:
//  1. its id is registered nowhere in etcd (`etcd`, when [etcd] is set);
//  2. its ipc and var directories exist and no other agent holds its ipc lock;
//  3. its claims are registered among the node's agents in claims-dir with
//     no overlap, and no running container of another owner holds what it
//     claims (CheckForeignHolders);
//  4. no live agent of its id with another claims directory uses `engine`
//     (EngineLease).
// Returns the first refusal (its message names the key or path and the
// remedy); what the steps before it took is given back.
Result<Admission> AdmitAgent(const Config& config, ContainerEngine& engine, const AgentClaims& mine,
                             uint64_t node_memory, const std::optional<EtcdSeat>& etcd);

}  // namespace slotd
