// The key tables of agent.toml, one per section, in the order messages and
// docs/config.md list them. Each key's default is its Config member's
// initializer (config.h, defaults.h) unless the table says DefaultsTo.
#include "config/agent_schema.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>

#include "common/units.h"

namespace slotd {
namespace {

using std::chrono::milliseconds;

constexpr int kMaxCores = 4096;      // the highest core number ParseCoreList accepts, plus one
constexpr int kMaxNumaNodes = 1024;  // Linux's largest MAX_NUMNODES; node numbers are below it

// ------------------------------------------------------- agent-specific types

// rpc-listen-addr, split.
struct ListenAddress {
  std::string host;
  int port = 0;
};

// "host:port": an IPv4 address or localhost, and a port from 0 to 65535.
ValueType<ListenAddress> ListenAddressType() {
  ValueType<ListenAddress> type;
  type.name = "string";
  type.doc =
      "The host is an IPv4 address (`127.0.0.1`, `0.0.0.0`) or `localhost`; the port is 0 to 65535, and 0 picks a "
      "free port, which the agent reports when it starts.";
  type.quoted = true;
  type.text = [](const ListenAddress& address) { return address.host + ":" + std::to_string(address.port); };
  type.read = [string = StringType().read](const Field& field, ConfigReader& reader) -> std::optional<ListenAddress> {
    std::optional<std::string> addr = string(field, reader);
    if (!addr) return std::nullopt;
    const size_t colon = addr->rfind(':');
    if (colon == std::string::npos) {
      reader.Report(field, "\"" + *addr + "\" is not host:port; write it like \"127.0.0.1:6001\"");
      return std::nullopt;
    }
    const std::string host = addr->substr(0, colon);
    const std::string port_text = addr->substr(colon + 1);
    in_addr ipv4{};
    if (host != "localhost" && inet_pton(AF_INET, host.c_str(), &ipv4) != 1) {
      reader.Report(field, "host \"" + host + "\" in \"" + *addr +
                               "\" is not an IPv4 address or \"localhost\"; write it like \"127.0.0.1:6001\"");
      return std::nullopt;
    }
    const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                        std::all_of(port_text.begin(), port_text.end(), [](unsigned char c) { return std::isdigit(c); });
    const int port = digits ? std::stoi(port_text) : -1;
    if (port < 0 || port > 65535) {
      reader.Report(field, "port \"" + port_text + "\" in \"" + *addr +
                               "\" is not a number from 0 to 65535 (0 picks a free port)");
      return std::nullopt;
    }
    return ListenAddress{host, port};
  };
  return type;
}

// container.port-range: [start, end].
struct PortRange {
  int start = 0;
  int end = 0;
};

// An array of two ports from 1 to 65535; each is checked in turn.
ValueType<PortRange> PortRangeType() {
  ValueType<PortRange> type;
  type.name = "array of two integers";
  type.doc = "Each port from 1 to 65535.";
  type.text = [](const PortRange& range) {
    return "[" + std::to_string(range.start) + ", " + std::to_string(range.end) + "]";
  };
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<PortRange> {
    const toml::array* range = field.node->as_array();
    if (range == nullptr) {
      reader.Report(field, "expected an array of two integers [start, end], found " + TypeName(*field.node));
      return std::nullopt;
    }
    if (range->size() != 2) {
      reader.Report(field, "expected two integers [start, end], found " + std::to_string(range->size()) + " items");
      return std::nullopt;
    }
    int ports[2] = {0, 0};
    for (size_t i = 0; i < 2; ++i) {
      const std::string which = i == 0 ? "start" : "end";
      const toml::node& item = *range->get(i);
      const auto* number = item.as_integer();
      if (number == nullptr) {
        reader.Report(field, which + " must be an integer, found " + TypeName(item));
        return std::nullopt;
      }
      if (number->get() < 1 || number->get() > 65535) {
        reader.Report(field, which + " port " + std::to_string(number->get()) + " is out of range; use 1 to 65535");
        return std::nullopt;
      }
      ports[i] = static_cast<int>(number->get());
    }
    return PortRange{ports[0], ports[1]};
  };
  return type;
}

// A GPU entry of resource.cuda.allowed-devices: a string; an integer is
// refused with the advice to quote it.
ValueType<std::string> GpuEntryType() {
  ValueType<std::string> type = StringType();
  type.read = [string = type.read](const Field& field, ConfigReader& reader) -> std::optional<std::string> {
    if (const auto* number = field.node->as_integer()) {
      const std::string index = std::to_string(number->get());
      reader.Report(field, "expected a string, found the integer " + index + "; quote GPU indices: \"" + index + "\"");
      return std::nullopt;
    }
    return string(field, reader);
  };
  return type;
}

// --------------------------------------------------------------- checks

// True for [a-z0-9][a-z0-9._-]{0,63}.
bool IsValidAgentId(const std::string& id) {
  auto lower_or_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (id.empty() || id.size() > 64 || !lower_or_digit(id[0])) return false;
  return std::all_of(id.begin(), id.end(),
                     [&](char c) { return lower_or_digit(c) || c == '.' || c == '_' || c == '-'; });
}

Check<std::string> AgentIdPattern() {
  return Rule<std::string>(
      "1 to 64 characters of `a-z`, `0-9`, `.`, `_`, `-`, starting with a letter or digit: "
      "`[a-z0-9][a-z0-9._-]{0,63}`.",
      [](const std::string& id, const Field&, const ConfigReader&) -> std::string {
        if (IsValidAgentId(id)) return "";
        return "\"" + id +
               "\" is not a valid agent id; use 1 to 64 characters of a-z, 0-9, '.', '_' and '-', starting with a "
               "letter or digit";
      });
}

// True for [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
bool IsValidMockDeviceId(const std::string& id) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (id.empty() || id.size() > 64 || !alnum(id[0])) return false;
  return std::all_of(id.begin(), id.end(), [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
}

Check<std::string> MockDeviceIdPattern() {
  return Rule<std::string>(
      "1 to 64 characters of `A-Z`, `a-z`, `0-9`, `.`, `_`, `-`, starting with a letter or digit: "
      "`[A-Za-z0-9][A-Za-z0-9._-]{0,63}`.",
      [](const std::string& id, const Field&, const ConfigReader&) -> std::string {
        if (IsValidMockDeviceId(id)) return "";
        return "\"" + id +
               "\" is not a valid device id; use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and '-', starting "
               "with a letter or digit";
      });
}

// Why a docker-host value is unusable, or empty if it is fine.
std::string DockerHostProblem(const std::string& value) {
  const std::string example(kDefaultDockerHost);
  if (value.rfind("unix://", 0) == 0) {
    if (value.size() > 7 && value[7] == '/') return "";
    return "\"" + value + "\" needs an absolute socket path after unix://, e.g. \"" + example + "\"";
  }
  if (value.rfind("tcp://", 0) == 0) {
    if (value.size() > 6) return "";
    return "\"" + value + "\" needs host:port after tcp://, e.g. \"tcp://127.0.0.1:2375\"";
  }
  return "\"" + value + "\" must start with unix:// or tcp://, e.g. \"" + example + "\"";
}

Check<std::string> DockerHostScheme() {
  return Rule<std::string>(
      "`unix://` followed by an absolute socket path, or `tcp://host:port`. A `$DOCKER_HOST` used as the default "
      "is checked the same way.",
      [](const std::string& value, const Field&, const ConfigReader&) { return DockerHostProblem(value); });
}

Check<std::string> LibraryNameOrAbsolutePath() {
  return Rule<std::string>("Not a relative path.", [](const std::string& library, const Field&,
                                                      const ConfigReader&) -> std::string {
    if (library.front() == '/' || library.find('/') == std::string::npos) return "";
    return "\"" + library + "\" is a relative path; give a library name like \"libnvidia-ml.so.1\" or an absolute path";
  });
}

// True for a GPU as nvidia-smi -L names it: an index without leading zeros
// ("0", "12") or a UUID ("GPU-" followed by hex digits and dashes).
bool IsGpuIndexOrUuid(const std::string& entry) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!entry.empty() && std::all_of(entry.begin(), entry.end(), digit)) return entry == "0" || entry[0] != '0';
  constexpr std::string_view kUuidPrefix = "GPU-";
  if (entry.size() <= kUuidPrefix.size() || entry.rfind(kUuidPrefix, 0) != 0) return false;
  return std::all_of(entry.begin() + kUuidPrefix.size(), entry.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == '-'; });
}

