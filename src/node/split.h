// `slotd split`: one node divided into the configs of N agents that share it.
//
// ReadNodeLayout reads the node's NUMA nodes (cores, memory) from sysfs,
// ListSplitDevices its devices through the device plugins of a base config,
// PlanSplit divides them (pure: facts in, plans out), and RenderAgentConfig
// writes one plan as agent.toml over the base file's own keys.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "common/status.h"
#include "config/config.h"
#include "config/host_facts.h"

namespace slotd {

// One NUMA node of the node.
struct NumaDomain {
  int node = 0;             // its number, as sysfs names it (node<N>)
  std::vector<int> cores;   // sorted; empty for a node with memory only
  uint64_t memory_bytes = 0;

  bool operator==(const NumaDomain&) const = default;
};

// The cores and memory of a node, by NUMA node.
struct NodeLayout {
  std::vector<NumaDomain> numa;  // by node number
  uint64_t memory_bytes = 0;     // the node's total memory (MemTotal)
  // Each core (a logical CPU, as allowed-cores names them) -> the first core
  // of its physical core, the cores that are its hardware threads; a core
  // missing here is a physical core of its own.
  std::map<int, int> thread_sibling_of;

  // The facts the node's agent configs are loaded with: `hostname` and
  // `docker_host_env` kept, the cpuset, core NUMA nodes and memory this
  // layout's.
  HostFacts AsHostFacts(HostFacts base) const;
};

// Reads `<root>/sys/devices/system/node/node<N>/{cpulist,meminfo}`,
// `<root>/sys/devices/system/cpu/cpu<N>/topology/thread_siblings_list` (where
// it is missing, a core is a physical core of its own) and
// `<root>/proc/meminfo` (MemTotal; without it, the NUMA nodes' sum). When
// `cpuset` is given, only its cores count (the cores this process may run on,
// for the live node). A kernel without NUMA (no node directories) is one node
// 0 of the cpuset's cores and the whole memory when `cpuset` is given, else
// an error. Fails naming the file that is missing or unreadable.
Result<NodeLayout> ReadNodeLayout(const std::string& root, const std::optional<std::vector<int>>& cpuset);

// One device a split divides.
struct SplitDevice {
  std::string kind;   // its device kind ("cuda", "mock"): allowed-devices of [resource.<kind>]
  std::string id;     // as allow-lists name it: a mock id, a GPU UUID, a MIG instance UUID
  std::string slot;   // its slot type ("cuda.device", "cuda.mig-1c18g"): devices are divided slot by slot
  int numa_node = 0;

  bool operator==(const SplitDevice&) const = default;
};

// The devices `base` owns through each of its device sections, as the
// kinds' plugins find them on this node (every device, or its allow-list).
// Fails with the plugin's message (say, NVML that cannot be loaded).
Result<std::vector<SplitDevice>> ListSplitDevices(const Config& base);

// What is divided, and how the agents are named.
struct SplitRequest {
  int agents = 1;
  bool by_numa = false;            // each agent inside one NUMA node
  std::vector<int> cores;          // the cores to divide (the base's allow-list, or cpuset minus reserved-cpu)
  uint64_t memory_bytes = 0;       // the memory to divide (the base's size, or node memory minus reserved-mem)
  std::vector<SplitDevice> devices;
  std::string node_name;           // ids are "<node name>-<i>", the name made fit for an id
  std::string rpc_host = "127.0.0.1";
  int rpc_port = 6001;             // agent i listens on rpc_port + i; 0: each picks a free port
  int port_first = 30000;          // the port range divided, inclusive
  int port_last = 30999;
  std::string ipc_parent;          // agent i's ipc-base-path is <ipc_parent>/<id>
  std::string var_parent;          // agent i's var-base-path is <var_parent>/<id>
  std::string scratch_parent;      // non-empty: agent i's scratch-root is <scratch_parent>/<id>
};

// One agent of a split.
struct AgentPlan {
  std::string id;
  std::string rpc_host;
  int rpc_port = 0;
  std::string ipc_base_path;
  std::string var_base_path;
  std::string scratch_root;  // empty: the default under var-base-path
  int port_first = 0;
  int port_last = 0;
  std::vector<int> cores;
  uint64_t memory_bytes = 0;
  std::map<std::string, std::vector<std::string>> devices;  // kind -> ids; a kind it gets none of is absent
  std::optional<int> numa_node;  // with by_numa: the NUMA node of its cores and devices

  bool operator==(const AgentPlan&) const = default;
};

// "<name>-<i>" ids for agent `i`: `name` lowercased, each character outside
// [a-z0-9._-] made "-", leading ones that are not a letter or digit dropped,
// cut so the id has at most 64 characters; "node" for an empty name.
std::string SplitAgentId(const std::string& node_name, int i);

// Divides `layout` for `request.agents` agents. Cores go as whole physical
// cores (a core's hardware threads to one agent), in contiguous blocks of
// request.cores' physical cores, as even as they divide (the first agents
// get one more); memory in equal shares, rounded down to a GiB (to a MiB
// below 8 GiB); devices slot type by slot type in contiguous blocks, the
// spare ones to the agents with the fewest devices so far; ports and the
// port range as described at SplitRequest. With by_numa, the agents are
// spread evenly over the NUMA nodes that have cores to divide: each gets
// cores of one node, a share of that node's part of the memory
// (request.memory_bytes in proportion to the nodes' memory, at most a node's
// own), and the devices on that node; devices on no such node are divided
// over all the agents. Fails (kInvalidArgument) saying what to change: fewer
// than 1 agent, more agents than physical cores or than ports in the range,
// by_numa with an agent count that is not a multiple of the NUMA nodes
// (naming the counts that work), a share of no memory.
Result<std::vector<AgentPlan>> PlanSplit(const NodeLayout& layout, const SplitRequest& request);

// `base` (the base config's tables, or empty) with `plan`'s keys set:
// [agent] id, rpc-listen-addr, ipc-base-path, var-base-path; [node]
// claims-dir = `claims_dir`; [container] port-range and scratch-root (when
// the plan has one); [resource.cpu] allowed-cores; [resource.memory] size;
// allowed-devices of each [resource.<kind>] the plan has devices of, and
// without the sections of kinds it has none of. Returns the TOML text after
// `header` (comment lines, each starting with "# ").
std::string RenderAgentConfig(const toml::table& base, const AgentPlan& plan, const std::string& claims_dir,
                              const std::string& header);

}  // namespace slotd
