// `slotctl cluster` and `slotctl run --place`: the agents of every node,
// as they registered themselves in etcd (fleet/registrar.h).
#include <cmath>
#include <ctime>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "cli/pull_progress.h"
#include "cli/slotctl_commands.h"
#include "cli/table.h"
#include "common/atomic_file.h"
#include "common/units.h"
#include "fleet/agent_document.h"
#include "fleet/etcd_client.h"
#include "fleet/placement.h"
#include "fleet/prometheus_sd.h"
#include "resources/agent_config.h"

namespace slotctl {

using nlohmann::json;
using slotd::AgentDocument;

namespace {

// How many times `run --place` reads the fleet again after every agent it
// tried was full (each agent rewrites its document within 250 ms of a change).
constexpr int kPlacementRounds = 5;
constexpr std::chrono::milliseconds kPlacementPause{300};

// Where the agents are registered.
struct Fleet {
  std::unique_ptr<slotd::EtcdClient> etcd;
  std::string prefix;  // <namespace>/agents/
};

// The fleet of `args`, completed from [etcd] of --config.
Outcome<Fleet> OpenFleet(const FleetArgs& args, const Options& options) {
  slotd::EtcdConfig config;
  if (!options.target.config_path.empty()) {
    auto loaded = slotd::LoadConfig(options.target.config_path);
    if (!loaded.ok()) return FailureOf(loaded.status(), Exit::kFailure);
    if (loaded->etcd) config = *loaded->etcd;
  }
  if (!args.etcd.empty()) config.endpoints = args.etcd;
  if (!args.key_namespace.empty()) config.key_namespace = args.key_namespace;
  if (!args.etcd_user.empty()) {
    config.user = args.etcd_user;
    config.password.clear();
    config.password_file = args.etcd_password_file;
  }
  slotd::TlsClientOptions flags;
  flags.ca_file = args.etcd_cacert;
  flags.cert_file = args.etcd_cert;
  flags.key_file = args.etcd_key;
  if (auto bad = CheckTlsFlags(flags, {"--etcd-cacert", "--etcd-cert", "--etcd-key", nullptr})) return *bad;
  if (!args.etcd_cacert.empty()) config.ca_file = args.etcd_cacert;
  if (!args.etcd_cert.empty()) {
    config.cert_file = args.etcd_cert;
    config.key_file = args.etcd_key.empty() ? args.etcd_cert : args.etcd_key;
  }
  if (config.endpoints.empty())
    return Failure{Exit::kUsage, "which etcd? give --etcd URL (repeatable), or --config with an agent.toml that has [etcd]"};
  for (const std::string& url : config.endpoints)
    if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0)
      return Failure{Exit::kUsage, "--etcd " + url + ": expected a URL like http://127.0.0.1:2379"};
  if (!slotd::IsKeyNamespace(config.key_namespace))
    return Failure{Exit::kUsage, "--namespace " + config.key_namespace + ": expected a key prefix like /slotd"};
  auto etcd_options = slotd::EtcdOptionsFor(config);
  if (!etcd_options.ok()) return FailureOf(etcd_options.status(), Exit::kUsage);
  etcd_options->tls.ca_setting = "--etcd-cacert (or [etcd] ca-file of --config)";
  etcd_options->tls.cert_setting = "--etcd-cert and --etcd-key (or [etcd] cert-file and key-file of --config)";
  return Fleet{std::make_unique<slotd::EtcdClient>(*etcd_options), slotd::AgentsPrefix(config.key_namespace)};
}

// The registered agents, by key, and the store's revision they are from.
struct Registered {
  std::map<std::string, AgentDocument> by_key;
  int64_t revision = 0;