Check<std::string> GpuIndexOrUuid() {
  return Rule<std::string>(
      "A UUID is `GPU-` followed by hex digits and dashes; an index is a decimal number without leading zeros.",
      [](const std::string& entry, const Field&, const ConfigReader&) -> std::string {
        if (IsGpuIndexOrUuid(entry)) return "";
        return "\"" + entry +
               "\" is neither a GPU UUID like \"GPU-6f3c1a2b-...\" nor an index like \"1\"; copy them from "
               "nvidia-smi -L";
      });
}

// ------------------------------------------------------------ cross-key rules

Check<PortRange> StartNotAboveEnd() {
  return Rule<PortRange>("Start ≤ end.", [](const PortRange& range, const Field&, const ConfigReader&) {
    if (range.start <= range.end) return std::string();
    return "start " + std::to_string(range.start) + " is above end " + std::to_string(range.end);
  });
}

// The agent's cpuset as messages write it.
std::string CpusetText(const ConfigReader& reader) {
  return reader.cpuset().empty() ? "empty" : FormatCoreList(reader.cpuset());
}

// An explicit allowed-cores lies inside the agent's cpuset.
Check<std::vector<int>> InsideCpuset() {
  return Rule<std::vector<int>>("", [](const std::vector<int>& cores, const Field&,
                                       const ConfigReader& reader) -> std::string {
    std::vector<int> missing;
    std::set_difference(cores.begin(), cores.end(), reader.cpuset().begin(), reader.cpuset().end(),
                        std::back_inserter(missing));
    if (missing.empty()) return "";
    return std::string(missing.size() == 1 ? "core " : "cores ") + FormatCoreList(missing) +
           (missing.size() == 1 ? " is" : " are") + " not in this agent's cpuset (" + CpusetText(reader) +
           "); list only cores from it";
  });
}

