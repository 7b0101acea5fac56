#include "node/split.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <sstream>

#include "common/ascii.h"
#include "common/units.h"
#include "resources/device_kinds.h"
#include "resources/device_plugin.h"

namespace slotd {
namespace {

// Memory shares from this size up are rounded down to a GiB, smaller ones to a MiB.
constexpr uint64_t kRoundToGiB = 8 * kGiB;

// The number N of a directory entry named "node<N>"; nullopt for any other name.
std::optional<int> NodeNumber(const std::string& name) {
  if (name.size() <= 4 || name.size() > 8 || name.rfind("node", 0) != 0) return std::nullopt;
  if (!std::all_of(name.begin() + 4, name.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  return std::stoi(name.substr(4));
}

// The first line of `path`; fails naming it.
Result<std::string> FirstLine(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) return Status::NotFound("cannot read " + path);
  return line;
}

// The "<prefix>MemTotal: <n> kB" value of a meminfo file, in bytes; nullopt
// when the file or the line is missing.
std::optional<uint64_t> MemTotal(const std::string& path) {
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    const size_t at = line.find("MemTotal:");
    if (at == std::string::npos) continue;
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str() + at, "MemTotal: %llu kB", &kib) == 1 && kib <= (1ull << 50))  // up to an EiB
      return static_cast<uint64_t>(kib) * 1024;
  }
  return std::nullopt;
}

// `n` items divided among `k` parts as evenly as they go, the first parts one more.
std::vector<size_t> EvenCounts(size_t n, size_t k) {
  std::vector<size_t> counts(k, n / k);
  for (size_t i = 0; i < n % k; ++i) ++counts[i];
  return counts;
}

// Gives `devices` to `agents` (indices into `plans`): slot type by slot type,
// in contiguous blocks, the spare devices of a slot type to the agents that
// hold the fewest devices of its kind so far (the earlier on a tie).
void DivideDevices(const std::vector<SplitDevice>& devices, const std::vector<size_t>& agents,
                   std::vector<AgentPlan>& plans) {
  if (agents.empty()) return;
  std::vector<std::pair<std::string, std::string>> slots;  // (kind, slot), in first-seen order
  for (const SplitDevice& d : devices)
    if (std::find(slots.begin(), slots.end(), std::make_pair(d.kind, d.slot)) == slots.end())
      slots.emplace_back(d.kind, d.slot);
  for (const auto& [kind, slot] : slots) {
    std::vector<const SplitDevice*> of_slot;
    for (const SplitDevice& d : devices)
      if (d.kind == kind && d.slot == slot) of_slot.push_back(&d);
    const size_t k = agents.size(), base = of_slot.size() / k, spare = of_slot.size() % k;
    std::vector<size_t> order(k);  // positions in `agents`, fewest devices of the kind first
    std::iota(order.begin(), order.end(), 0);
    const std::string& kind_name = kind;
    auto held = [&](size_t position) { return plans[agents[position]].devices[kind_name].size(); };
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return held(a) < held(b); });
    std::vector<size_t> counts(k, base);
    for (size_t i = 0; i < spare; ++i) ++counts[order[i]];
    size_t next = 0;
    for (size_t position = 0; position < k; ++position)
      for (size_t n = 0; n < counts[position]; ++n)
        plans[agents[position]].devices[kind_name].push_back(of_slot[next++]->id);
  }
  for (size_t agent : agents)
    for (auto it = plans[agent].devices.begin(); it != plans[agent].devices.end();)
      it = it->second.empty() ? plans[agent].devices.erase(it) : std::next(it);
}

// `cores` (sorted) as whole physical cores per `layout`, each a sorted list
// of its threads among `cores`, in the order of their first thread.
std::vector<std::vector<int>> WholeCores(const std::vector<int>& cores, const NodeLayout& layout) {
  std::map<int, std::vector<int>> by_first;
  for (int core : cores) {
    auto sibling = layout.thread_sibling_of.find(core);
    by_first[sibling == layout.thread_sibling_of.end() ? core : sibling->second].push_back(core);
  }
  std::vector<std::vector<int>> whole;
  for (auto& entry : by_first) whole.push_back(std::move(entry.second));
  std::sort(whole.begin(), whole.end());
  return whole;
}