  std::vector<AgentDocument> Agents() const {
    std::vector<AgentDocument> agents;
    for (const auto& [key, doc] : by_key) agents.push_back(doc);
    return agents;
  }
};

// The exit status for an etcd call's error: unreachable, refused (credentials), or another failure.
Exit ExitFor(const slotd::Status& status) {
  switch (status.code()) {
    case slotd::Status::Code::kUnavailable:
    case slotd::Status::Code::kDeadlineExceeded: return Exit::kUnreachable;
    case slotd::Status::Code::kFailedPrecondition: return Exit::kRefused;
    default: return Exit::kFailure;
  }
}

// A document read from `kv`; a bad one is skipped with a warning naming its key.
std::optional<AgentDocument> DocumentOf(const slotd::EtcdKeyValue& kv) {
  auto doc = AgentDocument::FromJson(kv.value);
  if (doc.ok()) return *doc;
  std::cerr << "slotctl: skipping " << kv.key << ": not an agent document (" << doc.status().message() << ")\n";
  return std::nullopt;
}

Outcome<Registered> ReadFleet(const Fleet& fleet) {
  auto listing = fleet.etcd->GetPrefix(fleet.prefix);
  if (!listing.ok()) return FailureOf(listing.status(), ExitFor(listing.status()));
  Registered registered;
  registered.revision = listing->revision;
  for (const slotd::EtcdKeyValue& kv : listing->kvs)
    if (auto doc = DocumentOf(kv)) registered.by_key[kv.key] = std::move(*doc);
  return registered;
}

// "3/4": free of all, for the table; "-" when the agent has no such slot.
std::string FreeOfAll(const AgentDocument& agent, const std::string& slot) {
  auto it = agent.slots.find(slot);
  if (it == agent.slots.end()) return "-";
  if (slot == "mem")
    return slotd::FormatSize(static_cast<uint64_t>(std::max<int64_t>(it->second.free, 0))) + "/" +
           slotd::FormatSize(static_cast<uint64_t>(std::max<int64_t>(it->second.capacity, 0)));
  return std::to_string(it->second.free) + "/" + std::to_string(it->second.capacity);
}

// The device slots as "cuda.device 1/4, mock.device 2/2"; "-" for none.
std::string DeviceSlots(const AgentDocument& agent) {
  std::string text;
  for (const auto& [slot, use] : agent.slots)
    if (slot != "cpu" && slot != "mem" && slot != "ports")
      text += (text.empty() ? "" : ", ") + slot + " " + FreeOfAll(agent, slot);
  return text.empty() ? "-" : text;
}

// The agent's API address as the table shows it: "host:port", or its URL
// "https://host:port" when it speaks TLS.
std::string Shown(const AgentDocument& agent) { return agent.scheme == "https" ? agent.Url() : agent.address; }

// "ready", "draining", with " (2 unhealthy)" when devices are not healthy.
std::string StateOf(const AgentDocument& agent) {
  int unhealthy = 0;
  for (const slotd::RegisteredDevice& device : agent.devices) unhealthy += device.health != "healthy";
  return std::string(agent.draining ? "draining" : "ready") +
         (unhealthy > 0 ? " (" + std::to_string(unhealthy) + " unhealthy)" : "");
}

void PrintFleet(const Registered& registered, const Options& options) {
  const std::vector<AgentDocument> agents = registered.Agents();
  if (options.json_output) {
    json list = json::array();
    for (const AgentDocument& agent : agents) list.push_back(agent.ToJson());
    return PrintJson(list, 2);
  }
  std::vector<std::vector<std::string>> rows;
  for (const AgentDocument& a : agents)
    rows.push_back({a.node, a.id, Shown(a), a.scaling_group, StateOf(a), std::to_string(a.kernels),
                    FreeOfAll(a, "cpu"), FreeOfAll(a, "mem"), DeviceSlots(a)});
  std::cout << FormatTable({"NODE", "AGENT", "ADDRESS", "GROUP", "STATE", "KERNELS", "FREE CPU", "FREE MEM",
                            "FREE DEVICES"},
                           rows);
}

// Now as "01:02:03" (UTC), for the lines of --watch.
std::string Clock() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[16];
  std::strftime(text, sizeof text, "%H:%M:%S", &tm);
  return text;
}

// Prints one change of the fleet: `event` is registered, left, draining or undrained.
void PrintChange(const std::string& event, const AgentDocument& agent, const Options& options) {
  if (options.json_output) {
    PrintJson({{"event", event}, {"agent", agent.ToJson()}}, -1);
  } else {
    const char* mark = event == "registered" ? "+" : event == "left" ? "-" : "~";
    std::cout << Clock() << " " << mark << " " << agent.id << " (node " << agent.node << ", " << Shown(agent) << ") "
              << event << "\n";
  }
  std::cout.flush();
}

// What changed from `before` to `after`, printed; `after` becomes the fleet known.
void ApplyChange(Registered& known, const std::string& key, const std::optional<AgentDocument>& after,
                 const Options& options) {
  auto it = known.by_key.find(key);
  if (!after) {
    if (it == known.by_key.end()) return;
    PrintChange("left", it->second, options);
    known.by_key.erase(it);
    return;
  }
  if (it == known.by_key.end()) {
    PrintChange("registered", *after, options);
  } else if (it->second.draining != after->draining) {
    PrintChange(after->draining ? "draining" : "undrained", *after, options);
  }
  known.by_key[key] = *after;
}