// Without allowed-cores: the cpuset minus its last reserved-cpu cores,
// unless reserved-cpu was refused (reported already).
void ResolveDefaultCores(ResourceConfig& resource, ConfigReader& reader) {
  const KeyOutcome reserved_key = reader.OutcomeOf("resource.reserved-cpu");
  if (reserved_key.node != nullptr && !reserved_key.ok) return;
  const std::vector<int>& cpuset = reader.cpuset();
  const size_t reserved = static_cast<size_t>(resource.reserved_cpu);
  if (reserved >= cpuset.size()) {
    reader.Report(reserved_key.node != nullptr ? &reserved_key.node->source() : nullptr, "resource.reserved-cpu",
                  "reserving " + std::to_string(reserved) + " of the " + std::to_string(cpuset.size()) +
                      " cores in this agent's cpuset (" + CpusetText(reader) +
                      ") leaves none for kernels; lower reserved-cpu or set [resource.cpu] allowed-cores");
    return;
  }
  resource.allowed_cores.assign(cpuset.begin(), cpuset.end() - static_cast<std::ptrdiff_t>(reserved));
  resource.allowed_cores_explicit = false;
}

// An explicit memory share fits in the node.
Check<uint64_t> FitsNodeMemory() {
  return Rule<uint64_t>("", [](const uint64_t& size, const Field&, const ConfigReader& reader) -> std::string {
    if (size <= reader.host().memory_bytes) return "";
    return DescribeSize(size) + " is more than this node's memory of " + DescribeSize(reader.host().memory_bytes) +
           "; lower it";
  });
}

