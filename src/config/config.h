// agent.toml, parsed once into immutable structs.
//
// LoadConfig (resources/agent_config.h) reads and validates the whole file
// and returns every problem it finds, one per line, each naming the file,
// the line and the key path:
//   agent.toml:12: container.port-range: start 31000 is above end 30000
// Unknown sections and keys, wrong types and out-of-range values are errors.
// Defaults that depend on the host (node name, cores, memory) are resolved
// here, so a Config says exactly what the agent will use.
//
// The keys, their types, checks and docs are declared as one table per
// section: the core's in agent_schema.cc, each device plugin's next to its
// code. A member initializer below is that key's default: the tables and
// docs/config.md read it from here.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/choices.h"
#include "config/defaults.h"
#include "config/host_facts.h"

namespace slotd {

// Whether `id` is a valid agent id: [a-z0-9][a-z0-9._-]{0,63}.
bool IsValidAgentId(const std::string& id);

// Whether `prefix` is an etcd key namespace: "/" and more, not ending in "/".
bool IsKeyNamespace(const std::string& prefix);

struct AgentConfig {
  std::string id;                 // [a-z0-9][a-z0-9._-]{0,63}
  std::string node;               // default: the host name
  std::string rpc_host{kDefaultRpcHost};  // from rpc-listen-addr "host:port"
  int rpc_port = kDefaultRpcPort;         // 0: pick a free port
  std::string ipc_base_path;      // default: DefaultIpcBasePath(id)
  std::string var_base_path;      // default: DefaultVarBasePath(id)
  std::optional<std::string> token_file;
  // Named tokens with roles: "<name> <role> <token>" a line.
  std::optional<std::string> tokens_file;
  std::string scaling_group = "default";
  // TLS on the TCP listener: a PEM certificate (chain) and its key, both or
  // neither; with neither and tls_self_signed, the agent's own pair under
  // var_base_path.
  std::optional<std::string> tls_cert_file;
  std::optional<std::string> tls_key_file;
  bool tls_self_signed = false;
  TlsVersion tls_min_version = TlsVersion::k12;
  // Mutual TLS: the CAs whose client certificates the listener accepts;
  // a client without one is refused in the handshake.
  std::optional<std::string> tls_client_ca_file;
  // A client certificate's subject CN -> its role.
  std::map<std::string, Role> client_roles;
  uint64_t audit_log_max_size = 16ull << 20;  // audit.log's size before it is rotated

  // Whether the TCP listener speaks TLS.
  bool Tls() const { return tls_cert_file.has_value() || tls_self_signed; }

  bool operator==(const AgentConfig&) const = default;
};

// [api]: the limits of the HTTP API, on TCP and on the unix socket alike.
struct ApiConfig {
  int max_connections = 1024;                         // open connections per listener; past it: 503
  std::chrono::milliseconds request_timeout{10'000};  // to receive one whole request (headers and body)
  uint64_t max_body_size = 1ull << 20;                // larger request bodies: 413
  int max_exec_sessions = 64;                         // interactive execs open at once; past it: 503
  int max_oneshot_execs = 64;                         // one-shot execs running at once; past it: 503

  bool operator==(const ApiConfig&) const = default;
};

struct NodeConfig {
  std::string claims_dir{kDefaultClaimsDir};

  bool operator==(const NodeConfig&) const = default;
};

// One entry of [container] mount-allow: a host directory whose contents
// kernels may mount, read-only or also read-write.
struct MountAllow {
  std::string path;
  std::string mode = "ro";  // ro | rw

