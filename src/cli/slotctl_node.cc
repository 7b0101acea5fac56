// `slotctl node` and `slotctl node --top`: every live agent of this node,
// read from the node's claims directory, each asked over its own connection.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string_view>

#include "cli/slotctl_commands.h"
#include "cli/stats_view.h"
#include "cli/table.h"
#include "common/units.h"
#include "resources/agent_config.h"
#include "config/defaults.h"
#include "node/claims.h"

namespace slotctl {

using nlohmann::json;

namespace {

// The claims directory: `flag` (--claims-dir), else the node.claims-dir of
// --config's agent.toml, else kDefaultClaimsDir.
Outcome<std::string> ClaimsDir(const Options& options, const std::string& flag) {
  if (!flag.empty()) return flag;
  if (options.target.config_path.empty()) return std::string(slotd::kDefaultClaimsDir);
  auto config = slotd::LoadConfig(options.target.config_path);
  if (!config.ok()) return FailureOf(config.status(), Exit::kFailure);
  return config->node.claims_dir;
}

// "host:port", with an IPv6 host in brackets.
std::string HostPort(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// The host:port an agent's claim says its API listens on; empty while the
// agent has not bound it yet (port 0).
std::string ApiAddress(const slotd::AgentClaims& claims) {
  return claims.api_port == 0 ? "" : HostPort(claims.api_host, claims.api_port);
}

// A live agent's answer to one GET, or why there is none.
struct AgentAnswer {
  std::optional<Answer> answer;  // its JSON object (HTTP 200)
  std::string unknown_because;   // set when `answer` is absent
};

// Asks the agent of `claims` for GET `path`: over its unix socket when this
// user may open it, else over TCP at its claimed address (a wildcard listen
// address is reached on loopback). No token is known here, so an agent that
// requires one (HTTP 401 on TCP) gives no answer; the reason then advises
// `slotctl --config <its config> <command>` as a user who can read its token.
AgentAnswer AskAgent(const slotd::AgentClaims& claims, const std::string& path, const std::string& command) {
  const std::string socket = claims.ipc_base_path + "/agent.sock";
  std::optional<slotd::HttpClient> client;
  if (access(socket.c_str(), R_OK | W_OK) == 0) {
    client = slotd::HttpClient::Unix(socket);
  } else if (claims.api_port != 0) {
    const std::string& host = claims.api_host;
    client = slotd::HttpClient::Tcp(
        "http://" + HostPort(host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host, claims.api_port));
  } else {
    return {std::nullopt, "cannot open " + socket + " and the agent has not bound its TCP port yet"};
  }
  std::string text;
  bool too_long = false;
  auto keep = [&](std::string_view chunk) {
    too_long = text.size() + chunk.size() > kMaxAnswerBytes;
    if (!too_long) text.append(chunk);
    return !too_long;  // false stops the transfer
  };
  auto res = client->RequestStreamed("GET", path, "", std::chrono::seconds(5), keep);
  if (too_long) return {std::nullopt, client->Describe() + " answered GET " + path + " with more than " +
                                        std::to_string(kMaxAnswerBytes >> 20) + " MiB"};
  if (!res.ok()) return {std::nullopt, res.status().message()};
  if (res->status == 401)
    return {std::nullopt, client->Describe() + " requires a token (HTTP 401); run slotctl --config " +
                              claims.config_path + " " + command + " as a user who can read its token-file"};
  std::optional<json> body = slotd::ParseJsonWithin(text, kMaxAnswerDepth);
  if (res->status != 200 || !body || !body->is_object())
    return {std::nullopt, client->Describe() + " answered GET " + path + " with HTTP " + std::to_string(res->status) +
                              (res->status == 200 ? " but not with a JSON object" : "")};
  return {Answer(std::move(*body), "GET " + path), ""};
}

// How many of a live agent's kernels are RUNNING, as its API says; absent,
// with the reason, when it cannot be asked.
struct RunningKernels {
  std::optional<int> count;
  std::string unknown_because;
};

// Asks the agent of `claims` for its kernels (AskAgent); an agent that needs
// a token, or answers in a form slotctl cannot read, leaves the count unknown.
RunningKernels CountRunningKernels(const slotd::AgentClaims& claims) {
  AgentAnswer asked = AskAgent(claims, "/v1/kernels", "kernels");
  if (!asked.answer) return {std::nullopt, asked.unknown_because};
  int running = 0;
  for (const auto& kernel : asked.answer->Root()["kernels"].Elements())
    if (kernel["state"].String() == "RUNNING") ++running;
  if (!asked.answer->problem().empty())
    return {std::nullopt, "its answer to GET /v1/kernels cannot be read: " + asked.answer->problem()};
  return {running, ""};
}

// "mock:m0,m1 cuda:GPU-…", or "-" for none.
std::string DeviceList(const std::map<std::string, std::vector<std::string>>& devices) {
  std::string text;
  for (const auto& [plugin, ids] : devices) {
    std::string list;
    for (const auto& id : ids) list += (list.empty() ? "" : ",") + id;
    text += (text.empty() ? "" : " ") + plugin + ":" + list;
  }
  return text.empty() ? "-" : text;
}

// The claims of the live agents in the claims directory `dir`; kFailure,
// with advice, when the directory does not exist.
Outcome<std::vector<slotd::AgentClaims>> LiveAgents(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec))
    return Failure{Exit::kFailure,
                   "claims directory " + dir + " does not exist, so no agent has started with it as node.claims-dir. "
                   "Name the node's directory with --claims-dir DIR, or --config agent.toml to use that agent's "
                   "node.claims-dir"};
  auto live = slotd::NodeClaims::ReadLive(dir);
  if (!live.ok()) return FailureOf(live.status(), Exit::kFailure);
  return std::move(*live);
}

// What `slotctl node` prints for a directory without live agents.
std::string NoAgents(const std::string& dir, bool json_output) {
  return json_output ? "[]\n" : "no agents: no live agent holds claims in " + dir + "\n";
}

// `slotctl node`: one row per live agent in the claims directory `dir`.
int ShowNode(const std::string& dir, bool json_output) {
  auto live = LiveAgents(dir);
  if (!live.ok()) return Report(live.failure());
  if (live->empty()) return std::cout << NoAgents(dir, json_output), 0;
  json agents = json::array();
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> unknown;
  for (const auto& claims : *live) {
    const RunningKernels kernels = CountRunningKernels(claims);
    const std::string api = ApiAddress(claims);
    json agent = claims.ToJson();
    agent["agent"] = claims.agent_id;
    agent["api"] = api.empty() ? json(nullptr) : json(api);
    agent["memory"] = slotd::FormatSize(claims.memory_bytes);
    agent["kernels"] = kernels.count ? json(*kernels.count) : json(nullptr);
    if (!kernels.count) agent["kernels_error"] = kernels.unknown_because;
    agents.push_back(agent);
    rows.push_back({claims.agent_id, std::to_string(claims.pid), api.empty() ? "-" : api,
                    claims.cores.empty() ? "-" : slotd::FormatCoreList(claims.cores),
                    slotd::FormatSize(claims.memory_bytes), DeviceList(claims.devices),
                    kernels.count ? std::to_string(*kernels.count) : "?"});
    if (!kernels.count) unknown.push_back("? " + claims.agent_id + ": " + kernels.unknown_because);
  }
  if (json_output) return std::cout << agents.dump(2, ' ', false, json::error_handler_t::replace) << "\n", 0;
  std::cout << FormatTable({"AGENT", "PID", "API", "CORES", "MEMORY", "DEVICES", "KERNELS"}, rows);
  for (const auto& line : unknown) std::cout << line << "\n";
  return 0;
}

// One frame of `slotctl node --top`: for each live agent of the claims
// directory `dir`, its header line and its kernels (busiest first), or a
// "? <agent>: <reason>" line when it cannot be asked. With --json: one line,
// an array of {"agent", "stats"} (stats null, with "error", when it cannot be asked).
Outcome<std::string> NodeTopFrame(const std::string& dir, bool json_output) {
  auto live = LiveAgents(dir);
  if (!live.ok()) return live.failure();
  if (live->empty()) return NoAgents(dir, json_output);
  json agents = json::array();
  std::string text;
  for (const auto& claims : *live) {
    AgentAnswer asked = AskAgent(claims, "/v1/stats", "stats");
    if (json_output) {
      json agent = {{"agent", claims.agent_id}, {"stats", asked.answer ? asked.answer->body() : json(nullptr)}};
      if (!asked.answer) agent["error"] = asked.unknown_because;
      agents.push_back(agent);
      continue;
    }
    if (!text.empty()) text += "\n";
    if (!asked.answer) {
      text += "? " + claims.agent_id + ": " + asked.unknown_because + "\n";
      continue;
    }
    const Answer& stats = *asked.answer;
    for (const auto& kernel : stats.Root()["kernels"].Elements()) kernel.Members();
    if (!stats.problem().empty()) {
      text += "? " + claims.agent_id + ": its answer to GET /v1/stats cannot be read: " + stats.problem() + "\n";
      continue;
    }
    auto view = Render("the stats of agent " + claims.agent_id, [&] {
      return FormatStatsHeader(stats.body()) + FormatKernelsTable(stats.body(), KernelOrder::kByCpuPercentDesc);
    });
    text += view.ok() ? *view : "? " + claims.agent_id + ": " + view.failure().message + "\n";
  }
  return json_output ? agents.dump(-1, ' ', false, json::error_handler_t::replace) + "\n" : text;
}

}  // namespace

int RunNode(const NodeArgs& args, const Options& options) {
  std::optional<RefreshPlan> plan;
  if (args.top) {
    auto checked = PlanRefresh(args.refresh, options);
    if (!checked.ok()) return Report(checked.failure());
    plan = *checked;
  }
  auto dir = ClaimsDir(options, args.claims_dir);
  if (!dir.ok()) return Report(dir.failure());
  if (!plan) return ShowNode(*dir, options.json_output);
  return Refresh(*plan, [&] { return NodeTopFrame(*dir, options.json_output); });
}

}  // namespace slotctl