// Without size: node memory minus reserved-mem, unless reserved-mem was
// refused (reported already).
void ResolveDefaultMemory(ResourceConfig& resource, ConfigReader& reader) {
  const KeyOutcome reserved_key = reader.OutcomeOf("resource.reserved-mem");
  if (reserved_key.node != nullptr && !reserved_key.ok) return;
  const uint64_t node_memory = reader.host().memory_bytes;
  if (resource.reserved_mem >= node_memory) {
    reader.Report(reserved_key.node != nullptr ? &reserved_key.node->source() : nullptr, "resource.reserved-mem",
                  "reserving " + DescribeSize(resource.reserved_mem) + " leaves none of this node's memory of " +
                      DescribeSize(node_memory) + " for kernels; lower reserved-mem or set [resource.memory] size");
    return;
  }
  resource.memory_size = node_memory - resource.reserved_mem;
  resource.memory_size_explicit = false;
}

// Without docker-host: $DOCKER_HOST, checked like the key, else the initializer.
void ResolveDefaultDockerHost(ContainerConfig& container, ConfigReader& reader) {
  const std::string& env = reader.host().docker_host_env;
  if (env.empty()) return;
  if (std::string problem = DockerHostProblem(env); !problem.empty()) {
    reader.Report(nullptr, "container.docker-host",
                  "the default comes from $DOCKER_HOST, and " + problem +
                      "; fix DOCKER_HOST or set [container] docker-host");
    return;
  }
  container.docker_host = env;
}

// No two mock devices share an id; a later one names the first.
Check<std::vector<MockDevice>> UniqueDeviceIds() {
  return Check<std::vector<MockDevice>>{
      "", [](const std::vector<MockDevice>& devices, const Field& field, ConfigReader& reader) {
        bool unique = true;
        for (size_t i = 0; i < devices.size(); ++i) {
          if (devices[i].id.empty()) continue;  // no usable id: reported already
          auto first = std::find_if(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(i),
                                    [&](const MockDevice& other) { return other.id == devices[i].id; });
          if (first == devices.begin() + static_cast<std::ptrdiff_t>(i)) continue;
          const toml::node* id = field.node->as_array()->get(i)->as_table()->get("id");
          reader.Report(Field{id, field.path + "[" + std::to_string(i) + "].id"},
                        "\"" + devices[i].id + "\" is also the id of resource.mock.devices[" +
                            std::to_string(first - devices.begin()) + "]; give each device its own id");
          unique = false;
        }
        return unique;
      }};
}

// The string ids of resource.mock.devices in the file, or nullopt when some
// device has none (or there are no devices), so an allow-list cannot be judged.
std::optional<std::vector<std::string>> DeclaredMockIds(const toml::table& root) {
  const toml::node* node = NodeAt(root, "resource.mock.devices");
  const toml::array* devices = node != nullptr ? node->as_array() : nullptr;
  if (devices == nullptr || devices->empty()) return std::nullopt;
  std::vector<std::string> ids;
  for (const toml::node& device : *devices) {
    const toml::table* table = device.as_table();
    const auto* id = table != nullptr ? table->get_as<std::string>("id") : nullptr;
    if (id == nullptr) return std::nullopt;
    ids.push_back(id->get());
  }
  return ids;
}

Check<std::string> DeclaredMockDevice() {
  return Rule<std::string>("", [](const std::string& id, const Field&, const ConfigReader& reader) -> std::string {
    const std::optional<std::vector<std::string>> declared = DeclaredMockIds(reader.root());
    if (!declared || std::find(declared->begin(), declared->end(), id) != declared->end()) return "";
    return "\"" + id + "\" is not a declared device; list ids from resource.mock.devices: " + JoinList(*declared);
  });
}