// Writes the Prometheus targets of `registered` to `path` when they differ from `*written`.
std::optional<Failure> KeepTargets(const std::string& path, const Registered& registered, std::string* written) {
  if (path.empty()) return std::nullopt;
  const std::string targets = slotd::PrometheusTargets(registered.Agents());
  if (targets == *written) return std::nullopt;
  if (slotd::Status s = slotd::WriteFileAtomically(path, targets); !s.ok())
    return FailureOf(s.WithPrefix("--prometheus-sd"), Exit::kFailure);
  *written = targets;
  return std::nullopt;
}

// Follows the fleet from `known` on, printing each arrival, departure and
// drain, until the process is interrupted.
int Watch(const Fleet& fleet, Registered known, const ClusterArgs& args, const Options& options,
          std::string targets_written) {
  const std::atomic<bool> never{false};
  for (;;) {
    std::optional<Failure> failed;
    auto on_events = [&](const std::vector<slotd::EtcdEvent>& events) {
      for (const slotd::EtcdEvent& event : events) {
        known.revision = std::max(known.revision, event.kv.mod_revision);
        ApplyChange(known, event.kv.key, event.deleted ? std::nullopt : DocumentOf(event.kv), options);
      }
      failed = KeepTargets(args.prometheus_sd, known, &targets_written);
      return !failed;
    };
    slotd::Status s = fleet.etcd->WatchPrefix(fleet.prefix, known.revision + 1, on_events, never);
    if (failed) return Report(*failed);
    std::cerr << "slotctl: " << (s.ok() ? "the watch ended" : s.message()) << "; watching again\n";
    // List again, and report what changed meanwhile as if it had been watched
    // (while etcd does not answer, the next watch fails and comes back here).
    std::this_thread::sleep_for(std::chrono::seconds(1));
    Outcome<Registered> now = ReadFleet(fleet);
    if (!now.ok()) continue;
    for (const auto& [key, doc] : Registered(known).by_key)  // a copy: ApplyChange erases
      if (!now->by_key.count(key)) ApplyChange(known, key, std::nullopt, options);
    for (const auto& [key, doc] : now->by_key) ApplyChange(known, key, doc, options);
    known.revision = now->revision;
    if (auto f = KeepTargets(args.prometheus_sd, known, &targets_written)) return Report(*f);
  }
}

// The slots `body` (a create request) asks for, with the agent's defaults
// for what it leaves out (1 core, 256m).
Outcome<slotd::PlacementRequest> PlacementOf(const json& body, const CreateArgs& args) {
  slotd::PlacementRequest request;
  // Whole cores, or millicores of a shared pool's quota (0.5, "500m").
  const json cpu = body.contains("resources") ? body["resources"].value("cpu", json(1)) : json(1);
  if (cpu.is_number_integer())
    request.slots["cpu"] = cpu.get<int64_t>();
  else if (cpu.is_number())
    request.slots["cpu_shared"] = std::llround(cpu.get<double>() * 1000);
  else if (cpu.is_string())
    request.slots["cpu_shared"] = std::strtoll(cpu.get<std::string>().c_str(), nullptr, 10);
  request.slots["mem"] = 256ll << 20;
  if (!args.mem.empty()) {
    auto mem = slotd::ParseSize(args.mem);
    if (!mem.ok()) return Failure{Exit::kUsage, "--mem " + args.mem + ": " + mem.status().message()};
    request.slots["mem"] = static_cast<int64_t>(*mem);
  }
  if (!args.ports.empty()) request.slots["ports"] = static_cast<int64_t>(args.ports.size());
  if (body.contains("resources"))
    for (const auto& [slot, amount] : body["resources"].items())
      if (slot != "cpu" && slot != "mem" && slot != "shm" && amount.is_number_integer())
        request.slots[slot] = amount.get<int64_t>();
  return request;
}

}  // namespace

int RunCluster(const ClusterArgs& args, const Options& options) {
  Outcome<Fleet> fleet = OpenFleet(args.fleet, options);
  if (!fleet.ok()) return Report(fleet.failure());
  Outcome<Registered> registered = ReadFleet(*fleet);
  if (!registered.ok()) return Report(registered.failure());
  std::string targets_written;
  if (auto failed = KeepTargets(args.prometheus_sd, *registered, &targets_written)) return Report(*failed);
  PrintFleet(*registered, options);
  std::cout.flush();
  if (!args.watch) return 0;
  return Watch(*fleet, std::move(*registered), args, options, targets_written);
}