// "2, 4 or 6": the first three multiples of `n`.
std::string Multiples(int n) {
  return std::to_string(n) + ", " + std::to_string(2 * n) + " or " + std::to_string(3 * n);
}

// The subtable `key` of `table`, made a table when it is missing or not one.
toml::table& Subtable(toml::table& table, std::string_view key) {
  toml::node* node = table.get(key);
  if (node == nullptr || !node->is_table()) {
    table.insert_or_assign(key, toml::table{});
    node = table.get(key);
  }
  return *node->as_table();
}

// A part of the node the agents are divided into: one NUMA node each with
// by_numa, else the whole node.
struct SplitGroup {
  std::optional<int> numa_node;
  std::vector<int> cores;
  uint64_t memory_bytes = 0;
  std::vector<size_t> agents;  // indices into the plans
};

// OK when `request`'s counts can be divided at all; else kInvalidArgument
// saying what to change: fewer than 1 agent, more agents than whole cores or
// than ports in the range, RPC ports that run past 65535.
Status CheckSplitCounts(const NodeLayout& layout, const SplitRequest& request) {
  const int n = request.agents;
  if (n < 1) return Status::InvalidArgument("--agents " + std::to_string(n) + ": give at least 1 agent");
  const size_t agents = static_cast<size_t>(n);
  const size_t whole_cores = WholeCores(request.cores, layout).size();
  if (agents > whole_cores)
    return Status::InvalidArgument("--agents " + std::to_string(n) + " needs a whole core for each agent, and there " +
                                   "are " + std::to_string(whole_cores) + " whole cores to divide (" +
                                   FormatCoreList(request.cores) +
                                   "); give at most that many agents, or lower [resource] reserved-cpu");
  const int ports = request.port_last - request.port_first + 1;
  if (ports < n)
    return Status::InvalidArgument("container.port-range [" + std::to_string(request.port_first) + ", " +
                                   std::to_string(request.port_last) + "] has " + std::to_string(ports) +
                                   " ports, fewer than the " + std::to_string(n) +
                                   " agents; widen it in the base config");
  if (request.rpc_port != 0 && request.rpc_port + n - 1 > 65535)
    return Status::InvalidArgument("agent.rpc-listen-addr: ports " + std::to_string(request.rpc_port) + " and up " +
                                   "run past 65535 for " + std::to_string(n) + " agents; choose a lower port");
  return Status::Ok();
}

// The groups of a by_numa split: each NUMA node with cores of request.cores,
// with its part of request.memory_bytes (in proportion to its memory, at
// most all of it) and no agents yet. Fails (kInvalidArgument) when no NUMA
// node has such cores, when request.agents is not a multiple of their count
// (naming the counts that work), or when one has fewer whole cores than its
// agents.
Result<std::vector<SplitGroup>> NumaSplitGroups(const NodeLayout& layout, const SplitRequest& request) {
  const int n = request.agents;
  std::vector<SplitGroup> groups;
  uint64_t numa_memory = 0;
  for (const NumaDomain& domain : layout.numa) {
    SplitGroup group{domain.node, {}, domain.memory_bytes, {}};
    for (int core : domain.cores)
      if (std::binary_search(request.cores.begin(), request.cores.end(), core)) group.cores.push_back(core);
    if (group.cores.empty()) continue;
    numa_memory += domain.memory_bytes;
    groups.push_back(std::move(group));
  }
  const int domains = static_cast<int>(groups.size());
  if (domains == 0)
    return Status::InvalidArgument("--by numa: none of the cores to divide is on a NUMA node of the node");
  if (n % domains != 0)
    return Status::InvalidArgument("--by numa puts the same number of agents on each of the " +
                                   std::to_string(domains) + " NUMA nodes with cores, so --agents must be a "
                                   "multiple of " + std::to_string(domains) + " (" + Multiples(domains) + "), not " +
                                   std::to_string(n) + "; or leave out --by numa");
  const size_t per_group = static_cast<size_t>(n) / groups.size();
  for (SplitGroup& group : groups) {
    if (WholeCores(group.cores, layout).size() < per_group)
      return Status::InvalidArgument("--by numa: NUMA node " + std::to_string(*group.numa_node) + " has " +
                                     std::to_string(WholeCores(group.cores, layout).size()) +
                                     " whole cores to divide (" +
                                     FormatCoreList(group.cores) + "), fewer than its " +
                                     std::to_string(per_group) + " agents; give fewer agents");
    // The node's part of the memory, in proportion to its memory and at most all of it.
    const long double part = static_cast<long double>(request.memory_bytes) * group.memory_bytes /
                             static_cast<long double>(std::max<uint64_t>(numa_memory, 1));
    group.memory_bytes = std::min<uint64_t>(group.memory_bytes, static_cast<uint64_t>(part));
  }
  return groups;
}