// ------------------------------------------------------------- the tables

KeyTable<AgentConfig> AgentKeys() {
  return {"agent", "[agent]", {
    MemberKey("id", &AgentConfig::id, StringType(),
              "The agent's id, unique in the cluster. It marks every container the agent creates "
              "(`ai.backend.owner`).",
              {AgentIdPattern()})
        .Required("every agent needs an id that is unique in the cluster, e.g. [agent] id = \"gpu1-a\""),
    MemberKey("node", &AgentConfig::node, StringType(),
              "The name of the node this agent runs on, as reported by the API and `slotctl node`.", {NotEmpty()})
        .DefaultsTo("the host name",
                    [](AgentConfig& agent, ConfigReader& reader) {
                      agent.node = reader.host().hostname;
                      if (agent.node.empty()) {
                        reader.Report(nullptr, "agent.node",
                                      "the host name is unknown, so there is no default; set [agent] node");
                      }
                    }),
    StoredKey<AgentConfig, ListenAddress>(
        "rpc-listen-addr", ListenAddressType(), "Address of the HTTP API, `host:port`.", {},
        [](AgentConfig& agent, ListenAddress&& address) {
          agent.rpc_host = std::move(address.host);
          agent.rpc_port = address.port;
        },
        [](const AgentConfig& defaults) {
          return ListenAddressType().Show(ListenAddress{defaults.rpc_host, defaults.rpc_port});
        }),
    MemberKey("ipc-base-path", &AgentConfig::ipc_base_path, PathType(),
              "Directory of the agent's unix socket (`agent.sock`) and lock file (`agent.lock`). Must be different "
              "for each agent on a node.")
        .DefaultsTo("`" + DefaultIpcBasePath("<id>") + "`",
                    [](AgentConfig& agent, ConfigReader&) { agent.ipc_base_path = DefaultIpcBasePath(agent.id); }),
    MemberKey("var-base-path", &AgentConfig::var_base_path, PathType(),
              "Directory for the agent's persistent files. Must be different for each agent on a node.")
        .DefaultsTo("`" + DefaultVarBasePath("<id>") + "`",
                    [](AgentConfig& agent, ConfigReader&) { agent.var_base_path = DefaultVarBasePath(agent.id); }),
    MemberKey("token-file", &AgentConfig::token_file, PathType(),
              "File holding an API token. When set, every TCP request except `GET /health` needs "
              "`Authorization: Bearer <token>`. When absent, the TCP API needs no token."),
    MemberKey("scaling-group", &AgentConfig::scaling_group, StringType(),
              "The scaling group the agent belongs to.", {NotEmpty()}),
  }};
}

