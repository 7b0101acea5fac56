// The key tables of agent.toml's core sections, in the order messages and
// docs/config.md list them (the device plugins' sections follow them). Each key's default is its Config member's
// initializer (config.h, defaults.h) unless the table says DefaultsTo.
#include "config/agent_schema.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <string_view>

#include "common/units.h"
#include "config/pool_schema.h"

namespace slotd {

bool IsValidAgentId(const std::string& id) {
  auto lower_or_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (id.empty() || id.size() > 64 || !lower_or_digit(id[0])) return false;
  return std::all_of(id.begin(), id.end(),
                     [&](char c) { return lower_or_digit(c) || c == '.' || c == '_' || c == '-'; });
}

bool IsKeyNamespace(const std::string& prefix) {
  return prefix.size() > 1 && prefix[0] == '/' && prefix.back() != '/';
}

namespace {

using std::chrono::milliseconds;


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

// The limits Docker lets a container set (HostConfig.Ulimits).
const std::vector<std::string>& UlimitNames() {
  static const std::vector<std::string> names = {"core",   "cpu",   "data",  "fsize",  "locks",
                                                 "memlock", "msgqueue", "nice", "nofile", "nproc",
                                                 "rss",    "rtprio", "rttime", "sigpending", "stack"};
  return names;
}

// container.ulimits: a table of limit name to a whole number or "unlimited".
ValueType<std::map<std::string, int64_t>> UlimitsType() {
  ValueType<std::map<std::string, int64_t>> type;
  type.name = "table";
  type.doc = "Each value is a whole number or `\"unlimited\"`; the names are those of `ulimit` that Docker sets: " +
             JoinList(UlimitNames()) + ".";
  type.text = [](const std::map<std::string, int64_t>& limits) {
    std::string text = "{ ";
    for (const auto& [name, value] : limits)
      text += (text.size() > 2 ? ", " : "") + name + " = " + (value < 0 ? "\"unlimited\"" : std::to_string(value));
    return text + " }";
  };
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::map<std::string, int64_t>> {
    const toml::table* table = field.node->as_table();
    if (table == nullptr) {
      reader.Report(field, "expected a table like { nofile = 1048576, memlock = \"unlimited\" }, found " +
                               TypeName(*field.node));
      return std::nullopt;
    }
    std::map<std::string, int64_t> limits;
    bool ok = true;
    for (auto&& [key, node] : *table) {
      const Field item{&node, field.path + "." + KeyPart(key.str())};
      const std::string name(key.str());
      if (std::find(UlimitNames().begin(), UlimitNames().end(), name) == UlimitNames().end()) {
        reader.Report(item, "unknown limit; known: " + JoinList(UlimitNames()));
        ok = false;
      } else if (const auto* number = node.as_integer(); number != nullptr && number->get() >= 0) {
        limits[name] = number->get();
      } else if (const auto* word = node.as_string(); word != nullptr && word->get() == "unlimited") {
        limits[name] = -1;
      } else {
        reader.Report(item, "expected a whole number or \"unlimited\"");
        ok = false;
      }
    }
    if (!ok) return std::nullopt;
    return limits;
  };
  return type;
}

// --------------------------------------------------------------- checks

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

// Without ulimits: memlock at the agent's own hard limit.
void ResolveDefaultUlimits(ContainerConfig& container, ConfigReader& reader) {
  container.ulimits["memlock"] = reader.host().memlock_limit;
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

// ------------------------------------------------------------- the tables

// Whether `host` (of rpc-listen-addr) names only this machine: "localhost",
// 127.0.0.0/8 or ::1.
bool IsLoopbackHost(std::string_view host) {
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host == "localhost" || host.starts_with("127.") || host == "::1";
}

// The problem of a TCP listener that would send tokens in clear text off
// this machine: rpc-listen-addr not on loopback, and no certificate or
// tls-self-signed. "" when there is none. Asked when tls-self-signed is read
// (present or not), after rpc-listen-addr and tls-cert-file.
std::string PlainListenerProblem(const ConfigReader& reader, bool self_signed) {
  if (self_signed || reader.OutcomeOf("agent.tls-cert-file").node != nullptr) return "";
  const KeyOutcome listen = reader.OutcomeOf("agent.rpc-listen-addr");
  if (listen.node != nullptr && !listen.ok) return "";  // its own problem is reported
  const toml::node* address = listen.node;
  const std::string text = address != nullptr && address->is_string() ? address->as_string()->get() : "";
  const size_t colon = text.rfind(':');
  if (text.empty() || colon == std::string::npos || IsLoopbackHost(std::string_view(text).substr(0, colon))) return "";
  return "rpc-listen-addr \"" + text + "\" is reachable from other hosts, and the API would send its tokens there "
         "in clear text; give the agent a certificate (tls-cert-file and tls-key-file; `slotctl tls cert --agent "
         "<id>` makes one from a CA of yours), or set tls-self-signed = true for one the agent makes and clients "
         "pin by its fingerprint, or listen on 127.0.0.1";
}

// An inline table of client certificate names and their roles:
// { "mgr-1" = "operator", "prometheus" = "viewer" }.
ValueType<std::map<std::string, Role>> ClientRolesType() {
  ValueType<std::map<std::string, Role>> type;
  type.name = "table of roles";
  type.doc = "Each role one of `viewer`, `operator`, `admin`.";
  type.text = [](const std::map<std::string, Role>& roles) {
    std::string out;
    for (const auto& [name, role] : roles) out += (out.empty() ? "" : ", ") + ("\"" + name + "\" = \"" + WordOf(RoleWords(), role) + "\"");
    return "{ " + out + " }";
  };
  type.read = [](const Field& field, ConfigReader& reader) -> std::optional<std::map<std::string, Role>> {
    const toml::table* table = field.node->as_table();
    if (table == nullptr) {
      reader.Report(field, "expected a table like { \"mgr-1\" = \"operator\" }, found " + TypeName(*field.node));
      return std::nullopt;
    }
    std::map<std::string, Role> roles;
    bool ok = true;
    for (auto&& [name, value] : *table) {
      const Field entry{&value, field.path + ".\"" + std::string(name.str()) + "\""};
      const std::optional<Role> role =
          value.is_string() ? ChoiceOf(RoleWords(), value.as_string()->get()) : std::nullopt;
      if (!role) {
        reader.Report(entry, "expected a role, \"viewer\", \"operator\" or \"admin\"");
        ok = false;
        continue;
      }
      roles[std::string(name.str())] = *role;
    }
    if (!ok) return std::nullopt;
    return roles;
  };
  return type;
}

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
              "File holding an API token: every TCP request except `GET /health` needs "
              "`Authorization: Bearer <token>`. When absent, the agent makes a token of its own at first start, "
              "`<var-base-path>/api.token` (mode 0600), and requires that one: the TCP API never goes without a "
              "token. `slotctl --config` reads either.")
        .DefaultDoc("`<var-base-path>/api.token`, made by the agent"),
    MemberKey("tokens-file", &AgentConfig::tokens_file, PathType(),
              "File of named API tokens, one `<name> <role> <token>` a line (`#` starts a comment): a request "
              "with one of them acts as `<name>` with `<role>` (`viewer`, `operator` or `admin`, see "
              "docs/security.md). Read at start and again on SIGHUP; like `token-file` it must not be readable "
              "by other users. `token-file`'s token, beside it, stays one admin token.")
        .DefaultDoc("none"),
    MemberKey("scaling-group", &AgentConfig::scaling_group, StringType(),
              "The scaling group the agent belongs to.", {NotEmpty()}),
    MemberKey("tls-cert-file", &AgentConfig::tls_cert_file, PathType(),
              "The TCP listener's certificate (PEM, the chain after it): the API is then served over TLS "
              "(the unix socket stays plain). Needs `tls-key-file`. Read again on SIGHUP and when the file "
              "changes; a new pair that does not load is refused (logged) and the old one kept.")
        .DefaultDoc("none: plain HTTP, allowed only on a loopback rpc-listen-addr"),
    StoredKey<AgentConfig, std::string>(
        "tls-key-file", PathType(), "The private key (PEM) of `tls-cert-file`; mode 0600.", {},
        [](AgentConfig& agent, std::string&& path) { agent.tls_key_file = std::move(path); },
        [](const AgentConfig&) { return std::string("none"); })
        .DefaultsTo("none", [](AgentConfig& agent, ConfigReader& reader) {
          if (agent.tls_cert_file)
            reader.Report(nullptr, "agent.tls-key-file", "missing; tls-cert-file needs its private key in tls-key-file");
        }),
    MemberKey("tls-self-signed", &AgentConfig::tls_self_signed, BoolType(),
              "With no `tls-cert-file`: serve TLS with a key and a self-signed certificate the agent makes at "
              "first start, `<var-base-path>/tls/agent.crt` and `agent.key` (0600), and keeps across restarts. "
              "Its SHA-256 fingerprint is logged and shown in `GET /v1/agent`; clients pin it (`slotctl "
              "--fingerprint`).",
              {Rule<bool>("", [](const bool& self_signed, const Field&, const ConfigReader& reader) -> std::string {
                 if (self_signed && reader.OutcomeOf("agent.tls-cert-file").node != nullptr)
                   return "true beside tls-cert-file; choose one: the given certificate, or one the agent makes";
                 return PlainListenerProblem(reader, self_signed);
               })})
        .DefaultsTo("`false`",
                    [](AgentConfig&, ConfigReader& reader) {
                      if (std::string problem = PlainListenerProblem(reader, false); !problem.empty())
                        reader.Report(nullptr, "agent.rpc-listen-addr", problem);
                    }),
    MemberKey("tls-min-version", &AgentConfig::tls_min_version, ChoiceType(TlsVersionWords()),
              "The oldest TLS version the listener accepts. TLS 1.0, 1.1 and SSL are never accepted; "
              "renegotiation is refused; the ciphers are OpenSSL's forward-secret AEAD ones."),
    MemberKey("tls-client-ca-file", &AgentConfig::tls_client_ca_file, PathType(),
              "Mutual TLS: the CA certificates (PEM) that sign clients' certificates. A client without a "
              "certificate from one of them is refused in the handshake; a client's certificate names it by its "
              "subject CN, which `client-roles` maps to a role. Needs TLS (`tls-cert-file` or "
              "`tls-self-signed`). Read again with the certificate.",
              {Rule<std::string>("", [](const std::string&, const Field&, const ConfigReader& reader) -> std::string {
                 const toml::node* self_signed = reader.OutcomeOf("agent.tls-self-signed").node;
                 const bool tls = reader.OutcomeOf("agent.tls-cert-file").node != nullptr ||
                                  (self_signed != nullptr && self_signed->value_or(false));
                 return tls ? "" : "client certificates need TLS; set tls-cert-file and tls-key-file, or "
                                   "tls-self-signed = true";
               })})
        .DefaultDoc("none: no client certificate is asked for"),
    MemberKey("client-roles", &AgentConfig::client_roles, ClientRolesType(),
              "The role of each client certificate, by its subject CN: `{ \"mgr-1\" = \"operator\", "
              "\"prometheus\" = \"viewer\" }`. A certificate whose name is not here is refused (`403`). Needs "
              "`tls-client-ca-file`.",
              {Rule<std::map<std::string, Role>>(
                  "", [](const std::map<std::string, Role>&, const Field&, const ConfigReader& reader) -> std::string {
                    return reader.OutcomeOf("agent.tls-client-ca-file").node != nullptr
                               ? ""
                               : "names clients by certificate, and no certificate is asked for; set "
                                 "tls-client-ca-file to the CA that signs them";
                  })})
        .DefaultDoc("none"),
    MemberKey("audit-log-max-size", &AgentConfig::audit_log_max_size, SizeType(),
              "The size at which `<var-base-path>/audit.log` (a JSON line for each request that changes "
              "something or is refused) is rotated: it becomes `audit.log.1`, and the three newest old files are "
              "kept.",
              {Rule<uint64_t>("64k or more.", [](const uint64_t& size, const Field&, const ConfigReader&) {
                 return size < (64u << 10) ? std::string("is under 64k; an audit file must hold a few hundred lines")
                                           : std::string();
               })}),
  }};
}