// One plan for each of `request`'s agents, in order, with its id, RPC
// address, paths and its block of the port range (as even as they divide);
// cores, memory and devices still empty.
std::vector<AgentPlan> NamedSplitPlans(const SplitRequest& request) {
  const size_t agents = static_cast<size_t>(request.agents);
  const int ports = request.port_last - request.port_first + 1;
  std::vector<AgentPlan> plans(agents);
  const std::vector<size_t> port_counts = EvenCounts(static_cast<size_t>(ports), agents);
  int next_port = request.port_first;
  for (size_t i = 0; i < agents; ++i) {
    AgentPlan& plan = plans[i];
    plan.id = SplitAgentId(request.node_name, static_cast<int>(i));
    plan.rpc_host = request.rpc_host;
    plan.rpc_port = request.rpc_port == 0 ? 0 : request.rpc_port + static_cast<int>(i);
    plan.ipc_base_path = request.ipc_parent + "/" + plan.id;
    plan.var_base_path = request.var_parent + "/" + plan.id;
    if (!request.scratch_parent.empty()) plan.scratch_root = request.scratch_parent + "/" + plan.id;
    plan.port_first = next_port;
    plan.port_last = next_port + static_cast<int>(port_counts[i]) - 1;
    next_port = plan.port_last + 1;
  }
  return plans;
}

// Gives the agents of `group` (its `agents`, indices into `plans`) the
// group's whole cores in contiguous blocks, as even as they divide, an equal
// share of its memory (rounded down to a GiB, to a MiB below 8 GiB) and its
// NUMA node; for a group of one NUMA node, also the devices of `unplaced` on
// that node, which leave `unplaced`. Fails (kInvalidArgument) when the share
// is no memory.
Status PlaceSplitGroup(const SplitGroup& group, const NodeLayout& layout, std::vector<SplitDevice>& unplaced,
                       std::vector<AgentPlan>& plans) {
  const size_t per_group = group.agents.size();
  const std::vector<std::vector<int>> whole = WholeCores(group.cores, layout);
  const std::vector<size_t> core_counts = EvenCounts(whole.size(), per_group);
  const uint64_t exact = group.memory_bytes / per_group;
  const uint64_t share = exact / (exact >= kRoundToGiB ? kGiB : kMiB) * (exact >= kRoundToGiB ? kGiB : kMiB);
  if (share == 0)
    return Status::InvalidArgument(
        "there is " + DescribeSize(group.memory_bytes) + " of memory to divide" +
        (group.numa_node ? " on NUMA node " + std::to_string(*group.numa_node) : std::string()) + " among " +
        std::to_string(per_group) + " agents, less than 1m each; give fewer agents or lower [resource] reserved-mem");
  auto next_core = whole.begin();
  for (size_t j = 0; j < per_group; ++j) {
    AgentPlan& plan = plans[group.agents[j]];
    for (size_t c = 0; c < core_counts[j]; ++c, ++next_core)
      plan.cores.insert(plan.cores.end(), next_core->begin(), next_core->end());
    std::sort(plan.cores.begin(), plan.cores.end());
    plan.memory_bytes = share;
    plan.numa_node = group.numa_node;
  }
  if (!group.numa_node) return Status::Ok();
  std::vector<SplitDevice> here;
  std::vector<SplitDevice> elsewhere;
  for (SplitDevice& device : unplaced)
    (device.numa_node == *group.numa_node ? here : elsewhere).push_back(std::move(device));
  DivideDevices(here, group.agents, plans);
  unplaced = std::move(elsewhere);
  return Status::Ok();
}

}  // namespace

