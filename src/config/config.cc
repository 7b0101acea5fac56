// agent.toml → Config: toml++ does the syntax, this file checks the layout
// (known sections and keys), the type and range of every value, and resolves
// the defaults that depend on the host. Every problem is collected and
// reported in file order; none of toml++'s exceptions leaves this file.
#include "config/config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string_view>
#include <system_error>
#include <toml++/toml.h>

#include "common/units.h"

namespace slotd {
namespace {

// The sections this version accepts, in the order messages list them.
constexpr std::string_view kSections[] = {"agent", "api", "node", "container", "resource", "resource.cpu",
                                          "resource.memory", "resource.cuda", "resource.mock"};

// The keys each section accepts, in the order messages and docs/config.md list them.
constexpr std::string_view kAgentKeys[] = {"id", "node", "rpc-listen-addr", "ipc-base-path",
                                           "var-base-path", "token-file", "scaling-group"};
constexpr std::string_view kApiKeys[] = {"max-connections", "request-timeout", "max-body-size"};
constexpr std::string_view kNodeKeys[] = {"claims-dir"};
constexpr std::string_view kContainerKeys[] = {"docker-host",    "port-range",   "network",   "stats-type",
                                               "stats-interval", "stop-timeout", "pids-limit", "log-max-size"};
constexpr std::string_view kResourceKeys[] = {"reserved-cpu", "reserved-mem"};
constexpr std::string_view kCpuKeys[] = {"allowed-cores"};
constexpr std::string_view kMemoryKeys[] = {"size"};
constexpr std::string_view kCudaKeys[] = {"allowed-devices", "nvml-library", "attach"};
constexpr std::string_view kMockKeys[] = {"devices", "allowed-devices"};
// The keys of one table in [resource.mock] devices.
constexpr std::string_view kMockDeviceKeys[] = {"id", "memory", "processing-units", "numa-node"};

// The values container.network and container.stats-type accept.
constexpr std::string_view kNetworks[] = {"none", "host", "bridge"};
constexpr std::string_view kStatsTypes[] = {"cgroup", "docker"};
// How resource.cuda.attach gives a container its GPUs.
constexpr std::string_view kAttachModes[] = {"device-requests", "env", "cdi"};
// The bounds of container.stats-interval: faster sweeps cost more than they
// tell; slower ones leave the API's measures too stale to act on.
constexpr std::chrono::milliseconds kMinStatsInterval{100};
constexpr std::chrono::milliseconds kMaxStatsInterval{3'600'000};

// Bounds of [container] keys: a longer stop-timeout would hold a delete for
// over an hour; fewer pids or log bytes than this break ordinary kernels.
constexpr std::chrono::milliseconds kMaxStopTimeout{3'600'000};
constexpr int64_t kMinPidsLimit = 16;
constexpr uint64_t kMinLogSize = 1ull << 20;

// The bounds of api.request-timeout and api.max-body-size.
constexpr std::chrono::milliseconds kMinRequestTimeout{100};
constexpr std::chrono::milliseconds kMaxRequestTimeout{600'000};
constexpr uint64_t kMinBodySize = 1ull << 10;
constexpr uint64_t kMaxBodySize = 1ull << 30;

// The Docker Engine socket used when neither the file nor $DOCKER_HOST names one.
constexpr const char* kDefaultDockerHost = "unix:///var/run/docker.sock";
constexpr int kMaxCores = 4096;  // the highest core number ParseCoreList accepts, plus one
constexpr int kMaxNumaNodes = 1024;  // Linux's largest MAX_NUMNODES; node numbers are below it
// Where the kernel lists each NUMA node's cores, as node<N>/cpulist.
constexpr const char* kNumaNodeDir = "/sys/devices/system/node";

// The keys of a known section; empty for the top level and unknown sections.
std::span<const std::string_view> KeysOf(std::string_view section) {
  if (section == "agent") return kAgentKeys;
  if (section == "api") return kApiKeys;
  if (section == "node") return kNodeKeys;
  if (section == "container") return kContainerKeys;
  if (section == "resource") return kResourceKeys;
  if (section == "resource.cpu") return kCpuKeys;
  if (section == "resource.memory") return kMemoryKeys;
  if (section == "resource.cuda") return kCudaKeys;
  if (section == "resource.mock") return kMockKeys;
  return {};
}

// True when `item` is in `list`.
bool Contains(std::span<const std::string_view> list, std::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// "a, b, c", from any list of strings.
template <typename Strings>
std::string JoinList(const Strings& list) {
  std::string out;
  for (std::string_view item : list) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

// A key as it appears in a dotted path: bare when TOML allows it, else quoted.
std::string KeyPart(std::string_view key) {
  bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_';
  });
  return bare ? std::string(key) : "\"" + std::string(key) + "\"";
}

// "expected ..., found <this>": the TOML type of a node with its article.
std::string TypeName(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a floating-point number";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

// True for [a-z0-9][a-z0-9._-]{0,63}.
bool IsValidAgentId(const std::string& id) {
  auto lower_or_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (id.empty() || id.size() > 64 || !lower_or_digit(id[0])) return false;
  return std::all_of(id.begin(), id.end(),
                     [&](char c) { return lower_or_digit(c) || c == '.' || c == '_' || c == '-'; });
}

// True for [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
bool IsValidMockDeviceId(const std::string& id) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (id.empty() || id.size() > 64 || !alnum(id[0])) return false;
  return std::all_of(id.begin(), id.end(), [&](char c) { return alnum(c) || c == '.' || c == '_' || c == '-'; });
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

// Why a docker-host value is unusable, or empty if it is fine.
std::string DockerHostProblem(const std::string& value) {
  if (value.rfind("unix://", 0) == 0) {
    if (value.size() > 7 && value[7] == '/') return "";
    return "\"" + value + "\" needs an absolute socket path after unix://, e.g. \"" + kDefaultDockerHost + "\"";
  }
  if (value.rfind("tcp://", 0) == 0) {
    if (value.size() > 6) return "";
    return "\"" + value + "\" needs host:port after tcp://, e.g. \"tcp://127.0.0.1:2375\"";
  }
  return "\"" + value + "\" must start with unix:// or tcp://, e.g. \"" + kDefaultDockerHost + "\"";
}

// One problem found in the file. Line 0 means it has no line of its own
// (a missing key, or a default that cannot be resolved).
struct Problem {
  uint32_t line = 0;
  uint32_t column = 0;
  std::string text;  // "<key.path>: <what is wrong>"
};

// A key present in the file: its value node and its full dotted path.
struct Field {
  const toml::node* node;
  std::string path;
};

// Walks one parsed document, fills a Config and collects every problem.
// Use once: construct, then Run.
class Validator {
 public:
  Validator(const std::string& file, const HostFacts& host) : file_(file), host_(host), cpuset_(host.cpuset) {
    std::sort(cpuset_.begin(), cpuset_.end());
    cpuset_.erase(std::unique(cpuset_.begin(), cpuset_.end()), cpuset_.end());
  }

  // Validates `root`; the Config, or InvalidArgument listing every problem in file order.
  Result<Config> Run(const toml::table& root);

 private:
  // Records a problem at `where`, or without a line when `where` is null.
  void Report(const toml::source_region* where, const std::string& key_path, const std::string& what);
  void Report(const Field& field, const std::string& what) { Report(&field.node->source(), field.path, what); }

  // Reports unknown sections and keys, and known sections that are not tables.
  void CheckLayout(const toml::table& table, const std::string& path);

  // The section at dotted `path`, or null when absent or not a table.
  static const toml::table* SectionTable(const toml::table& root, std::string_view path);

  // The key `key` of `section` (at `section_path`), or nullopt when absent.
  static std::optional<Field> Find(const toml::table* section, std::string_view section_path, std::string_view key);

  // Typed readers: the value, or nullopt after reporting why it is unusable.
  std::optional<std::string> String(const Field& field);
  std::optional<int64_t> Integer(const Field& field);
  std::optional<int64_t> IntegerIn(const Field& field, int64_t min, int64_t max);
  std::optional<std::string> NonEmptyString(const Field& field);
  std::optional<std::string> AbsolutePath(const Field& field);
  std::optional<std::string> OneOf(const Field& field, std::span<const std::string_view> choices);
  std::optional<uint64_t> Size(const Field& field);
  std::optional<std::chrono::milliseconds> Duration(const Field& field);
  // The items of the array at `field`, each as a Field whose path is
  // "<key.path>[<index>]", counted from 0; nullopt after reporting a value
  // that is not an array of `what`, or an empty one (`if_empty` advises).
  std::optional<std::vector<Field>> Items(const Field& field, std::string_view what, std::string_view if_empty);

  // Section readers: fill their part of the Config with the file's values or
  // the defaults, reporting every unusable value.
  void ReadAgent(const toml::table& root, AgentConfig& agent);
  void ReadRpcListenAddr(const Field& field, AgentConfig& agent);
  void ReadApi(const toml::table& root, ApiConfig& api);
  void ReadNode(const toml::table& root, NodeConfig& node);
  void ReadContainer(const toml::table& root, ContainerConfig& container);
  void ReadPortRange(const Field& field, ContainerConfig& container);
  void ReadResource(const toml::table& root, ResourceConfig& resource);
  void ReadCuda(const toml::table& root, ResourceConfig& resource);
  void ReadMock(const toml::table& root, ResourceConfig& resource);
  // Reads resource.mock.devices into mock.devices. Returns false when some
  // device's id is unknown (not a table, id missing or not a string), so the
  // allow-list cannot be checked against the declared ids.
  bool ReadMockDevices(const Field& field, MockConfig& mock);
  // Reads one table of resource.mock.devices; false when its id is unknown.
  bool ReadMockDevice(const Field& field, const MockConfig& mock, MockDevice& device);

  // Sets allowed_cores from [resource.cpu] allowed-cores, else from the cpuset
  // minus its last reserved_cpu cores. `reserved_ok` is false when
  // reserved-cpu was unusable (already reported), which skips the default.
  void ResolveCores(const toml::table& root, const std::optional<Field>& reserved_field, bool reserved_ok,
                    ResourceConfig& resource);
  // Sets memory_size from [resource.memory] size, else node memory minus reserved_mem.
  void ResolveMemory(const toml::table& root, const std::optional<Field>& reserved_field, bool reserved_ok,
                     ResourceConfig& resource);

  const std::string& file_;  // the path as given, used in every message
  const HostFacts& host_;
  std::vector<int> cpuset_;  // host_.cpuset, sorted and unique
  std::vector<Problem> problems_;
};

void Validator::Report(const toml::source_region* where, const std::string& key_path, const std::string& what) {
  Problem problem;
  if (where != nullptr) {
    problem.line = where->begin.line;
    problem.column = where->begin.column;
  }
  problem.text = key_path + ": " + what;
  problems_.push_back(std::move(problem));
}

void Validator::CheckLayout(const toml::table& table, const std::string& path) {
  for (auto&& [key, node] : table) {
    const std::string child = path.empty() ? KeyPart(key.str()) : path + "." + KeyPart(key.str());
    if (Contains(kSections, child)) {
      if (const toml::table* sub = node.as_table()) CheckLayout(*sub, child);
      else Report(&node.source(), child, "expected a table, found " + TypeName(node));
      continue;
    }
    if (!path.empty() && Contains(KeysOf(path), key.str())) continue;  // its value is checked by a reader
    if (node.is_table() || node.is_array_of_tables()) {
      Report(&key.source(), child, "unknown section; known sections: " + JoinList(kSections));
    } else if (path.empty()) {
      Report(&key.source(), child,
             "unknown key; keys belong in one of the sections " + JoinList(kSections));
    } else {
      Report(&key.source(), child, "unknown key; known keys of [" + path + "]: " + JoinList(KeysOf(path)));
    }
  }
}

const toml::table* Validator::SectionTable(const toml::table& root, std::string_view path) {
  const toml::table* table = &root;
  while (table != nullptr && !path.empty()) {
    size_t dot = path.find('.');
    table = table->get_as<toml::table>(path.substr(0, dot));
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return table;
}

std::optional<Field> Validator::Find(const toml::table* section, std::string_view section_path,
                                     std::string_view key) {
  if (section == nullptr) return std::nullopt;
  const toml::node* node = section->get(key);
  if (node == nullptr) return std::nullopt;
  return Field{node, std::string(section_path) + "." + std::string(key)};
}

std::optional<std::string> Validator::String(const Field& field) {
  if (const auto* value = field.node->as_string()) return value->get();
  Report(field, "expected a string, found " + TypeName(*field.node));
  return std::nullopt;
}

std::optional<int64_t> Validator::Integer(const Field& field) {
  if (const auto* value = field.node->as_integer()) return value->get();
  Report(field, "expected an integer, found " + TypeName(*field.node));
  return std::nullopt;
}

std::optional<int64_t> Validator::IntegerIn(const Field& field, int64_t min, int64_t max) {
  std::optional<int64_t> value = Integer(field);
  if (value && (*value < min || *value > max)) {
    Report(field, std::to_string(*value) + " is out of range; use " + std::to_string(min) + " to " +
                      std::to_string(max));
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> Validator::NonEmptyString(const Field& field) {
  std::optional<std::string> value = String(field);
  if (value && value->empty()) {
    Report(field, "must not be empty");
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> Validator::AbsolutePath(const Field& field) {
  std::optional<std::string> value = String(field);
  if (value && (value->empty() || value->front() != '/')) {
    Report(field, "\"" + *value + "\" is not an absolute path; write the full path starting with /");
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> Validator::OneOf(const Field& field, std::span<const std::string_view> choices) {
  std::optional<std::string> value = String(field);
  if (value && !Contains(choices, *value)) {
    Report(field, "\"" + *value + "\" is not one of " + JoinList(choices));
    return std::nullopt;
  }
  return value;
}

std::optional<uint64_t> Validator::Size(const Field& field) {
  if (const auto* number = field.node->as_integer()) {
    if (number->get() >= 0) return static_cast<uint64_t>(number->get());
    Report(field, "size " + std::to_string(number->get()) + " is negative; give bytes or a size like \"32g\"");
    return std::nullopt;
  }
  if (const auto* text = field.node->as_string()) {
    Result<uint64_t> size = ParseSize(text->get());
    if (size.ok()) return *size;
    Report(field, size.status().message());
    return std::nullopt;
  }
  Report(field, "expected a size (a string like \"32g\" or an integer of bytes), found " + TypeName(*field.node));
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> Validator::Duration(const Field& field) {
  const auto* text = field.node->as_string();
  if (text == nullptr) {
    Report(field, "expected a duration string like \"10s\", found " + TypeName(*field.node));
    return std::nullopt;
  }
  Result<std::chrono::milliseconds> duration = ParseDuration(text->get());
  if (duration.ok()) return *duration;
  Report(field, duration.status().message());
  return std::nullopt;
}

std::optional<std::vector<Field>> Validator::Items(const Field& field, std::string_view what,
                                                   std::string_view if_empty) {
  const toml::array* array = field.node->as_array();
  if (array == nullptr) {
    Report(field, "expected an array of " + std::string(what) + ", found " + TypeName(*field.node));
    return std::nullopt;
  }
  if (array->empty()) {
    Report(field, "is empty; " + std::string(if_empty));
    return std::nullopt;
  }
  std::vector<Field> items;
  for (size_t i = 0; i < array->size(); ++i) {
    items.push_back(Field{array->get(i), field.path + "[" + std::to_string(i) + "]"});
  }
  return items;
}

void Validator::ReadAgent(const toml::table& root, AgentConfig& agent) {
  const toml::table* section = SectionTable(root, "agent");

  if (std::optional<Field> field = Find(section, "agent", "id")) {
    if (std::optional<std::string> id = String(*field)) {
      if (IsValidAgentId(*id)) {
        agent.id = *id;
      } else {
        Report(*field, "\"" + *id +
                           "\" is not a valid agent id; use 1 to 64 characters of a-z, 0-9, '.', '_' and '-', "
                           "starting with a letter or digit");
      }
    }
  } else if (section != nullptr || root.get("agent") == nullptr) {
    // A present [agent] that is not a table is reported by CheckLayout; one problem is enough.
    Report(section != nullptr ? &section->source() : nullptr, "agent.id",
           "missing; every agent needs an id that is unique in the cluster, e.g. [agent] id = \"gpu1-a\"");
  }

  agent.node = host_.hostname;
  if (std::optional<Field> field = Find(section, "agent", "node")) {
    if (std::optional<std::string> node = NonEmptyString(*field)) agent.node = *node;
  } else if (agent.node.empty()) {
    Report(nullptr, "agent.node", "the host name is unknown, so there is no default; set [agent] node");
  }

  agent.rpc_host = "127.0.0.1";
  agent.rpc_port = 6001;
  if (std::optional<Field> field = Find(section, "agent", "rpc-listen-addr")) ReadRpcListenAddr(*field, agent);

  agent.ipc_base_path = "/run/slotd/" + agent.id;
  if (std::optional<Field> field = Find(section, "agent", "ipc-base-path")) {
    if (std::optional<std::string> path = AbsolutePath(*field)) agent.ipc_base_path = *path;
  }
  agent.var_base_path = "/var/lib/slotd/" + agent.id;
  if (std::optional<Field> field = Find(section, "agent", "var-base-path")) {
    if (std::optional<std::string> path = AbsolutePath(*field)) agent.var_base_path = *path;
  }
  if (std::optional<Field> field = Find(section, "agent", "token-file")) {
    agent.token_file = AbsolutePath(*field);
  }
  if (std::optional<Field> field = Find(section, "agent", "scaling-group")) {
    if (std::optional<std::string> group = NonEmptyString(*field)) agent.scaling_group = *group;
  }
}

void Validator::ReadRpcListenAddr(const Field& field, AgentConfig& agent) {
  std::optional<std::string> addr = String(field);
  if (!addr) return;
  const size_t colon = addr->rfind(':');
  if (colon == std::string::npos) {
    Report(field, "\"" + *addr + "\" is not host:port; write it like \"127.0.0.1:6001\"");
    return;
  }
  const std::string host = addr->substr(0, colon);
  const std::string port_text = addr->substr(colon + 1);
  in_addr ipv4{};
  if (host != "localhost" && inet_pton(AF_INET, host.c_str(), &ipv4) != 1) {
    Report(field, "host \"" + host + "\" in \"" + *addr +
                      "\" is not an IPv4 address or \"localhost\"; write it like \"127.0.0.1:6001\"");
    return;
  }
  const bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      std::all_of(port_text.begin(), port_text.end(), [](unsigned char c) { return std::isdigit(c); });
  const int port = digits ? std::stoi(port_text) : -1;
  if (port < 0 || port > 65535) {
    Report(field, "port \"" + port_text + "\" in \"" + *addr +
                      "\" is not a number from 0 to 65535 (0 picks a free port)");
    return;
  }
  agent.rpc_host = host;
  agent.rpc_port = port;
}

void Validator::ReadApi(const toml::table& root, ApiConfig& api) {
  const toml::table* section = SectionTable(root, "api");
  if (std::optional<Field> field = Find(section, "api", "max-connections")) {
    if (std::optional<int64_t> n = IntegerIn(*field, 1, 65536)) api.max_connections = static_cast<int>(*n);
  }
  if (std::optional<Field> field = Find(section, "api", "request-timeout")) {
    if (std::optional<std::chrono::milliseconds> timeout = Duration(*field)) {
      if (*timeout < kMinRequestTimeout || *timeout > kMaxRequestTimeout) {
        Report(*field, "\"" + field->node->as_string()->get() + "\" is out of range; use 100ms to 10m");
      } else {
        api.request_timeout = *timeout;
      }
    }
  }
  if (std::optional<Field> field = Find(section, "api", "max-body-size")) {
    if (std::optional<uint64_t> size = Size(*field)) {
      if (*size < kMinBodySize || *size > kMaxBodySize) Report(*field, "is out of range; use 1k to 1g");
      else api.max_body_size = *size;
    }
  }
}

void Validator::ReadNode(const toml::table& root, NodeConfig& node) {
  const toml::table* section = SectionTable(root, "node");
  if (std::optional<Field> field = Find(section, "node", "claims-dir")) {
    if (std::optional<std::string> path = AbsolutePath(*field)) node.claims_dir = *path;
  }
}

void Validator::ReadContainer(const toml::table& root, ContainerConfig& container) {
  const toml::table* section = SectionTable(root, "container");

  if (std::optional<Field> field = Find(section, "container", "docker-host")) {
    if (std::optional<std::string> host = String(*field)) {
      if (std::string problem = DockerHostProblem(*host); problem.empty()) container.docker_host = *host;
      else Report(*field, problem);
    }
  } else if (!host_.docker_host_env.empty()) {
    if (std::string problem = DockerHostProblem(host_.docker_host_env); problem.empty()) {
      container.docker_host = host_.docker_host_env;
    } else {
      Report(nullptr, "container.docker-host",
             "the default comes from $DOCKER_HOST, and " + problem +
                 "; fix DOCKER_HOST or set [container] docker-host");
    }
  } else {
    container.docker_host = kDefaultDockerHost;
  }

  if (std::optional<Field> field = Find(section, "container", "port-range")) ReadPortRange(*field, container);
  if (std::optional<Field> field = Find(section, "container", "network")) {
    if (std::optional<std::string> network = OneOf(*field, kNetworks)) container.network = *network;
  }
  if (std::optional<Field> field = Find(section, "container", "stats-type")) {
    if (std::optional<std::string> type = OneOf(*field, kStatsTypes)) container.stats_type = *type;
  }
  if (std::optional<Field> field = Find(section, "container", "stats-interval")) {
    if (std::optional<std::chrono::milliseconds> interval = Duration(*field)) {
      if (*interval < kMinStatsInterval || *interval > kMaxStatsInterval) {
        Report(*field, "\"" + field->node->as_string()->get() + "\" is out of range; use 100ms to 1h");
      } else {
        container.stats_interval = *interval;
      }
    }
  }
  if (std::optional<Field> field = Find(section, "container", "stop-timeout")) {
    if (std::optional<std::chrono::milliseconds> timeout = Duration(*field)) {
      if (*timeout > kMaxStopTimeout) Report(*field, "\"" + field->node->as_string()->get() + "\" is out of range; use 0s to 1h");
      else container.stop_timeout = *timeout;
    }
  }
  if (std::optional<Field> field = Find(section, "container", "pids-limit")) {
    if (std::optional<int64_t> n = IntegerIn(*field, 0, 4'194'304)) {
      if (*n != 0 && *n < kMinPidsLimit) Report(*field, "is too small for a kernel; use 0 (no limit) or 16 and up");
      else container.pids_limit = *n;
    }
  }
  if (std::optional<Field> field = Find(section, "container", "log-max-size")) {
    if (std::optional<uint64_t> size = Size(*field)) {
      if (*size != 0 && *size < kMinLogSize) Report(*field, "is too small; use 0 (the engine's own logging) or 1m and up");
      else container.log_max_size = *size;
    }
  }
}

void Validator::ReadPortRange(const Field& field, ContainerConfig& container) {
  const toml::array* range = field.node->as_array();
  if (range == nullptr) {
    Report(field, "expected an array of two integers [start, end], found " + TypeName(*field.node));
    return;
  }
  if (range->size() != 2) {
    Report(field, "expected two integers [start, end], found " + std::to_string(range->size()) + " items");
    return;
  }
  int64_t ports[2] = {0, 0};
  for (size_t i = 0; i < 2; ++i) {
    const toml::node& item = *range->get(i);
    const auto* number = item.as_integer();
    if (number == nullptr) {
      Report(field, std::string(i == 0 ? "start" : "end") + " must be an integer, found " + TypeName(item));
      return;
    }
    if (number->get() < 1 || number->get() > 65535) {
      Report(field, std::string(i == 0 ? "start" : "end") + " port " + std::to_string(number->get()) +
                        " is out of range; use 1 to 65535");
      return;
    }
    ports[i] = number->get();
  }
  if (ports[0] > ports[1]) {
    Report(field, "start " + std::to_string(ports[0]) + " is above end " + std::to_string(ports[1]));
    return;
  }
  container.port_range_start = static_cast<int>(ports[0]);
  container.port_range_end = static_cast<int>(ports[1]);
}

void Validator::ReadResource(const toml::table& root, ResourceConfig& resource) {
  const toml::table* section = SectionTable(root, "resource");

  const std::optional<Field> reserved_cpu = Find(section, "resource", "reserved-cpu");
  bool reserved_cpu_ok = true;
  if (reserved_cpu) {
    std::optional<int64_t> cores = IntegerIn(*reserved_cpu, 0, kMaxCores);
    reserved_cpu_ok = cores.has_value();
    if (cores) resource.reserved_cpu = static_cast<int>(*cores);
  }

  const std::optional<Field> reserved_mem = Find(section, "resource", "reserved-mem");
  bool reserved_mem_ok = true;
  if (reserved_mem) {
    std::optional<uint64_t> bytes = Size(*reserved_mem);
    reserved_mem_ok = bytes.has_value();
    if (bytes) resource.reserved_mem = *bytes;
  }

  ResolveCores(root, reserved_cpu, reserved_cpu_ok, resource);
  ResolveMemory(root, reserved_mem, reserved_mem_ok, resource);
  ReadCuda(root, resource);
  ReadMock(root, resource);
}

void Validator::ResolveCores(const toml::table& root, const std::optional<Field>& reserved_field, bool reserved_ok,
                             ResourceConfig& resource) {
  const std::string cpuset = cpuset_.empty() ? "empty" : FormatCoreList(cpuset_);
  const std::optional<Field> field = Find(SectionTable(root, "resource.cpu"), "resource.cpu", "allowed-cores");
  if (field) {
    const auto* text = field->node->as_string();
    if (text == nullptr) {
      Report(*field, "expected a core list string like \"0-7,16\", found " + TypeName(*field->node));
      return;
    }
    Result<std::vector<int>> cores = ParseCoreList(text->get());
    if (!cores.ok()) {
      Report(*field, cores.status().message());
      return;
    }
    std::vector<int> missing;
    std::set_difference(cores->begin(), cores->end(), cpuset_.begin(), cpuset_.end(),
                        std::back_inserter(missing));
    if (!missing.empty()) {
      Report(*field, std::string(missing.size() == 1 ? "core " : "cores ") + FormatCoreList(missing) +
                         (missing.size() == 1 ? " is" : " are") + " not in this agent's cpuset (" + cpuset +
                         "); list only cores from it");
      return;
    }
    resource.allowed_cores = std::move(*cores);
    resource.allowed_cores_explicit = true;
    return;
  }
  if (!reserved_ok) return;
  const size_t reserved = static_cast<size_t>(resource.reserved_cpu);
  if (reserved >= cpuset_.size()) {
    Report(reserved_field ? &reserved_field->node->source() : nullptr, "resource.reserved-cpu",
           "reserving " + std::to_string(reserved) + " of the " + std::to_string(cpuset_.size()) +
               " cores in this agent's cpuset (" + cpuset +
               ") leaves none for kernels; lower reserved-cpu or set [resource.cpu] allowed-cores");
    return;
  }
  resource.allowed_cores.assign(cpuset_.begin(), cpuset_.end() - static_cast<std::ptrdiff_t>(reserved));
  resource.allowed_cores_explicit = false;
}

void Validator::ResolveMemory(const toml::table& root, const std::optional<Field>& reserved_field, bool reserved_ok,
                              ResourceConfig& resource) {
  const std::optional<Field> field = Find(SectionTable(root, "resource.memory"), "resource.memory", "size");
  if (field) {
    std::optional<uint64_t> size = Size(*field);
    if (!size) return;
    if (*size == 0) {
      Report(*field, "must be above 0");
      return;
    }
    if (*size > host_.memory_bytes) {
      Report(*field, DescribeSize(*size) + " is more than this node's memory of " +
                         DescribeSize(host_.memory_bytes) + "; lower it");
      return;
    }
    resource.memory_size = *size;
    resource.memory_size_explicit = true;
    return;
  }
  if (!reserved_ok) return;
  if (resource.reserved_mem >= host_.memory_bytes) {
    Report(reserved_field ? &reserved_field->node->source() : nullptr, "resource.reserved-mem",
           "reserving " + DescribeSize(resource.reserved_mem) + " leaves none of this node's memory of " +
               DescribeSize(host_.memory_bytes) + " for kernels; lower reserved-mem or set [resource.memory] size");
    return;
  }
  resource.memory_size = host_.memory_bytes - resource.reserved_mem;
  resource.memory_size_explicit = false;
}

void Validator::ReadCuda(const toml::table& root, ResourceConfig& resource) {
  const toml::table* section = SectionTable(root, "resource.cuda");
  if (section == nullptr) return;  // the plugin is off
  CudaConfig cuda;

  if (std::optional<Field> field = Find(section, "resource.cuda", "allowed-devices")) {
    cuda.allowed_devices_explicit = true;
    std::optional<std::vector<Field>> items =
        Items(*field, "GPU UUIDs or indices like [\"GPU-6f3c1a2b-...\", \"1\"]",
              "list at least one GPU, or leave allowed-devices out to use every visible GPU");
    for (const Field& item : items.value_or(std::vector<Field>{})) {
      if (const auto* number = item.node->as_integer()) {
        const std::string index = std::to_string(number->get());
        Report(item, "expected a string, found the integer " + index + "; quote GPU indices: \"" + index + "\"");
        continue;
      }
      std::optional<std::string> entry = String(item);
      if (!entry) continue;
      if (!IsGpuIndexOrUuid(*entry)) {
        Report(item, "\"" + *entry +
                         "\" is neither a GPU UUID like \"GPU-6f3c1a2b-...\" nor an index like \"1\"; copy them "
                         "from nvidia-smi -L");
      } else if (std::find(cuda.allowed_devices.begin(), cuda.allowed_devices.end(), *entry) !=
                 cuda.allowed_devices.end()) {
        Report(item, "\"" + *entry + "\" is already listed; list each GPU once");
      } else {
        cuda.allowed_devices.push_back(*entry);
      }
    }
  }

  if (std::optional<Field> field = Find(section, "resource.cuda", "nvml-library")) {
    std::optional<std::string> library = NonEmptyString(*field);
    if (library && library->front() != '/' && library->find('/') != std::string::npos) {
      Report(*field, "\"" + *library +
                         "\" is a relative path; give a library name like \"libnvidia-ml.so.1\" or an absolute path");
    } else if (library) {
      cuda.nvml_library = *library;
    }
  }
  if (std::optional<Field> field = Find(section, "resource.cuda", "attach")) {
    if (std::optional<std::string> attach = OneOf(*field, kAttachModes)) cuda.attach = *attach;
  }
  resource.cuda = std::move(cuda);
}

void Validator::ReadMock(const toml::table& root, ResourceConfig& resource) {
  const toml::table* section = SectionTable(root, "resource.mock");
  if (section == nullptr) return;  // the plugin is off
  MockConfig mock;

  bool ids_known = false;  // every device's id was read, so the allow-list can be checked against them
  if (std::optional<Field> field = Find(section, "resource.mock", "devices")) {
    ids_known = ReadMockDevices(*field, mock);
  } else {
    Report(&section->source(), "resource.mock.devices",
           "missing; declare the mock devices, e.g. devices = [{ id = \"mock0\", memory = \"16g\" }]");
  }
  std::vector<std::string> declared;
  for (const MockDevice& device : mock.devices) declared.push_back(device.id);

  if (std::optional<Field> field = Find(section, "resource.mock", "allowed-devices")) {
    mock.allowed_devices_explicit = true;
    std::optional<std::vector<Field>> items =
        Items(*field, "device ids like [\"mock0\"]",
              "list at least one device, or leave allowed-devices out to use every declared device");
    for (const Field& item : items.value_or(std::vector<Field>{})) {
      std::optional<std::string> id = String(item);
      if (!id) continue;
      if (std::find(mock.allowed_devices.begin(), mock.allowed_devices.end(), *id) != mock.allowed_devices.end()) {
        Report(item, "\"" + *id + "\" is already listed; list each device once");
      } else if (ids_known && std::find(declared.begin(), declared.end(), *id) == declared.end()) {
        Report(item, "\"" + *id + "\" is not a declared device; list ids from resource.mock.devices: " +
                         JoinList(declared));
      } else {
        mock.allowed_devices.push_back(*id);
      }
    }
  } else {
    mock.allowed_devices = declared;
  }
  resource.mock = std::move(mock);
}

bool Validator::ReadMockDevices(const Field& field, MockConfig& mock) {
  std::optional<std::vector<Field>> items =
      Items(field, "device tables like [{ id = \"mock0\", memory = \"16g\" }]",
            "declare at least one device, or remove [resource.mock] to turn the mock plugin off");
  if (!items) return false;
  bool ids_known = true;
  for (const Field& item : *items) {
    MockDevice device;
    ids_known = ReadMockDevice(item, mock, device) && ids_known;
    mock.devices.push_back(std::move(device));
  }
  return ids_known;
}

bool Validator::ReadMockDevice(const Field& field, const MockConfig& mock, MockDevice& device) {
  const toml::table* table = field.node->as_table();
  if (table == nullptr) {
    Report(field, "expected a table like { id = \"mock0\", memory = \"16g\" }, found " + TypeName(*field.node));
    return false;
  }
  for (auto&& [key, node] : *table) {
    if (!Contains(kMockDeviceKeys, key.str())) {
      Report(&key.source(), field.path + "." + KeyPart(key.str()),
             "unknown key; known keys of a mock device: " + JoinList(kMockDeviceKeys));
    }
  }

  bool id_known = false;
  if (std::optional<Field> id_field = Find(table, field.path, "id")) {
    if (std::optional<std::string> id = String(*id_field)) {
      id_known = true;
      device.id = *id;
      auto same_id = std::find_if(mock.devices.begin(), mock.devices.end(),
                                  [&](const MockDevice& other) { return other.id == *id; });
      if (!IsValidMockDeviceId(*id)) {
        Report(*id_field, "\"" + *id +
                              "\" is not a valid device id; use 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' and "
                              "'-', starting with a letter or digit");
      } else if (same_id != mock.devices.end()) {
        Report(*id_field, "\"" + *id + "\" is also the id of resource.mock.devices[" +
                              std::to_string(same_id - mock.devices.begin()) + "]; give each device its own id");
      }
    }
  } else {
    Report(&table->source(), field.path + ".id", "missing; give every device an id, e.g. id = \"mock0\"");
  }

  if (std::optional<Field> memory_field = Find(table, field.path, "memory")) {
    std::optional<uint64_t> memory = Size(*memory_field);
    if (memory && *memory == 0) Report(*memory_field, "must be above 0");
    else if (memory) device.memory_bytes = *memory;
  } else {
    Report(&table->source(), field.path + ".memory",
           "missing; give every device its memory, e.g. memory = \"16g\"");
  }

  device.processing_units = 1;
  if (std::optional<Field> units_field = Find(table, field.path, "processing-units")) {
    std::optional<int64_t> units = IntegerIn(*units_field, 1, std::numeric_limits<int>::max());
    if (units) device.processing_units = static_cast<int>(*units);
  }
  if (std::optional<Field> node_field = Find(table, field.path, "numa-node")) {
    std::optional<int64_t> node = IntegerIn(*node_field, 0, kMaxNumaNodes - 1);
    if (node) device.numa_node = static_cast<int>(*node);
  }
  return id_known;
}

Result<Config> Validator::Run(const toml::table& root) {
  Config config;
  config.path = file_;
  CheckLayout(root, "");
  ReadAgent(root, config.agent);
  ReadApi(root, config.api);
  ReadNode(root, config.node);
  ReadContainer(root, config.container);
  ReadResource(root, config.resource);
  if (problems_.empty()) return config;

  // File order; problems without a line of their own come last.
  std::stable_sort(problems_.begin(), problems_.end(), [](const Problem& a, const Problem& b) {
    const uint32_t a_line = a.line == 0 ? std::numeric_limits<uint32_t>::max() : a.line;
    const uint32_t b_line = b.line == 0 ? std::numeric_limits<uint32_t>::max() : b.line;
    return a_line != b_line ? a_line < b_line : a.column < b.column;
  });
  std::string message;
  for (const Problem& problem : problems_) {
    if (!message.empty()) message += '\n';
    message += file_;
    if (problem.line != 0) message += ":" + std::to_string(problem.line);
    message += ": " + problem.text;
  }
  return Status::InvalidArgument(message);
}

// The whole of `path`, or "cannot read config file <path>: <reason>".
Result<std::string> ReadFile(const std::string& path) {
  auto failure = [&](int err) {
    return Status::InvalidArgument("cannot read config file " + path + ": " + std::generic_category().message(err));
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return failure(errno);
  std::string text;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return failure(err);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

// Maps every core to its NUMA node from `<node_dir>/node<N>/cpulist`. Empty
// when the directory is missing (a kernel without NUMA); a node without
// cores (memory only) adds nothing.
std::map<int, int> ReadCoreNumaNodes(const std::string& node_dir) {
  std::map<int, int> core_numa_node;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(node_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 4 || name.rfind("node", 0) != 0 ||
        !std::all_of(name.begin() + 4, name.end(), [](unsigned char c) { return std::isdigit(c); })) {
      continue;
    }
    const int node = std::atoi(name.c_str() + 4);
    std::ifstream file(entry.path() / "cpulist");
    std::string cpulist;
    if (!std::getline(file, cpulist)) continue;
    Result<std::vector<int>> cores = ParseCoreList(cpulist);
    if (!cores.ok()) continue;
    for (int core : *cores) core_numa_node[core] = node;
  }
  return core_numa_node;
}

}  // namespace

HostFacts HostFacts::Detect() {
  HostFacts facts;

  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) facts.hostname = name;

  cpu_set_t* set = CPU_ALLOC(kMaxCores);
  const size_t set_size = CPU_ALLOC_SIZE(kMaxCores);
  if (set != nullptr && sched_getaffinity(0, set_size, set) == 0) {
    for (int core = 0; core < kMaxCores; ++core) {
      if (CPU_ISSET_S(core, set_size, set)) facts.cpuset.push_back(core);
    }
  }
  if (set != nullptr) CPU_FREE(set);

  facts.core_numa_node = ReadCoreNumaNodes(kNumaNodeDir);

  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kib) == 1) {
      facts.memory_bytes = static_cast<uint64_t>(kib) * 1024;
      break;
    }
  }

  if (const char* docker_host = std::getenv("DOCKER_HOST")) facts.docker_host_env = docker_host;
  return facts;
}

Result<Config> LoadConfig(const std::string& path, const HostFacts& host) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseConfig(*text, path, host);
}

Result<Config> ParseConfig(const std::string& text, const std::string& path, const HostFacts& host) {
  try {
    toml::table root = toml::parse(std::string_view(text), std::string_view(path));
    return Validator(path, host).Run(root);
  } catch (const toml::parse_error& error) {
    const toml::source_position& at = error.source().begin;
    return Status::InvalidArgument(path + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                                   ": invalid TOML: " + std::string(error.description()));
  } catch (const std::exception& error) {
    return Status::Internal("cannot parse config file " + path + ": " + error.what());
  }
}

}  // namespace slotd