KeyTable<ApiConfig> ApiKeys() {
  return {"api", "[api]", {
    MemberKey("max-connections", &ApiConfig::max_connections, IntegerType(),
              "Open connections each listener serves at once. One more closes the connection that has waited "
              "longest for a request's headers, or, when every connection is busy, is answered `503` and closed. "
              "One TCP client address may hold a quarter of it in connections waiting for headers. TCP and the "
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
    MemberKey("max-exec-sessions", &ApiConfig::max_exec_sessions, IntegerType(),
              "Interactive execs (`POST /v1/kernels/{id}/exec` with `Upgrade: tcp`) open at once, both listeners "
              "together; one more is answered `503` before any command starts. Each holds a thread of the agent "
              "for as long as it lasts, so keep it well under the agent's tasks limit (systemd `TasksMax`).",
              {IntegerRange(1, 4096)}),
    MemberKey("max-oneshot-execs", &ApiConfig::max_oneshot_execs, IntegerType(),
              "One-shot execs (`POST /v1/kernels/{id}/exec` without `Upgrade`) running at once, both listeners "
              "together; one more is answered `503` before any command starts. Each holds a thread of the agent "
              "and a few descriptors until its command ends, its `timeout_s` passes or its client goes away, so "
              "keep it, with `max-exec-sessions`, well under the agent's tasks limit.",
              {IntegerRange(1, 4096)}),
  }};
}

KeyTable<NodeConfig> NodeKeys() {
  return {"node", "[node]", {
    MemberKey("claims-dir", &NodeConfig::claims_dir, PathType(),
              "Directory shared by all agents of this node, where each agent claims its id, ports, paths, cores, "
              "devices and memory share. All agents of a node must use the same directory."),
  }};
}

// container.image-gc-low: below image-gc-high (read first) when that is set.
Check<int64_t> LowBelowHigh() {
  return Rule<int64_t>("", [](const int64_t& low, const Field&, const ConfigReader& reader) -> std::string {
    const toml::node* high = reader.OutcomeOf("container.image-gc-high").node;
    const auto* value = high == nullptr ? nullptr : high->as_integer();
    if (value == nullptr || value->get() == 0 || low < value->get()) return "";
    return "must be below image-gc-high (" + std::to_string(value->get()) + ")";
  });
}

// container.kernel-gid: only with kernel-uid, which is read first.
Check<int64_t> GidNeedsUid() {
  return Rule<int64_t>("", [](const int64_t&, const Field&, const ConfigReader& reader) -> std::string {
    if (reader.OutcomeOf("container.kernel-uid").node != nullptr) return "";
    return "a group without a user; set kernel-uid too (the image's user keeps its own group)";
  });
}

KeyTable<MountAllow> MountAllowKeys() {
  return {"container.mount-allow", "a mount-allow entry", {
    MemberKey("path", &MountAllow::path, PathType(),
              "A host directory; a kernel may mount it or anything under it that is a directory or a regular "
              "file. Beneath it, a source is opened one name at a time and a symbolic link is refused, never "
              "followed; what the kernel gets is what was opened, bound (nosuid, nodev) onto a path of the "
              "agent's own, so a name swapped afterwards changes nothing. A source that is or holds a socket, "
              "FIFO or device node, or is, holds or lies in one of the agent's own paths (ipc, var, scratch, "
              "claims, token, registry-auth, its config) or the engine's socket, is refused. `slotd check` "
              "refuses an entry of `/`, `/proc`, `/sys` or `/dev`, an `rw` entry over a system directory "
              "(`/etc`, `/usr`, `/var/lib`, ...), and an entry that holds one of those paths.")
        .Required("give every entry its directory, e.g. path = \"/srv/datasets\""),
    MemberKey("mode", &MountAllow::mode, EnumType({"ro", "rw"}),
              "`ro`: kernels may mount it read-only only; `rw`: also read-write."),
  }};
}

KeyTable<ContainerConfig> ContainerKeys() {
  return {"container", "[container]", {
    MemberKey("docker-host", &ContainerConfig::docker_host, StringType(), "The engine to use: Docker, or Podman's Docker-compatible service (see [engines.md](engines.md)).",
              {DockerHostScheme()})
        .DefaultsTo("`$DOCKER_HOST` if set, else " + StringType().Show(ContainerConfig{}.docker_host),
                    ResolveDefaultDockerHost),
    // Longer than an hour, a start that cannot find its engine should say so.
    MemberKey("engine-wait", &ContainerConfig::engine_wait, DurationType(),
              "How long the agent's start waits for an engine that does not answer yet (a boot where the engine "
              "starts after the agent), asking every 2 s and logging why every 10 s; past it the start fails. "
              "`0s`: fail at once.",
              {DurationRange(milliseconds(0), milliseconds(3'600'000))}),
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
    MemberKey("stats-type", &ContainerConfig::stats_type, ChoiceType(StatsTypeWords()),
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
              "How long a kernel gets to exit after its stop signal (and to run its `pre_stop` command before "
              "it) before it is killed: the default of a request's `stop_timeout` and its cap.",
              {DurationRange(milliseconds(0), milliseconds(3'600'000))}),
    MemberKey("init", &ContainerConfig::init, BoolType(),
              "Whether each kernel's PID 1 is the engine's init (Docker's `docker-init`), which reaps the "
              "zombies a kernel leaves and passes signals on to its command."),
    // More restarts than this of one crash-looping kernel tell nothing new.
    MemberKey("restart-max", &ContainerConfig::restart_max, IntegerType(),
              "The most times a restart policy restarts one kernel: the default of a request's `restart.max` and "
              "its cap; past it the kernel is `TERMINATED` with reason `restart limit reached`. 0: no limit.",
              {IntegerRange(0, 1'000'000)}),
    MemberKey("restart-backoff-initial", &ContainerConfig::restart_backoff_initial, DurationType(),
              "How long a restart policy waits before a kernel's first restart, unless the request says "
              "(`restart.backoff.initial`); each later wait doubles, up to `restart-backoff-max`.",
              {DurationRange(milliseconds(0), milliseconds(3'600'000))}),
    MemberKey("restart-backoff-max", &ContainerConfig::restart_backoff_max, DurationType(),
              "The longest a restart policy waits between two restarts of a kernel, unless the request says "
              "(`restart.backoff.max`).",
              {DurationRange(milliseconds(0), milliseconds(24 * 3'600'000))}),
    MemberKey("idle-for", &ContainerConfig::idle_for, DurationType(),
              "How long a kernel may stay idle (below `idle-cpu-below` of its cores and `idle-gpu-below` of its "
              "measured devices, with no exec) before the agent stops it (`TERMINATED`, reason `idle`): the "
              "default of a request's `idle.for` and its cap. 0: kernels that do not ask are never reclaimed.",
              {DurationRange(milliseconds(0), milliseconds(366ll * 24 * 3'600'000))}),
    MemberKey("idle-cpu-below", &ContainerConfig::idle_cpu_below_percent, IntegerType(),
              "The CPU use, in percent of the cores a kernel holds, below which it counts as idle, unless the "
              "request says (`idle.cpu_below`, a fraction).",
              {IntegerRange(0, 100)}),
    MemberKey("idle-gpu-below", &ContainerConfig::idle_gpu_below_percent, IntegerType(),
              "The utilization, in percent, below which each device a kernel holds counts as idle, where a meter "
              "measures it, unless the request says (`idle.gpu_below`, a fraction).",
              {IntegerRange(0, 100)}),
    MemberKey("health-interval", &ContainerConfig::health_interval, DurationType(),
              "How often the agent probes a kernel's health check (`health` in its request) unless the request "
              "says.",
              {DurationRange(milliseconds(100), milliseconds(24 * 3'600'000))}),
    // Each probe costs the agent (and, for exec checks, the engine) a round trip.
    MemberKey("health-min-interval", &ContainerConfig::health_min_interval, DurationType(),
              "The shortest interval between two probes of one kernel: a request asking for less gets this.",
              {DurationRange(milliseconds(100), milliseconds(3'600'000))}),
    MemberKey("health-timeout", &ContainerConfig::health_timeout, DurationType(),
              "How long one probe may take before it counts as a failure, unless the request says (never more "
              "than its interval).",
              {DurationRange(milliseconds(100), milliseconds(3'600'000))}),
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
    // A year and a day is more than any job; a longer value is a typo.
    MemberKey("max-lifetime", &ContainerConfig::max_lifetime, DurationType(),
              "The longest a kernel may run from its creation: a kernel without `max_lifetime` gets this one, "
              "and a request may ask for less but not more. When it runs out the agent stops the kernel "
              "(`TERMINATED`, reason `lifetime exceeded`); its deadline is in its labels, so it holds across "
              "agent restarts.",
              {DurationRange(milliseconds(0), milliseconds(366ll * 24 * 3'600'000)),
               ZeroOrAtLeast<milliseconds>(DurationType(), milliseconds(1'000), "no limit", "is too short")}),
    MemberKey("scratch-root", &ContainerConfig::scratch_root, PathType(),
              "Where each kernel's scratch directory (`<scratch-root>/<kernel-id>`, mounted at `/home/work`) is "
              "kept when `scratch-type` is `hostdir`. It belongs to this agent alone: the agent removes the "
              "directories it made there (each has a marker in `<scratch-root>/.slotd-made/`) once their kernel is "
              "gone, and keeps everything else. It may not be, contain or lie inside another agent's scratch-root, "
              "ipc-base-path or var-base-path on the node, and may not be or contain this agent's own paths "
              "(ipc-base-path, var-base-path, claims-dir, token-file, registry-auth-file, the config file, the "
              "engine's socket) or lie "
              "inside its ipc-base-path or claims-dir.")
        .DefaultDoc("`<var-base-path>/scratch`"),
    MemberKey("scratch-type", &ContainerConfig::scratch_type, ChoiceType(ScratchTypeWords()),
              "`hostdir`: a directory of the host, kept across kernel and agent restarts and removed with the "
              "kernel, limited to its size by a project quota (the scratch root's filesystem must enforce project "
              "quotas for a size to be given); `hostfile`: the same directory with an ext4 image of the kernel's "
              "scratch size loop-mounted on it (`<scratch-root>/.slotd-images/<kernel-id>.ext4`, sparse; needs "
              "root, loop devices and mkfs.ext4); `tmpfs`: memory, counted within the kernel's memory and emptied "
              "when its container restarts. `slotd check` says which of them this node can limit."),
    MemberKey("scratch-size", &ContainerConfig::scratch_size, SizeType(),
              "The size of a kernel's scratch when its request gives no `resources.scratch`. `0`: no limit for "
              "`hostdir`, the kernel's memory for `tmpfs`; `hostfile` needs a size. A kernel that fills its "
              "scratch gets `No space left on device` (or `Disk quota exceeded`); other kernels' scratch is not "
              "touched."),
    MemberKey("scratch-min-free", &ContainerConfig::scratch_min_free, SizeType(),
              "A create is refused (422, `insufficient scratch space`) while the filesystem of the scratch root "
              "has less than this free, so that a full disk stops new kernels instead of breaking their scratch. "
              "Not used by `tmpfs`; `0`: no floor."),
    MemberKey("ulimits", &ContainerConfig::ulimits, UlimitsType(),
              "The resource limits of every kernel's processes, soft and hard alike, as "
              "`ulimits = { nofile = 1048576, memlock = \"unlimited\" }`. Given, the table replaces the default "
              "(write `memlock` again to keep it): GPU and RDMA libraries need an unlimited `memlock`, and a "
              "runtime cannot set a limit above its own, so the default is the agent's own (the packaged "
              "systemd unit runs it with `LimitMEMLOCK=infinity`, as dockerd's does). `{}` leaves every limit to "
              "the engine. On Podman, `nofile` and `nproc`, unless named here, are sent at the engine's own limits "
              "(Podman would set 1048576, which a runtime without `CAP_SYS_RESOURCE` cannot; see "
              "[engines.md](engines.md)). The number of processes is `pids-limit`'s.")
        .DefaultsTo("`memlock` at the agent's own hard limit", ResolveDefaultUlimits),
    MemberKey("mount-allow", &ContainerConfig::mount_allow,
              TableListType(MountAllowKeys(), "entry tables like [{ path = \"/srv/datasets\", mode = \"ro\" }]",
                            "list at least one directory, or leave mount-allow out to allow no mounts",
                            "{ path = \"/srv/datasets\", mode = \"ro\" }"),
              "The host directories kernels may mount (a request's `mounts`), as "
              "`mount-allow = [{ path = \"/srv/datasets\", mode = \"ro\" }, { path = \"/srv/shared\", mode = "
              "\"rw\" }]`. Without it, a request with `mounts` is refused (`403`).")
        .DefaultDoc("none: kernels may mount nothing of the host"),
    MemberKey("kernel-uid", &ContainerConfig::kernel_uid, IntegerType(),
              "The user id kernels' processes run as; their scratch directory belongs to it (mode 0700).",
              {IntegerRange(0, 2'147'483'647)})
        .DefaultDoc("the image's user (its scratch directory then belongs to that user, mode 0700)"),
    MemberKey("kernel-gid", &ContainerConfig::kernel_gid, IntegerType(),
              "The group id kernels' processes run as; their scratch directory belongs to it. Needs `kernel-uid`.",
              {IntegerRange(0, 2'147'483'647), GidNeedsUid()})
        .DefaultDoc("`kernel-uid`'s number"),
    MemberKey("allow-root", &ContainerConfig::allow_root, BoolType(),
              "Whether a kernel may run as root: `false` refuses (`403`) a kernel whose user would be uid 0 "
              "or whose group would be gid 0: `kernel-uid = 0` or `kernel-gid = 0`, or an image whose user is "
              "so the way the runtime reads it (unset, `0`, `00`, `+0`, `0000:0`, `1000:0`, or a name that the "
              "image's own `/etc/passwd` gives uid or gid 0). The user is decided once, at create, and the "
              "engine is given its numbers, never a name, so a kernel that rewrites its own `/etc/passwd` "
              "stays who it was. After every start and restart, the uids and gids of the kernel's first "
              "process are checked too, and a kernel found running otherwise is killed and ended. With "
              "`false`, kernels also run with `no-new-privileges`: no set-uid file of the image makes them "
              "root."),
    MemberKey("auto-pull", &ContainerConfig::auto_pull, ChoiceType(PullPolicyWords()),
              "When the agent pulls a kernel's image: `tag` when the node does not have it; `digest` also when "
              "the registry says its tag now names another digest (a registry round trip at every create); "
              "`none` never (the image must be on the node). A request may ask for a stricter policy "
              "(`\"pull\": \"digest\"`), never a looser one."),
    MemberKey("registry-auth-file", &ContainerConfig::registry_auth_file, PathType(),
              "Registry credentials, in the format `docker login` writes (`{\"auths\": {\"host:port\": {\"auth\": "
              "\"base64 of user:password\"}}}`); the agent sends a registry's entry with each pull from it. Read "
              "at start and again on SIGHUP.")
        .DefaultDoc("none: pulls carry no credentials"),
    // Below a second a pull cannot even ask the registry; above a day it is a typo.
    MemberKey("pull-timeout", &ContainerConfig::pull_timeout, DurationType(),
              "The longest one pull may take; then it is abandoned and the creates waiting for it fail "
              "(`504`).",
              {DurationRange(milliseconds(1'000), milliseconds(24 * 3'600'000))}),
    MemberKey("pull-stall-timeout", &ContainerConfig::pull_stall_timeout, DurationType(),
              "The longest a pull may go without progress (no byte, layer or message from the engine) before it "
              "is abandoned (`504`), as a stalled registry would leave it forever.",
              {DurationRange(milliseconds(1'000), milliseconds(3'600'000))}),
    MemberKey("image-gc-high", &ContainerConfig::image_gc_high, IntegerType(),
              "When the filesystem of the engine's data root is fuller than this (percent), the agent removes the "
              "least recently used images that no container of any owner uses, until it is below `image-gc-low`. "
              "The agents of a node share the engine: one collects at a time (a lock in the claims directory), "
              "and `slotd check` warns when their marks differ. `0`: never.",
              {IntegerRange(0, 100)}),
    MemberKey("image-gc-low", &ContainerConfig::image_gc_low, IntegerType(),
              "The percent image collection goes down to; below `image-gc-high`.",
              {IntegerRange(0, 100), LowBelowHigh()}),
  }};
}

KeyTable<ResourceConfig> ResourceKeys() {
  return {"resource", "[resource]", {
    MemberKey("reserved-cpu", &ResourceConfig::reserved_cpu, IntegerType(),
              "Cores kept for the operating system when `[resource.cpu] allowed-cores` is not given: the agent "
              "uses its cpuset minus its last `reserved-cpu` cores. It must leave at least one core. Ignored when "
              "`allowed-cores` is given.",
              {IntegerRange(0, kCoreLimit)}),
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
    MemberKey("shared-overcommit", &ResourceConfig::shared_overcommit, IntegerType(),
              "How many times its cores' worth of CPU quota the shared pool (the allowed cores no kernel holds "
              "exclusively) gives to shared kernels (`resources.cpu` of `0.25`, `\"250m\"`, or `cpu_policy = "
              "\"shared\"`). `1`: no overcommit, a shared kernel always gets its quota; `2`: quotas may add up to "
              "twice the pool's cores, and busy shared kernels then get less than their quota.",
              {IntegerRange(1, 64)}),
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

// An etcd endpoint: an http:// or https:// URL.
Check<std::string> EtcdUrl() {
  return Rule<std::string>("Each an `http://` or `https://` URL.",
                           [](const std::string& url, const Field&, const ConfigReader&) {
                             const bool scheme = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
                             const size_t host = url.find("://") + 3;
                             return scheme && url.size() > host ? std::string()
                                                                : "\"" + url + "\" is not an etcd URL; write it as "
                                                                  "\"http://127.0.0.1:2379\"";
                           });
}

// A key prefix: "/" and at least one more character, not ending in "/".
Check<std::string> KeyNamespace() {
  return Rule<std::string>("Starts with `/`, does not end with `/`.",
                           [](const std::string& prefix, const Field&, const ConfigReader&) {
                             return IsKeyNamespace(prefix)
                                        ? std::string()
                                        : "\"" + prefix + "\" is not a key prefix; write it as \"/slotd\"";
                           });
}

KeyTable<EtcdConfig> EtcdKeys() {
  return {"etcd", "[etcd]", {
    MemberKey("endpoints", &EtcdConfig::endpoints,
              ListType(StringType(), {EtcdUrl()}, "etcd URLs like [\"http://127.0.0.1:2379\"]",
                       "list at least one etcd URL, or leave out [etcd] to run standalone",
                       "list each endpoint once"),
              "etcd's client URLs. The agent registers under `<namespace>/agents/<agent-id>` with a lease it keeps "
              "alive; a call that cannot reach one endpoint goes to the next. While etcd cannot be reached the "
              "agent runs on and keeps trying.")
        .Required("[etcd] needs the etcd URLs, e.g. endpoints = [\"http://127.0.0.1:2379\"]"),
    MemberKey("namespace", &EtcdConfig::key_namespace, StringType(),
              "The prefix of every key the agent writes; agents that list each other share it.", {KeyNamespace()}),
    MemberKey("lease-ttl", &EtcdConfig::lease_ttl, DurationType(),
              "How long the agent's key outlives the agent when it dies without removing it (a clean stop removes "
              "it at once). The lease is renewed every third of this.",
              {DurationRange(std::chrono::seconds(2), std::chrono::minutes(10))}),
    MemberKey("user", &EtcdConfig::user, StringType(),
              "The etcd user to authenticate as. Needs `password` or `password-file`.")
        .DefaultDoc("none: etcd without authentication"),
    MemberKey("password", &EtcdConfig::password, StringType(), "The etcd user's password.").DefaultDoc("none"),
    MemberKey("password-file", &EtcdConfig::password_file, PathType(),
              "A file holding the etcd user's password (its first line), instead of `password`.")
        .DefaultDoc("none"),
    MemberKey("ca-file", &EtcdConfig::ca_file, PathType(),
              "For `https://` endpoints: the CA certificates (PEM) that sign etcd's own certificate (its "
              "`--cert-file`), which must name each endpoint's host.")
        .DefaultDoc("the system's trusted CAs"),
    MemberKey("cert-file", &EtcdConfig::cert_file, PathType(),
              "For an etcd that checks its clients' certificates (`--client-cert-auth`): the agent's client "
              "certificate (PEM), signed by a CA in etcd's `--trusted-ca-file`. Needs `key-file`.")
        .DefaultDoc("none"),
    MemberKey("key-file", &EtcdConfig::key_file, PathType(),
              "The private key (PEM) of `cert-file`; readable by the agent only.")
        .DefaultDoc("none"),
  }};
}

// A section that is always read, into `part` of Config.
template <typename T>
std::function<T*(Config&, bool)> Always(T* (*part)(Config&)) {
  return [part](Config& config, bool) { return part(config); };
}

}  // namespace

void AddCoreSections(Schema& schema) {
  schema.Add(Section(AgentKeys(), Always<AgentConfig>([](Config& c) { return &c.agent; })));
  schema.Add(Section(ApiKeys(), Always<ApiConfig>([](Config& c) { return &c.api; })));
  schema.Add(Section(NodeKeys(), Always<NodeConfig>([](Config& c) { return &c.node; })));
  schema.Add(Section(ContainerKeys(), Always<ContainerConfig>([](Config& c) { return &c.container; })));
  schema.Add(Section(ResourceKeys(), Always<ResourceConfig>([](Config& c) { return &c.resource; })));
  schema.Add(Section(CpuKeys(), Always<ResourceConfig>([](Config& c) { return &c.resource; })));
  schema.Add(Section(MemoryKeys(), Always<ResourceConfig>([](Config& c) { return &c.resource; })));
  schema.Add(Section(EtcdKeys(), std::function<EtcdConfig*(Config&, bool)>([](Config& c, bool present) -> EtcdConfig* {
                       if (!present) return nullptr;
                       return &c.etcd.emplace();
                     })));
  schema.Add(Section::TableList(PoolKeys(), std::function<std::vector<PoolConfig>*(Config&)>(
                                                [](Config& c) { return &c.pools; }),
                                "{ name = \"small\", image = \"slotd-test/busybox:latest\", cpu = \"250m\" }"));
}

}  // namespace slotd
