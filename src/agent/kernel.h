// Kernels: what a user asks for (CreateRequest), what the agent knows about
// one (Kernel), and their two serialised forms — the API's JSON and the
// container labels that are the agent's only record.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "config/choices.h"
#include "engine/container_engine.h"
#include "resources/allocation.h"

namespace slotd {

// Label keys set on every container the agent creates.
namespace label {
inline constexpr char kOwner[] = "ai.backend.owner";
inline constexpr char kAgentId[] = "ai.backend.agent-id";
inline constexpr char kKernelId[] = "ai.backend.kernel-id";
inline constexpr char kSessionId[] = "ai.backend.session-id";
inline constexpr char kAllocations[] = "ai.backend.allocations";
// The canonical create request, so a repeat can be told from a conflict after a restart.
inline constexpr char kRequest[] = "ai.backend.slotd.request";
// When the kernel's lifetime runs out, in unix seconds; absent: never.
inline constexpr char kDeadline[] = "ai.backend.slotd.deadline";
// The format of these labels, a whole number; absent means format 1.
// kCurrentFormat is the newest this version reads and writes; it writes
// each kernel in the oldest format that holds it (LabelFormatFor).
inline constexpr char kFormat[] = "ai.backend.slotd.label-format";
inline constexpr char kReservedPrefix[] = "ai.backend.";
inline constexpr int kCurrentFormat = 4;
}  // namespace label

// Brings the labels of an owned container written in any earlier label
// format to the current one; the one place where old formats are read.
// Format 1 (slotd 0.1.0, no format label) -> 2: adds the format label.
// Format 2 -> 3: the request may hold max_lifetime, resources.shm, mounts and
// pull, and the deadline label may be set; a format 2 container has none of
// them, so nothing changes but the format.
// Format 3 -> 4: the request may hold resources.scratch; a format 3
// container has none, so nothing changes but the format.
// kFailedPrecondition naming the container and both formats when they were
// written by a newer slotd: this version cannot know what they mean.
Result<Labels> MigrateLabels(const Labels& labels, const std::string& container_name);

// A host directory a request asks to have mounted (checked against
// [container] mount-allow by the agent, agent/mounts.h).
struct RequestedMount {
  std::string source;      // an absolute host path, as asked
  std::string target;      // an absolute path in the container, normalised
  bool read_only = false;

  bool operator==(const RequestedMount&) const = default;
};

// The longest image name a request may give.
inline constexpr size_t kMaxImageName = 512;

// "none", "tag", "digest"; nullopt for anything else.
std::optional<PullPolicy> ParsePullPolicy(std::string_view name);
const char* PullPolicyName(PullPolicy policy);

// A validated create request.
struct CreateRequest {
  std::string kernel_id;   // generated when the request has none
  std::string session_id;  // defaults to the kernel id
  std::string image;
  std::vector<std::string> command;
  std::map<std::string, std::string> env;
  ResourceRequest resources;
  std::map<std::string, std::string> labels;  // user labels, never "ai.backend.*"
  // How long the kernel may run from its creation; unset: as long as
  // [container] max-lifetime allows (no limit when that is 0).
  std::optional<std::chrono::milliseconds> max_lifetime;
  std::vector<RequestedMount> mounts;
  // A pull policy stricter than the agent's; unset: the agent's.
  std::optional<PullPolicy> pull;

  // The request as canonical JSON (normalised sizes, sorted maps): two
  // requests are "the same" exactly when these are equal.
  nlohmann::json Canonical() const;
};

// Parses and validates an API create body. kInvalidArgument names the field:
// "resources.mem: invalid size ..." / "kernel_id: must match ...".
Result<CreateRequest> ParseCreateRequest(const nlohmann::json& body);

// Restores a CreateRequest from its Canonical() form (label kRequest).
Result<CreateRequest> CreateRequestFromCanonical(const nlohmann::json& canonical);

// True when `id` is a valid kernel id: [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
bool IsValidKernelId(const std::string& id);

enum class KernelState { kPulling, kPreparing, kRunning, kTerminating, kTerminated, kError };
const char* KernelStateName(KernelState state);

// What the agent knows about one kernel.
struct Kernel {
  CreateRequest request;
  std::string agent_id;
  std::string container_id;  // empty while PREPARING
  std::optional<int> exit_code;
  std::string reason;        // why it is TERMINATED or ERROR
  // What is wrong with a RUNNING kernel's container as changed behind the
  // agent's back (paused, its cpuset or memory limit updated); empty: nothing.
  std::string condition;
  // What is wrong with the devices it holds (unhealthy, missing); empty: nothing.
  std::string device_condition;
  // How many of its processes the engine reported killed for lack of memory
  // (oom events) since the agent knows it; a child killed while PID 1 runs
  // on is a condition of the running kernel, not its end.
  int oom_kills = 0;
  Allocation allocation;
  bool holds_resources = false;  // whether `allocation` is taken from the plugins now
  int64_t created_at = 0;    // unix seconds
  // Unix seconds when it ended, as the engine saw it (the container's end);
  // unset while it runs, and when the engine does not say (it never started).
  std::optional<int64_t> terminated_at;
  std::optional<int64_t> deadline;  // unix seconds when its lifetime runs out; unset: never
  uint64_t container_seq = 0;  // the agent's mutation sequence when its container appeared

  const std::string& id() const { return request.kernel_id; }
  // Where it is in its lifecycle. Only KernelTable's transitions change it.
  KernelState state() const { return state_; }
  // condition, the oom kills ("2 processes killed for lack of memory") and
  // device_condition, joined by "; "; empty when none is set.
  std::string Conditions() const;
  // The API form: kernel_id, session_id, agent_id, container_id, image,
  // command, state, exit_code, reason, allocations, ports, labels,
  // created_at, terminated_at, deadline.
  nlohmann::json ToJson() const;

 private:
  friend class KernelTable;
  KernelState state_ = KernelState::kPreparing;
};

// The label format a kernel with `request` is written in: the oldest that
// holds all of it, so that an older slotd (after a downgrade) adopts every
// kernel that uses nothing it lacks, and refuses one that does by its
// format check, touching nothing. 4 for a request with resources.scratch,
// else 3.
int LabelFormatFor(const CreateRequest& request);

// The labels a kernel's container carries (owner, ids, allocations,
// request, user labels, the format of LabelFormatFor).
Labels KernelLabels(const Kernel& kernel);

// Rebuilds a kernel from an owned container's labels (state, exit code and
// holds_resources are left for the caller). kInvalidArgument names the label.
Result<Kernel> KernelFromContainer(const ContainerInfo& info);

// The container name of a kernel: slotd-<length of agent-id>-<agent-id>-<kernel-id>,
// e.g. slotd-6-gpu1-a-k-0001. Read from the left, the length says where the
// agent id ends, so no two (agent, kernel) pairs share a name: agent "adv"
// with kernel "a-k1" and agent "adv-a" with kernel "k1" get slotd-3-adv-a-k1
// and slotd-5-adv-a-k1. The engine refuses a second container of one name.
std::string ContainerName(const std::string& agent_id, const std::string& kernel_id);

}  // namespace slotd
