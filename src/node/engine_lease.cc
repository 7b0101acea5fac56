#include "node/engine_lease.h"

#include <cstdint>
#include <cstdio>

#include <spdlog/spdlog.h>

namespace slotd {

namespace {

// FNV-1a, 64 bits: a stable hash of a path for a volume name.
uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

Labels LabelsOf(const LeaseHolder& holder) {
  return {{lease_label::kAgentId, holder.agent_id},
          {lease_label::kClaimsDir, holder.claims_dir},
          {lease_label::kNode, holder.node},
          {lease_label::kPid, std::to_string(holder.pid)}};
}

LeaseHolder HolderOf(const Labels& labels) {
  LeaseHolder holder;
  auto get = [&](const char* key) {
    auto it = labels.find(key);
    return it == labels.end() ? std::string() : it->second;
  };
  holder.agent_id = get(lease_label::kAgentId);
  holder.claims_dir = get(lease_label::kClaimsDir);
  holder.node = get(lease_label::kNode);
  holder.pid = std::atoi(get(lease_label::kPid).c_str());
  return holder;
}

}  // namespace

std::string EngineLease::VolumeName(const LeaseHolder& holder) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(Fnv1a(holder.claims_dir)));
  return "slotd-lease-" + std::to_string(holder.agent_id.size()) + "-" + holder.agent_id + "-" + hash;
}

Result<std::unique_ptr<EngineLease>> EngineLease::Take(ContainerEngine& engine, const LeaseHolder& me,
                                                       const IsLive& is_live) {
  const std::string volume = VolumeName(me);
  // A lease of this id and claims directory is this agent's own, left by an
  // earlier run (the claims directory lets one agent of an id live there):
  // written again, so that its pid is this one's.
  if (Status s = engine.RemoveVolume(volume); !s.ok() && s.code() != Status::Code::kNotFound)
    return s.WithPrefix("renewing this agent's lease in the engine (volume " + volume + ")");
  if (Status s = engine.CreateVolume(volume, LabelsOf(me)); !s.ok())
    return s.WithPrefix("recording this agent's lease in the engine (volume " + volume + ")");
  auto leases = engine.ListVolumes({std::string(lease_label::kAgentId) + "=" + me.agent_id});
  if (!leases.ok()) return leases.status().WithPrefix("listing the engine's agent leases");
  for (const VolumeInfo& lease : *leases) {
    if (lease.name == volume) continue;
    const LeaseHolder other = HolderOf(lease.labels);
    if (other.agent_id != me.agent_id || other.claims_dir == me.claims_dir) continue;
    if (!is_live(other.claims_dir, other.agent_id)) {
      Status removed = engine.RemoveVolume(lease.name);
      if (!removed.ok() && removed.code() != Status::Code::kNotFound)
        spdlog::warn("could not remove the stale lease {} of a stopped agent {}: {}", lease.name, other.agent_id,
                     removed.message());
      continue;
    }
    Status refusal = Status::FailedPrecondition(
        "another agent with id " + me.agent_id + " runs against this engine (node " + other.node + ", pid " +
        std::to_string(other.pid) + ", claims-dir " + other.claims_dir + "); both would act on the same containers. "
        "Give this agent another agent.id, or the same node.claims-dir so that the node refuses the second one");
    if (Status removed = engine.RemoveVolume(volume); !removed.ok() && removed.code() != Status::Code::kNotFound)
      spdlog::warn("could not remove this agent's own lease {}: {}", volume, removed.message());
    return refusal;
  }
  return std::unique_ptr<EngineLease>(new EngineLease(engine, volume));
}

void EngineLease::Release() {
  Status removed = engine_.RemoveVolume(volume_);
  if (!removed.ok() && removed.code() != Status::Code::kNotFound)
    spdlog::warn("could not remove this agent's lease {} from the engine: {}", volume_, removed.message());
}

}  // namespace slotd