int RunPlaced(const CreateArgs& args, const PlaceArgs& place, const Options& options) {
  Outcome<json> body = CreateRequest(args);
  if (!body.ok()) return Report(body.failure());
  Outcome<slotd::PlacementRequest> request = PlacementOf(*body, args);
  if (!request.ok()) return Report(request.failure());
  request->scaling_group = place.scaling_group;
  Outcome<Fleet> fleet = OpenFleet(place.fleet, options);
  if (!fleet.ok()) return Report(fleet.failure());
  std::string last_refusal;  // the last agent's 422 or unreachability, for the final message
  // Agents that refused this credential (401/403), by id with what they
  // said: never asked again, and named if no other agent takes the kernel.
  std::map<std::string, std::string> credential_refused;
  for (int round = 0; round < kPlacementRounds; ++round) {
    if (round > 0) std::this_thread::sleep_for(kPlacementPause);
    Outcome<Registered> registered = ReadFleet(*fleet);
    if (!registered.ok()) return Report(registered.failure());
    const std::vector<AgentDocument> agents = registered->Agents();
    const std::vector<size_t> ranked = slotd::RankAgents(agents, *request);
    if (ranked.empty()) return Report({Exit::kNoRoom, slotd::NoPlacementMessage(agents, *request)});
    size_t asked = 0;
    for (size_t index : ranked) {
      const AgentDocument& chosen = agents[index];
      if (credential_refused.count(chosen.id)) continue;
      ++asked;
      AgentTarget target;
      target.agent_url = chosen.Url();
      target.token_file = options.target.token_file;
      target.tls = options.target.tls;
      auto agent = AgentClient::Connect(target);
      if (!agent.ok()) return Report(agent.failure());
      Outcome<Answer> answer = Failure{Exit::kFailure, ""};
      {
        PullProgressWatch progress(*agent, args.image, !options.json_output);
        answer = agent->Call("POST", "/v1/kernels", *body, kPullWait);
      }
      if (answer.ok()) {
        std::cerr << "slotctl: placed on agent " << chosen.id << " (node " << chosen.node << ", " << Shown(chosen)
                  << ")\n";
        if (!args.wait_ready) return PrintKernel(*answer, options, *agent);
        Outcome<Answer> ready = WaitReady(answer->Root()["kernel_id"].String(), *agent);
        if (!ready.ok()) return Report(ready.failure());
        return PrintKernel(*ready, options, *agent);
      }
      // Full since it wrote its document, draining since, not reached at
      // all, or not accepting this credential: the next agent.
      const Failure& refusal = answer.failure();
      const bool not_reached = refusal.exit == Exit::kUnreachable && refusal.code.empty();
      if (refusal.exit == Exit::kRefused) {
        std::cerr << "slotctl: agent " << chosen.id << " (node " << chosen.node << ", " << Shown(chosen)
                  << ") refused the credential: " << refusal.message << "; trying the next agent\n";
        credential_refused[chosen.id] = refusal.message;
        continue;
      }
      if (refusal.exit != Exit::kNoRoom && refusal.code != "draining" && !not_reached) return Report(refusal);
      last_refusal = "agent " + chosen.id + ": " + refusal.message;
    }
    if (asked == 0) break;  // every agent with room refused the credential
  }
  if (!credential_refused.empty() && last_refusal.empty()) {
    std::string named;
    for (const auto& [id, message] : credential_refused) named += (named.empty() ? "" : "; ") + id + ": " + message;
    return Report({Exit::kRefused, "every agent with room for " + slotd::DescribeSlots(request->slots) +
                                       " refused the credential (" + named +
                                       "): give each of them this token (a fleet's shared tokens-file, "
                                       "docs/fleet.md) or pass the one they take with --token-file"});
  }
  return Report({Exit::kNoRoom, "no agent took " + slotd::DescribeSlots(request->slots) + " after " +
                                    std::to_string(kPlacementRounds) + " rounds; the last refusal: " + last_refusal +
                                    (credential_refused.empty()
                                         ? ""
                                         : " (" + std::to_string(credential_refused.size()) +
                                               " agent(s) refused the credential)")});
}

}  // namespace slotctl