  bool operator==(const MountAllow&) const = default;
};

struct ContainerConfig {
  std::string docker_host{kDefaultDockerHost};  // unless $DOCKER_HOST is set
  std::chrono::milliseconds engine_wait{120'000};  // how long a start waits for the engine to answer; 0: not at all
  int port_range_start = 30000;
  int port_range_end = 30999;     // inclusive
  std::string network = "none";   // none | host | bridge
  StatsType stats_type = StatsType::kCgroup;
  std::chrono::milliseconds stats_interval{1'000};  // between stats sweeps
  std::chrono::milliseconds stop_timeout{10'000};  // the default and the cap of a kernel's stop_timeout
  bool init = true;  // whether kernels' PID 1 is the engine's init (reaps zombies, passes signals on)
  int64_t restart_max = 10;  // the default and the cap of a restart policy's max; 0: no limit
  std::chrono::milliseconds restart_backoff_initial{1'000};  // the first wait of a restart policy, unless it asks
  std::chrono::milliseconds restart_backoff_max{300'000};    // the longest wait, unless it asks
  std::chrono::milliseconds idle_for{0};  // the default and the cap of a kernel's idle window; 0: none
  int64_t idle_cpu_below_percent = 5;     // a kernel below this percent of its cores is idle, unless it says
  int64_t idle_gpu_below_percent = 5;     // and below this percent of its devices, where they are measured
  std::chrono::milliseconds health_interval{10'000};     // between two probes of a kernel, unless it asks
  std::chrono::milliseconds health_min_interval{1'000};  // the shortest interval a kernel gets
  std::chrono::milliseconds health_timeout{5'000};       // the longest one probe may take, unless it asks
  int64_t pids_limit = 4096;              // per kernel; 0: none
  uint64_t log_max_size = 50ull << 20;    // per log file of a kernel (two files kept); 0: the engine's default logging
  std::chrono::milliseconds max_lifetime{0};  // the longest a kernel may run from its creation; 0: no limit
  std::string scratch_root;                   // where kernels' scratch directories are; empty: ScratchRoot()'s default
  ScratchType scratch_type = ScratchType::kHostDir;
  uint64_t scratch_size = 0;                  // a kernel's scratch size unless it asks; 0: no limit (tmpfs: its memory)
  uint64_t scratch_min_free = 1ull << 30;     // creates are refused below this much free space in the scratch root
  // Resource limits of kernels' processes, by name ("nofile"), soft and hard
  // alike; -1: unlimited. Resolved: without the key, memlock at the agent's
  // own hard limit (HostFacts::memlock_limit), as GPU and RDMA libraries pin memory.
  std::map<std::string, int64_t> ulimits;
  std::vector<MountAllow> mount_allow;  // empty: kernels may mount nothing of the host
  std::optional<int64_t> kernel_uid;    // the user kernels' processes run as; unset: the image's user
  std::optional<int64_t> kernel_gid;    // their group; unset: the number of kernel_uid (the image's, without it)
  bool allow_root = false;              // whether a kernel may run as root (uid 0)
  PullPolicy auto_pull = PullPolicy::kTag;  // when the agent pulls a kernel's image
  std::string registry_auth_file;       // docker login's config.json with registry credentials; empty: none
  std::chrono::milliseconds pull_timeout{30 * 60'000};    // the longest one pull may take
  std::chrono::milliseconds pull_stall_timeout{60'000};  // the longest a pull may go without progress
  int64_t image_gc_high = 0;  // percent of the engine's data root filesystem; above it images are collected; 0: never
  int64_t image_gc_low = 80;  // percent the collection goes down to

  bool operator==(const ContainerConfig&) const = default;
};

// A device plugin's section of agent.toml ([resource.<kind>]). Each device
// kind (resources/device_kinds.h) has its own type, derived through
// DeviceSectionBase, and registers the key table that reads it; the core
// never looks inside.
struct DeviceSection {
  virtual ~DeviceSection() = default;
  // True when `other` is a section of the same type with the same values.
  virtual bool Equals(const DeviceSection& other) const = 0;
};

// The base of a kind's section type T, which declares
// `bool operator==(const T&) const = default;`.
template <typename T>
struct DeviceSectionBase : DeviceSection {
  bool Equals(const DeviceSection& other) const override {
    const T* same = dynamic_cast<const T*>(&other);
    return same != nullptr && *same == static_cast<const T&>(*this);
  }

  // No values of its own: what T's defaulted == compares for its base.
  constexpr bool operator==(const DeviceSectionBase&) const { return true; }
};

// The device plugins' sections a file has, by kind name ("cuda"); a present
// section turns its plugin on. Read once, then shared by copies of a Config.
struct DeviceSections {
  std::map<std::string, std::shared_ptr<const DeviceSection>> by_kind;

  // Kind `kind`'s section as its type T, or null when the file has none.
  template <typename T>
  const T* Of(const std::string& kind) const {
    auto it = by_kind.find(kind);
    return it == by_kind.end() ? nullptr : dynamic_cast<const T*>(it->second.get());
  }

  // The same kinds, with equal values.
  bool operator==(const DeviceSections& other) const {
    return by_kind.size() == other.by_kind.size() &&
           std::all_of(by_kind.begin(), by_kind.end(), [&](const auto& entry) {
             auto it = other.by_kind.find(entry.first);
             return it != other.by_kind.end() && entry.second->Equals(*it->second);
           });
  }
};

struct ResourceConfig {
  int reserved_cpu = 1;            // cores kept for the OS when no allow-list is given
  uint64_t reserved_mem = 1ull << 30;
  std::vector<int> allowed_cores;  // resolved: the allow-list, or the agent's cpuset minus reserved
  bool allowed_cores_explicit = false;
  int shared_overcommit = 1;       // the shared pool gives out its cores' worth of quota this many times
  uint64_t memory_size = 0;        // resolved: the share, or node memory minus reserved
  bool memory_size_explicit = false;
  DeviceSections devices;

  bool operator==(const ResourceConfig&) const = default;
};

// [etcd]: where the agent registers (fleet/registrar.h). Absent: the agent
// runs standalone and needs no etcd.
struct EtcdConfig {
  std::vector<std::string> endpoints;      // "http://127.0.0.1:2379", at least one
  std::string key_namespace = "/slotd";   // the agent's key is <namespace>/agents/<agent-id>
  std::chrono::milliseconds lease_ttl{10'000};  // how long the key outlives an agent that died
  std::string user;                        // empty: etcd without authentication
  std::string password;                    // with user, unless password_file
  std::string password_file;               // with user: a file holding the password
  // TLS to https:// endpoints: the CAs that sign etcd's certificate (empty:
  // the system's), and a client certificate and its key for etcd's
  // --client-cert-auth (empty: none).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;

  bool operator==(const EtcdConfig&) const = default;
};

// [[pool]]: one warm pool, `count` kernels of one image and resource shape
// kept started for the creates that match it (agent/warm_pool.h). The shape
// is read as a create request's resources by the agent, which refuses to
// start on one it would refuse in a request.
struct PoolConfig {
  std::string name;   // in its kernels' labels; unique among the pools
  std::string image;
  std::vector<std::string> command;  // what its kernels run; empty: the image's command
  std::string cpu = "1";  // as resources.cpu: "2" (exclusive cores), "0.5" or "250m" (shared)
  uint64_t mem = 0;       // 0: the agent's default for a request without mem
  std::map<std::string, int64_t> devices;  // slot -> count: {"cuda.device" = 1}
  int64_t count = 1;

  bool operator==(const PoolConfig&) const = default;
};

struct Config {
  std::string path;  // the file it was read from
  AgentConfig agent;
  ApiConfig api;
  NodeConfig node;
  ContainerConfig container;
  ResourceConfig resource;
  std::optional<EtcdConfig> etcd;  // absent: standalone
  std::vector<PoolConfig> pools;   // [[pool]] entries, in file order

  bool operator==(const Config&) const = default;
};

// The directory under which each kernel of `config` gets its scratch
// directory: [container] scratch-root, or <var-base-path>/scratch.
inline std::string ScratchRoot(const Config& config) {
  return config.container.scratch_root.empty() ? config.agent.var_base_path + "/scratch"
                                               : config.container.scratch_root;
}

}  // namespace slotd
