#include "daemon/admission.h"

#include <unistd.h>

#include "agent/foreign_holders.h"
#include "fleet/agent_document.h"
#include "fleet/registrar.h"

namespace slotd {

EtcdSeat EtcdSeatOf(const Config& config, const EtcdClient& client) {
  return {&client, AgentKey(config.etcd->key_namespace, config.agent.id), config.agent.var_base_path + "/etcd-lease"};
}

Result<Admission> AdmitAgent(const Config& config, ContainerEngine& engine, const AgentClaims& mine,
                             uint64_t node_memory, const std::optional<EtcdSeat>& etcd) {
  if (etcd) {
    if (Status s = CheckAgentIdFree(*etcd->client, etcd->key, etcd->lease_file); !s.ok()) return s;
  }

  const std::string& ipc = config.agent.ipc_base_path;
  if (Status s = MakeDirs(ipc); !s.ok()) return s.WithPrefix("agent.ipc-base-path");
  if (Status s = MakeDirs(config.agent.var_base_path); !s.ok()) return s.WithPrefix("agent.var-base-path");
  Admission admission;
  auto lock = LockFile::Acquire(ipc + "/agent.lock");
  if (!lock.ok())
    return lock.status().WithPrefix("another agent uses ipc-base-path " + ipc +
                                    "; give each agent its own ipc-base-path");
  admission.ipc_lock = std::move(*lock);

  auto claims = NodeClaims::Register(config.node.claims_dir, mine, node_memory,
                                     [&] {
                                       Result<std::vector<ContainerInfo>> listed = ListOwnedContainers(engine);
                                       if (!listed.ok()) return listed.status();
                                       if (Status s = InspectForeignCpusets(engine, *listed, mine.agent_id); !s.ok())
                                         return s;
                                       admission.listed = std::move(*listed);
                                       return CheckForeignHolders(admission.listed, mine);
                                     });
  if (!claims.ok()) return claims.status();
  admission.claims = std::move(*claims);

  auto lease = EngineLease::Take(engine,
                                 {config.agent.id, config.node.claims_dir, config.agent.node, static_cast<int>(getpid())},
                                 &NodeClaims::IsLive);
  if (!lease.ok()) return lease.status();
  admission.lease = std::move(*lease);
  return admission;
}

}  // namespace slotd
