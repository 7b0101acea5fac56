// Kernels: what a user asks for (CreateRequest), what the agent knows about
// one (Kernel), and the API's JSON of a kernel. The container labels that are
// the agent's only record have their own codec (model/label_codec.h); the
// API's bounds on a request are the API's (model/create_request.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/health_check.h"
#include "model/image_user.h"
#include "model/kernel_policy.h"
#include "common/status.h"
#include "config/choices.h"
#include "model/container.h"
#include "model/image_ref.h"
#include "model/allocation.h"

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
// The warm pool ([[pool]] name) a container was made for: kept started for
// a create that matches it (agent/warm_pool.h); absent: an ordinary kernel.
inline constexpr char kWarmPool[] = "ai.backend.slotd.warm-pool";
// The user its processes run as, "uid:gid" (RunAs::Text), decided once at
// create and given to the engine as those numbers. Read by every format
// since 7 and written by it without raising a kernel's format: an older
// slotd that ignores it still runs the kernel as the numbers the container
// itself was given. Absent: a kernel made before it was recorded.
inline constexpr char kRunAs[] = "ai.backend.slotd.run-as";
// On a container made only to read an image's /etc/passwd and /etc/group
// (never started, removed at once): the id of the agent that made it, whose
// Restore removes one it left behind. Such a container has no owner label.
inline constexpr char kUserProbe[] = "ai.backend.slotd.user-probe";
inline constexpr char kReservedPrefix[] = "ai.backend.";
inline constexpr int kCurrentFormat = 7;
}  // namespace label

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

// Which of a request's ids were generated because it named none. Not part of
// what the request asks: two requests differing only here are equal.
struct IdOrigin {
  bool kernel_generated = false;   // no kernel_id: a warm kernel may be given (with its own id)
  bool session_generated = false;  // no session_id: it is the kernel's id

  bool operator==(const IdOrigin&) const { return true; }
};

// A validated create request.
struct CreateRequest {
  std::string kernel_id;   // generated when the request has none
  std::string session_id;  // defaults to the kernel id
  ImageRef image;  // parsed once, when the request is read; inner code takes it as it is
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
  StopContract stop;      // stop_signal, stop_timeout, pre_stop
  RestartPolicy restart;  // whether it is started again when its container ends
  std::optional<HealthCheck> health;  // what the agent probes while it runs; unset: nothing
  std::optional<IdlePolicy> idle;     // when it counts as idle; unset: as [container] idle-for says
  IdOrigin ids;  // which ids were generated (ParseRequestWithin); never recorded

  // Two requests are the same (a repeat, not a conflict) exactly when equal.
  bool operator==(const CreateRequest&) const = default;
};

// How much a create request may store on the container: the engine keeps
// labels, env and command in its own records, twice over. The API bounds
// what it accepts (model/create_request.cc); restoring a kernel from its
// labels bounds nothing (model/label_codec.cc), so that tightening the API
// never makes an agent refuse its own running kernels.
struct RequestLimits {
  size_t labels, label_key, label_value;
  size_t env_vars, env_name, env_value, env_total;
  size_t command_args, command_total;
  size_t mounts;
  std::chrono::milliseconds max_lifetime;
};

// Reads and validates a create request from its JSON form, within
// `limits`. kInvalidArgument names the field: "resources.mem: invalid size
// ..." / "kernel_id: must match ...".
Result<CreateRequest> ParseRequestWithin(const nlohmann::json& body, const RequestLimits& limits);

// A new kernel id, as a request without one gets: "k-" and 12 random hex digits.
std::string GenerateKernelId();

// True when `id` is a valid kernel id: [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
bool IsValidKernelId(const std::string& id);