KeyTable<ApiConfig> ApiKeys() {
  return {"api", "[api]", {
    MemberKey("max-connections", &ApiConfig::max_connections, IntegerType(),
              "Open connections each listener serves at once; one more is answered `503` and closed. TCP and the "
              "unix socket count apart.",
              {IntegerRange(1, 65536)}),
    MemberKey("request-timeout", &ApiConfig::request_timeout, DurationType(),
              "Time to receive one whole request (headers and body), counted from when the agent starts waiting "
              "for it, idle keep-alive time included; also the time to send one answer or one piece of a stream. "
              "Past it the connection is closed.",
              {DurationRange(milliseconds(100), milliseconds(600'000))}),
    MemberKey("max-body-size", &ApiConfig::max_body_size, SizeType(),
              "The largest request body; a larger one is answered `413` before it is read.",
              {SizeRange(1ull << 10, 1ull << 30)}),
  }};
}

KeyTable<NodeConfig> NodeKeys() {
  return {"node", "[node]", {
    MemberKey("claims-dir", &NodeConfig::claims_dir, PathType(),
              "Directory shared by all agents of this node, where each agent claims its id, ports, paths, cores, "
              "devices and memory share. All agents of a node must use the same directory."),
  }};
}

KeyTable<ContainerConfig> ContainerKeys() {
  return {"container", "[container]", {
    MemberKey("docker-host", &ContainerConfig::docker_host, StringType(), "The Docker Engine to use.",
              {DockerHostScheme()})
        .DefaultsTo("`$DOCKER_HOST` if set, else " + StringType().Show(ContainerConfig{}.docker_host),
                    ResolveDefaultDockerHost),
    StoredKey<ContainerConfig, PortRange>(
        "port-range", PortRangeType(),
        "`[start, end]`, inclusive: the host ports this agent may give to kernels. Agents on one node need ranges "
        "that do not overlap.",
        {StartNotAboveEnd()},
        [](ContainerConfig& container, PortRange&& range) {
          container.port_range_start = range.start;
          container.port_range_end = range.end;
        },
        [](const ContainerConfig& defaults) {
          return PortRangeType().Show(PortRange{defaults.port_range_start, defaults.port_range_end});
        }),
    MemberKey("network", &ContainerConfig::network, EnumType({"none", "host", "bridge"}),
              "Network mode of kernel containers."),
    MemberKey("stats-type", &ContainerConfig::stats_type, EnumType({"cgroup", "docker"}),
              "Where kernel measures come from: `cgroup` reads the container's cgroup directly; `docker` asks the "
              "Engine's stats API, for hosts where the agent cannot read cgroups (the engine takes one to two "
              "seconds per container, so a sweep of many kernels takes seconds even with eight calls at a time)."),
    // Faster sweeps cost more than they tell; slower ones leave the API's measures too stale to act on.
    MemberKey("stats-interval", &ContainerConfig::stats_interval, DurationType(),
              "How often the stats loop measures this agent's kernels, cores and devices; the API serves the "
              "latest sweep (see [api.md](api.md), \"Stats\").",
              {DurationRange(milliseconds(100), milliseconds(3'600'000))}),
    // A longer stop-timeout would hold a delete for over an hour.
    MemberKey("stop-timeout", &ContainerConfig::stop_timeout, DurationType(),
              "How long a kernel gets to exit after SIGTERM before it is killed.",
              {DurationRange(milliseconds(0), milliseconds(3'600'000))}),
    // Fewer pids or log bytes than the minimums break ordinary kernels.
    MemberKey("pids-limit", &ContainerConfig::pids_limit, IntegerType(),
              "The most processes (and threads) one kernel may have at once, so that no kernel can exhaust the "
              "node's pids.",
              {IntegerRange(0, 4'194'304),
               ZeroOrAtLeast<int64_t>(IntegerType(), 16, "no limit", "is too small for a kernel")}),
    MemberKey("log-max-size", &ContainerConfig::log_max_size, SizeType(),
              "Kernels log through the engine's `json-file` driver, at most this much per file and two files, so "
              "that no kernel can fill the engine's disk with output; the oldest output goes first.",
              {ZeroOrAtLeast<uint64_t>(SizeType(), 1ull << 20, "the engine's own logging", "is too small")}),
  }};
}

KeyTable<ResourceConfig> ResourceKeys() {
  return {"resource", "[resource]", {
    MemberKey("reserved-cpu", &ResourceConfig::reserved_cpu, IntegerType(),
              "Cores kept for the operating system when `[resource.cpu] allowed-cores` is not given: the agent "
              "uses its cpuset minus its last `reserved-cpu` cores. It must leave at least one core. Ignored when "
              "`allowed-cores` is given.",
              {IntegerRange(0, kMaxCores)}),
    MemberKey("reserved-mem", &ResourceConfig::reserved_mem, SizeType(),
              "Memory kept for the operating system when `[resource.memory] size` is not given: the agent's share "
              "is the node's memory minus this. Must leave some memory. Ignored when `size` is given."),
  }};
}

KeyTable<ResourceConfig> CpuKeys() {
  return {"resource.cpu", "[resource.cpu]", {
    StoredKey<ResourceConfig, std::vector<int>>(
        "allowed-cores", CoreListType(),
        "The cores this agent may give to kernels. Every core must be in the cpuset the agent runs with (its CPU "
        "affinity); the error names the cores that are not. Agents on one node need disjoint lists.",
        {InsideCpuset()},
        [](ResourceConfig& resource, std::vector<int>&& cores) {
          resource.allowed_cores = std::move(cores);
          resource.allowed_cores_explicit = true;
        },
        nullptr)
        .DefaultsTo("the agent's cpuset minus `reserved-cpu` cores", ResolveDefaultCores),
  }};
}

KeyTable<ResourceConfig> MemoryKeys() {
  return {"resource.memory", "[resource.memory]", {
    StoredKey<ResourceConfig, uint64_t>(
        "size", SizeType(),
        "This agent's share of the node's memory, at most the node's total memory (`MemTotal` in "
        "`/proc/meminfo`). The shares of all agents on one node must fit in the node's memory.",
        {AboveZero(), FitsNodeMemory()},
        [](ResourceConfig& resource, uint64_t&& size) {
          resource.memory_size = size;
          resource.memory_size_explicit = true;
        },
        nullptr)
        .DefaultsTo("node memory minus `reserved-mem`", ResolveDefaultMemory),
  }};
}

KeyTable<CudaConfig> CudaKeys() {
  return {"resource.cuda", "[resource.cuda]", {
    StoredKey<CudaConfig, std::vector<std::string>>(
        "allowed-devices",
        ListType(GpuEntryType(), {GpuIndexOrUuid()}, "GPU UUIDs or indices like [\"GPU-6f3c1a2b-...\", \"1\"]",
                 "list at least one GPU, or leave allowed-devices out to use every visible GPU", "list each GPU once"),
        "Allow-list: the GPUs this agent may give to kernels; the others are left alone. Each entry is a GPU UUID "
        "(`\"GPU-6f3c1a2b-9d4e-4f5a-8b6c-7d8e9f0a1b2c\"`) or an index (`\"1\"`), as `nvidia-smi -L` shows them. "
        "Entries are strings: an index written as a bare integer is an error that says to quote it. Whether each "
        "entry names a GPU of this node is checked when the agent starts, and the error lists the GPUs found. "
        "Agents on one node need lists that do not share a GPU.",
        {},
        [](CudaConfig& cuda, std::vector<std::string>&& devices) {
          cuda.allowed_devices = std::move(devices);
          cuda.allowed_devices_explicit = true;
        },
        nullptr)
        .DefaultDoc("every GPU NVML reports"),
    MemberKey("nvml-library", &CudaConfig::nvml_library, StringType(),
              "The NVML library to load: a file name, searched for as the dynamic loader does, or an absolute "
              "path.",
              {NotEmpty(), LibraryNameOrAbsolutePath()}),
    MemberKey("attach", &CudaConfig::attach, EnumType({"device-requests", "env", "cdi"}),
              "How a kernel's container is given its GPUs: `device-requests` (a Docker device request for the "
              "GPUs' UUIDs, served by the NVIDIA Container Toolkit), `env` (only `NVIDIA_VISIBLE_DEVICES` and "
              "`CUDA_VISIBLE_DEVICES`, for a runtime that reads them) or `cdi` (CDI device names "
              "`nvidia.com/gpu=<uuid>`). Every mode also sets the two variables."),
  }};
}

KeyTable<MockDevice> MockDeviceKeys() {
  return {"resource.mock.devices", "a mock device", {
    MemberKey("id", &MockDevice::id, StringType(),
              "The device's name in allocations and `slotctl`. Unique among the devices.", {MockDeviceIdPattern()})
        .Required("give every device an id, e.g. id = \"mock0\""),
    MemberKey("memory", &MockDevice::memory_bytes, SizeType(), "The device's memory, as reported by the API.",
              {AboveZero()})
        .Required("give every device its memory, e.g. memory = \"16g\""),
    MemberKey("processing-units", &MockDevice::processing_units, IntegerType(),
              "The device's processing units (streaming multiprocessors, for a GPU), as reported by the API.",
              {IntegerRange(1, std::numeric_limits<int>::max())}),
    MemberKey("numa-node", &MockDevice::numa_node, IntegerType(),
              "The NUMA node the device is attached to; a kernel gets cores of the same node when it can.",
              {IntegerRange(0, kMaxNumaNodes - 1)}),
  }};
}

KeyTable<MockConfig> MockKeys() {
  return {"resource.mock", "[resource.mock]", {
    MemberKey("devices", &MockConfig::devices,
              TableListType(MockDeviceKeys(), "device tables like [{ id = \"mock0\", memory = \"16g\" }]",
                            "declare at least one device, or remove [resource.mock] to turn the mock plugin off",
                            "{ id = \"mock0\", memory = \"16g\" }"),
              "Every mock device of the node, declared with the keys below. Write it as an array of inline tables "
              "(`devices = [{ id = \"mock0\", memory = \"16g\" }]`) or as `[[resource.mock.devices]]` tables.",
              {UniqueDeviceIds()})
        .Required("declare the mock devices, e.g. devices = [{ id = \"mock0\", memory = \"16g\" }]"),
    StoredKey<MockConfig, std::vector<std::string>>(
        "allowed-devices",
        ListType(StringType(), {DeclaredMockDevice()}, "device ids like [\"mock0\"]",
                 "list at least one device, or leave allowed-devices out to use every declared device",
                 "list each device once"),
        "Allow-list: the ids of the devices this agent may give to kernels. Each must be the `id` of a device in "
        "`devices`; the error lists the declared ids. Agents on one node need lists that do not share a device.",
        {},
        [](MockConfig& mock, std::vector<std::string>&& ids) {
          mock.allowed_devices = std::move(ids);
          mock.allowed_devices_explicit = true;
        },
        nullptr)
        .DefaultsTo("every declared device",
                    [](MockConfig& mock, ConfigReader&) {
                      for (const MockDevice& device : mock.devices) mock.allowed_devices.push_back(device.id);
                    }),
  }};
}

// A section that is always read, into `part` of Config.
template <typename T>
std::function<T*(Config&, bool)> Always(T* (*part)(Config&)) {
  return [part](Config& config, bool) { return part(config); };
}

Schema BuildAgentSchema() {
  Schema schema;
  schema.Add(Section(AgentKeys(), Always<AgentConfig>([](Config& c) { return &c.agent; })));
  schema.Add(Section(ApiKeys(), Always<ApiConfig>([](Config& c) { return &c.api; })));
  schema.Add(Section(NodeKeys(), Always<NodeConfig>([](Config& c) { return &c.node; })));
  schema.Add(Section(ContainerKeys(), Always<ContainerConfig>([](Config& c) { return &c.container; })));
  schema.Add(Section(ResourceKeys(), Always<ResourceConfig>([](Config& c) { return &c.resource; })));
  schema.Add(Section(CpuKeys(), Always<ResourceConfig>([](Config& c) { return &c.resource; })));
  schema.Add(Section(MemoryKeys(), Always<ResourceConfig>([](Config& c) { return &c.resource; })));
  // The plugin sections: present turns the plugin on.
  schema.Add(Section(CudaKeys(), std::function<CudaConfig*(Config&, bool)>([](Config& c, bool present) {
                       return present ? &c.resource.cuda.emplace() : nullptr;
                     })));
  schema.Add(Section(MockKeys(), std::function<MockConfig*(Config&, bool)>([](Config& c, bool present) {
                       return present ? &c.resource.mock.emplace() : nullptr;
                     })));
  return schema;
}

}  // namespace

const Schema& AgentSchema() {
  static const Schema schema = BuildAgentSchema();
  return schema;
}

}  // namespace slotd