HostFacts NodeLayout::AsHostFacts(HostFacts base) const {
  base.cpuset.clear();
  base.core_numa_node.clear();
  for (const NumaDomain& domain : numa)
    for (int core : domain.cores) {
      base.cpuset.push_back(core);
      base.core_numa_node[core] = domain.node;
    }
  std::sort(base.cpuset.begin(), base.cpuset.end());
  base.memory_bytes = memory_bytes;
  return base;
}

Result<NodeLayout> ReadNodeLayout(const std::string& root, const std::optional<std::vector<int>>& cpuset) {
  const std::string node_dir = (std::filesystem::path(root) / "sys/devices/system/node").string();
  NodeLayout layout;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(node_dir, error)) {
    const std::optional<int> number = NodeNumber(entry.path().filename().string());
    if (!number) continue;
    NumaDomain domain;
    domain.node = *number;
    const std::string cpulist_path = (entry.path() / "cpulist").string();
    Result<std::string> cpulist = FirstLine(cpulist_path);
    if (!cpulist.ok()) return cpulist.status();
    if (!cpulist->empty()) {
      Result<std::vector<int>> cores = ParseCoreList(*cpulist);
      if (!cores.ok()) return cores.status().WithPrefix(cpulist_path);
      for (int core : *cores)
        if (!cpuset || std::binary_search(cpuset->begin(), cpuset->end(), core)) domain.cores.push_back(core);
    }
    const std::string meminfo_path = (entry.path() / "meminfo").string();
    const std::optional<uint64_t> memory = MemTotal(meminfo_path);
    if (!memory) return Status::NotFound("cannot read \"Node " + std::to_string(*number) + " MemTotal\" in " + meminfo_path);
    domain.memory_bytes = *memory;
    layout.numa.push_back(std::move(domain));
  }
  std::sort(layout.numa.begin(), layout.numa.end(),
            [](const NumaDomain& a, const NumaDomain& b) { return a.node < b.node; });
  const std::filesystem::path cpu_dir = std::filesystem::path(root) / "sys/devices/system/cpu";
  for (const NumaDomain& domain : layout.numa)
    for (int core : domain.cores) {
      Result<std::string> siblings =
          FirstLine((cpu_dir / ("cpu" + std::to_string(core)) / "topology/thread_siblings_list").string());
      if (!siblings.ok()) continue;  // no topology: a physical core of its own
      Result<std::vector<int>> threads = ParseCoreList(*siblings);
      if (threads.ok() && !threads->empty()) layout.thread_sibling_of[core] = threads->front();
    }

  const std::string meminfo = (std::filesystem::path(root) / "proc/meminfo").string();
  const std::optional<uint64_t> total = MemTotal(meminfo);
  if (layout.numa.empty()) {
    if (!cpuset || !total)
      return Status::NotFound("no NUMA nodes in " + node_dir + " (node<N>/cpulist and node<N>/meminfo)" +
                              (total ? "" : " and no MemTotal in " + meminfo) +
                              "; give the root of a node's /sys and /proc");
    layout.numa.push_back(NumaDomain{0, *cpuset, *total});
  }
  uint64_t sum = 0;
  for (const NumaDomain& domain : layout.numa) sum += domain.memory_bytes;
  layout.memory_bytes = total ? *total : sum;
  return layout;
}

Result<std::vector<SplitDevice>> ListSplitDevices(const Config& base) {
  std::vector<SplitDevice> devices;
  for (const DeviceKind& kind : DeviceKinds()) {
    auto section = base.resource.devices.by_kind.find(kind.name);
    if (section == base.resource.devices.by_kind.end()) continue;
    Result<std::unique_ptr<ResourcePlugin>> plugin = kind.make_plugin(*section->second);
    if (!plugin.ok()) return plugin.status();
    const auto* device_plugin = dynamic_cast<const DevicePlugin*>(plugin->get());
    if (device_plugin == nullptr) return Status::Internal("resource." + kind.name + ": not a device plugin");
    for (const Device& device : device_plugin->OwnedDeviceList())
      devices.push_back({kind.name, device.id, device.slot, device.numa_node});
  }
  return devices;
}