// kBackoff: its container ended and its restart policy starts it again at
// next_restart_at_ms; it keeps its resources meanwhile. kWarm: its container
// runs, made for a warm pool, and no create has been given it yet.
enum class KernelState { kPulling, kPreparing, kWarm, kRunning, kBackoff, kTerminating, kTerminated, kError };
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
  // The cores its container's cgroup allows, as the stats loop last read
  // them from cpuset.cpus (an engine's inspect may keep a cpuset changed
  // beside it); empty: not read (yet, or stats-type docker).
  std::string cgroup_cpuset;
  // A shared kernel's cores as its container was last given them (the shared
  // pool then: at create, and after each update the pool's changes asked
  // for, SharedCorePool::Converge); empty otherwise, and for an adopted kernel
  // until SharedCorePool::Converge has inspected its container.
  std::string applied_cpuset;
  // The cores SharedCorePool::Converge is giving a shared kernel now (set before the
  // engine's update call, cleared after it): a drift check meanwhile takes
  // them as well as applied_cpuset; empty: no move under way.
  std::string pending_cpuset;
  // Bumped as each such move begins and ends, so that a drift check whose
  // inspect spans one leaves the judging to the check the move's own update
  // event brings.
  uint64_t cpuset_moves = 0;
  // Why a shared kernel's cores could not follow the shared pool (the
  // engine cannot update them, or it failed); empty: they follow it.
  std::string pool_condition;
  Allocation allocation;
  bool holds_resources = false;  // whether `allocation` is taken from the plugins now
  // The warm pool its container was made for (label kWarmPool); empty: none.
  // A kernel given to a create keeps it: its request is then the create's,
  // recorded beside the container (WarmClaims), not in its labels.
  std::string warm_pool;
  // The user its processes run as, decided at create (label kRunAs); unset
  // for a kernel made before that was recorded.
  std::optional<RunAs> run_as;
  int64_t created_at = 0;    // unix seconds
  // Unix seconds when it ended, as the engine saw it (the container's end);
  // unset while it runs, and when the engine does not say (it never started).
  std::optional<int64_t> terminated_at;
  std::optional<int64_t> deadline;  // unix seconds when its lifetime runs out; unset: never
  // How many times its restart policy has started it again, and whether
  // its warn_before signal was sent; the engine keeps both in the
  // container's name (ContainerName).
  int64_t restarts = 0;
  bool warned = false;
  // While BACKOFF: when its restart policy starts it again, in unix milliseconds.
  std::optional<int64_t> next_restart_at_ms;
  // Its health since its container last started, when its request has a
  // check: set afresh (starting) each time it becomes RUNNING.
  std::optional<HealthState> health;
  // Since when (unix milliseconds) it has been idle without a break, as its
  // idle rule says; unset: busy, or not measured yet since its container
  // last started. Not recorded: an agent restart starts the window again.
  std::optional<int64_t> idle_since_ms;
  int64_t last_exec_ms = 0;  // when an exec in it last started or ended
  int open_execs = 0;        // interactive execs in it now
  uint64_t container_seq = 0;  // the agent's mutation sequence when its container appeared
  // How many times it has become RUNNING (its container started, also again
  // in the same container) since this agent knows it; not recorded.
  uint64_t runs = 0;
  // The kernel table's mutation sequence when it last became RUNNING
  // (reconcile::Known::running_seq); 0: never.
  uint64_t running_seq = 0;

  const std::string& id() const { return request.kernel_id; }
  // Where it is in its lifecycle. Only KernelTable's transitions change it.
  KernelState state() const { return state_; }
  // condition, the oom kills ("2 processes killed for lack of memory") and
  // device_condition, joined by "; "; empty when none is set.
  std::string Conditions() const;
  // The API form: kernel_id, session_id, agent_id, container_id, image,
  // command, state, exit_code, reason, allocations, ports, labels,
  // created_at, terminated_at, deadline, restarts, next_restart_at_ms, warned,
  // ready (RUNNING and, with a check, passed one), health.
  nlohmann::json ToJson() const;

 private:
  friend class KernelTable;
  KernelState state_ = KernelState::kPreparing;
};

// The container name of a kernel: slotd-<length of agent-id>-<agent-id>-<kernel-id>,
// e.g. slotd-6-gpu1-a-k-0001. Read from the left, the length says where the
// agent id ends, so no two (agent, kernel) pairs share a name: agent "adv"
// with kernel "a-k1" and agent "adv-a" with kernel "k1" get slotd-3-adv-a-k1
// and slotd-5-adv-a-k1. The engine refuses a second container of one name.
// What the engine cannot hold in labels (it never changes a container's
// labels) the agent records in the container's name: a kernel its restart
// policy has started again, or that was sent its warn_before signal, is
// renamed slotd.[r<restarts>][w]-<length>-<agent-id>-<kernel-id> before
// each restart and before the signal. No kernel's first name starts with
// "slotd.", and each rename is one call the engine applies or refuses whole.
struct NameMarks {
  int64_t restarts = 0;  // times its restart policy started it again
  bool warned = false;   // its warn_before signal was sent

  bool operator==(const NameMarks&) const = default;
};
std::string ContainerName(const std::string& agent_id, const std::string& kernel_id, NameMarks marks = {});
// The marks a container's name records (ContainerName); none for any other name.
NameMarks MarksInName(const std::string& name);
// The name of the container made to read the image's users for kernel
// `kernel_id` (label kUserProbe): slotd_user-<length>-<agent-id>-<kernel-id>,
// which no kernel's container is ever named.
std::string UserProbeName(const std::string& agent_id, const std::string& kernel_id);

}  // namespace slotd
