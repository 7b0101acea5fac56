// agent.toml, parsed once into immutable structs.
//
// LoadConfig reads and validates the whole file and returns every problem it
// finds, one per line, each naming the file, the line and the key path:
//   agent.toml:12: container.port-range: start 31000 is above end 30000
// Unknown sections and keys, wrong types and out-of-range values are errors.
// Defaults that depend on the host (node name, cores, memory) are resolved
// here, so a Config says exactly what the agent will use.
//
// The keys, their types, checks and docs are declared as one table per
// section in agent_schema.cc. A member initializer below is that key's
// default: the tables and docs/config.md read it from here.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/defaults.h"
#include "config/host_facts.h"

namespace slotd {

struct AgentConfig {
  std::string id;                 // [a-z0-9][a-z0-9._-]{0,63}
  std::string node;               // default: the host name
  std::string rpc_host{kDefaultRpcHost};  // from rpc-listen-addr "host:port"
  int rpc_port = kDefaultRpcPort;         // 0: pick a free port
  std::string ipc_base_path;      // default: DefaultIpcBasePath(id)
  std::string var_base_path;      // default: DefaultVarBasePath(id)
  std::optional<std::string> token_file;
  std::string scaling_group = "default";

  bool operator==(const AgentConfig&) const = default;
};

// [api]: the limits of the HTTP API, on TCP and on the unix socket alike.
struct ApiConfig {
  int max_connections = 1024;                         // open connections per listener; past it: 503
  std::chrono::milliseconds request_timeout{10'000};  // to receive one whole request (headers and body)
  uint64_t max_body_size = 1ull << 20;                // larger request bodies: 413

  bool operator==(const ApiConfig&) const = default;
};

struct NodeConfig {
  std::string claims_dir{kDefaultClaimsDir};

  bool operator==(const NodeConfig&) const = default;
};

struct ContainerConfig {
  std::string docker_host{kDefaultDockerHost};  // unless $DOCKER_HOST is set
  int port_range_start = 30000;
  int port_range_end = 30999;     // inclusive
  std::string network = "none";   // none | host | bridge
  std::string stats_type = "cgroup";  // cgroup | docker
  std::chrono::milliseconds stats_interval{1'000};  // between stats sweeps
  std::chrono::milliseconds stop_timeout{10'000};
  int64_t pids_limit = 4096;              // per kernel; 0: none
  uint64_t log_max_size = 50ull << 20;    // per log file of a kernel (two files kept); 0: the engine's default logging

  bool operator==(const ContainerConfig&) const = default;
};

// One device of the config-defined mock accelerator ([resource.mock] devices).
struct MockDevice {
  std::string id;              // unique among the mock devices, e.g. "mock0"
  uint64_t memory_bytes = 0;
  int processing_units = 1;
  int numa_node = 0;

  bool operator==(const MockDevice&) const = default;
};

// [resource.mock]: present means the mock plugin is on.
struct MockConfig {
  std::vector<MockDevice> devices;          // every declared device, in file order
  std::vector<std::string> allowed_devices; // resolved: the allow-list, or every declared id
  bool allowed_devices_explicit = false;

  bool operator==(const MockConfig&) const = default;
};

// [resource.cuda]: present means the CUDA plugin is on. Entries are
// normalised to UUIDs by the plugin at start, against the GPUs NVML reports.
struct CudaConfig {
  std::vector<std::string> allowed_devices;  // UUIDs or decimal indices as written; empty: every visible GPU
  bool allowed_devices_explicit = false;
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string attach = "device-requests";    // device-requests | env | cdi

  bool operator==(const CudaConfig&) const = default;
};

struct ResourceConfig {
  int reserved_cpu = 1;            // cores kept for the OS when no allow-list is given
  uint64_t reserved_mem = 1ull << 30;
  std::vector<int> allowed_cores;  // resolved: the allow-list, or the agent's cpuset minus reserved
  bool allowed_cores_explicit = false;
  uint64_t memory_size = 0;        // resolved: the share, or node memory minus reserved
  bool memory_size_explicit = false;
  std::optional<MockConfig> mock;
  std::optional<CudaConfig> cuda;

  bool operator==(const ResourceConfig&) const = default;
};

struct Config {
  std::string path;  // the file it was read from
  AgentConfig agent;
  ApiConfig api;
  NodeConfig node;
  ContainerConfig container;
  ResourceConfig resource;

  bool operator==(const Config&) const = default;
};

// Parses and validates `path`. On failure the Status message holds every
// problem, one per line, "<file>:<line>: <key.path>: <what is wrong>".
Result<Config> LoadConfig(const std::string& path, const HostFacts& host = HostFacts::Detect());

// Same, from text already in memory; `path` is used only in messages.
Result<Config> ParseConfig(const std::string& text, const std::string& path, const HostFacts& host);

}  // namespace slotd