std::string SplitAgentId(const std::string& node_name, int i) {
  std::string name;
  for (char c : node_name) {
    const char lower = AsciiLower(c);
    const bool alnum = (lower >= 'a' && lower <= 'z') || (lower >= '0' && lower <= '9');
    if (name.empty() && !alnum) continue;
    name += alnum || lower == '.' || lower == '_' || lower == '-' ? lower : '-';
  }
  if (name.empty()) name = "node";
  const std::string suffix = "-" + std::to_string(i);
  return name.substr(0, 64 - suffix.size()) + suffix;
}

Result<std::vector<AgentPlan>> PlanSplit(const NodeLayout& layout, const SplitRequest& request) {
  if (Status counts = CheckSplitCounts(layout, request); !counts.ok()) return counts;
  const size_t agents = static_cast<size_t>(request.agents);
  std::vector<SplitGroup> groups;
  if (request.by_numa) {
    Result<std::vector<SplitGroup>> numa_groups = NumaSplitGroups(layout, request);
    if (!numa_groups.ok()) return numa_groups.status();
    groups = std::move(*numa_groups);
  } else {
    groups.push_back(SplitGroup{std::nullopt, request.cores, request.memory_bytes, {}});
  }
  std::vector<AgentPlan> plans = NamedSplitPlans(request);
  const size_t per_group = agents / groups.size();
  std::vector<SplitDevice> unplaced = request.devices;
  for (size_t g = 0; g < groups.size(); ++g) {
    SplitGroup& group = groups[g];
    for (size_t j = 0; j < per_group; ++j) group.agents.push_back(g * per_group + j);
    if (Status placed = PlaceSplitGroup(group, layout, unplaced, plans); !placed.ok()) return placed;
  }
  std::vector<size_t> everyone(agents);
  std::iota(everyone.begin(), everyone.end(), 0);
  DivideDevices(unplaced, everyone, plans);
  return plans;
}

std::string RenderAgentConfig(const toml::table& base, const AgentPlan& plan, const std::string& claims_dir,
                              const std::string& header) {
  toml::table config = base;
  toml::table& agent = Subtable(config, "agent");
  agent.insert_or_assign("id", plan.id);
  agent.insert_or_assign("rpc-listen-addr", plan.rpc_host + ":" + std::to_string(plan.rpc_port));
  agent.insert_or_assign("ipc-base-path", plan.ipc_base_path);
  agent.insert_or_assign("var-base-path", plan.var_base_path);
  Subtable(config, "node").insert_or_assign("claims-dir", claims_dir);
  toml::table& container = Subtable(config, "container");
  container.insert_or_assign("port-range", toml::array{plan.port_first, plan.port_last});
  if (!plan.scratch_root.empty()) container.insert_or_assign("scratch-root", plan.scratch_root);
  toml::table& resource = Subtable(config, "resource");
  Subtable(resource, "cpu").insert_or_assign("allowed-cores", FormatCoreList(plan.cores));
  Subtable(resource, "memory").insert_or_assign("size", FormatSize(plan.memory_bytes));
  for (const DeviceKind& kind : DeviceKinds()) {
    auto devices = plan.devices.find(kind.name);
    if (devices == plan.devices.end()) {
      resource.erase(kind.name);
      continue;
    }
    toml::array ids;
    for (const std::string& id : devices->second) ids.push_back(id);
    Subtable(resource, kind.name).insert_or_assign("allowed-devices", std::move(ids));
  }
  std::ostringstream text;
  // Basic strings ("..."), as the docs write them, rather than literal ones
  // ('...'), and every section at the left margin.
  constexpr auto flags = toml::toml_formatter::default_flags &
                         ~(toml::format_flags::allow_literal_strings | toml::format_flags::indent_sub_tables);
  text << header << toml::toml_formatter(config, flags) << "\n";
  return text.str();
}

}  // namespace slotd
