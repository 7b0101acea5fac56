// slotctl: the command-line client of one slotd agent, and of every agent
// of this node through the node's claims directory (`slotctl node`).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/stats_view.h"
#include "cli/table.h"
#include "common/http_client.h"
#include "common/token_file.h"
#include "common/units.h"
#include "config/config.h"
#include "node/claims.h"

namespace {

using nlohmann::json;
using slotd::HttpClient;
using slotd::Status;

// Where the agent is and how to talk to it; resolved from the global flags.
struct Target {
  std::string agent_url;
  std::string socket_path;
  std::string config_path;
  std::string token_file;
  bool json_output = false;
};

// Builds the client: --socket, else --agent, else --config (its unix socket
// when this user can open it, else its rpc-listen-addr with its token), else
// http://127.0.0.1:6001.
slotd::Result<HttpClient> Connect(const Target& t) {
  std::string token_file = t.token_file;
  std::optional<HttpClient> client;
  if (!t.socket_path.empty()) {
    client = HttpClient::Unix(t.socket_path);
  } else if (!t.agent_url.empty()) {
    client = HttpClient::Tcp(t.agent_url);
  } else if (!t.config_path.empty()) {
    auto config = slotd::LoadConfig(t.config_path);
    if (!config.ok()) return config.status();
    std::string sock = config->agent.ipc_base_path + "/agent.sock";
    if (access(sock.c_str(), R_OK | W_OK) == 0) {
      client = HttpClient::Unix(sock);
    } else {
      client = HttpClient::Tcp("http://" + config->agent.rpc_host + ":" + std::to_string(config->agent.rpc_port));
      if (token_file.empty() && config->agent.token_file) token_file = *config->agent.token_file;
    }
  } else {
    client = HttpClient::Tcp("http://127.0.0.1:6001");
  }
  if (!token_file.empty()) {
    auto token = slotd::ReadTokenFile(token_file);
    if (!token.ok()) return token.status();
    client->SetBearerToken(*token);
  }
  return *client;
}

// Sends one request; returns the parsed JSON body (or {"text": body} when
// `as_text`), or a Status carrying the agent's error message and HTTP status.
slotd::Result<json> Call(const Target& t, const std::string& method, const std::string& path,
                         const json& body = nullptr, std::chrono::seconds timeout = std::chrono::seconds(120),
                         bool as_text = false) {
  auto client = Connect(t);
  if (!client.ok()) return client.status();
  auto res = client->Request(method, path, body.is_null() ? "" : body.dump(), timeout);
  if (!res.ok()) return res.status();
  json parsed = json::parse(res->body, nullptr, false);
  if (res->status >= 400) {
    std::string message = parsed.is_object() && parsed.contains("error") ? parsed["error"].value("message", res->body)
                                                                        : res->body;
    return Status::InvalidArgument(message + " (HTTP " + std::to_string(res->status) + ")");
  }
  if (as_text) return json{{"text", res->body}};
  if (parsed.is_discarded())
    return Status::Internal("the agent at " + client->Describe() + " answered with something that is not JSON");
  return parsed;
}

// Prints rows as an aligned table with a header.
void PrintTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::cout << slotctl::FormatTable(header, rows);
}

std::string Str(const json& j) {
  if (j.is_null()) return "-";
  if (j.is_string()) return j.get<std::string>();
  return j.dump();
}

std::vector<std::string> KernelRow(const json& k) {
  const json& a = k["allocations"];
  std::vector<int> cores = a.value("cpu", std::vector<int>{});
  std::string ports;
  for (const auto& p : k["ports"]) ports += (ports.empty() ? "" : ",") + Str(p["host"]) + "->" + Str(p["container"]);
  std::string devices;
  for (const auto& [plugin, ids] : a["devices"].items())
    for (const auto& id : ids) devices += (devices.empty() ? "" : ",") + id.get<std::string>();
  return {Str(k["kernel_id"]),
          Str(k["state"]),
          Str(k["exit_code"]),
          cores.empty() ? "-" : slotd::FormatCoreList(cores),
          slotd::FormatSize(a.value("mem", uint64_t{0})),
          devices.empty() ? "-" : devices,
          ports.empty() ? "-" : ports,
          Str(k["image"]),
          Str(k["container_id"]).substr(0, 12)};
}

const std::vector<std::string> kKernelHeader = {"KERNEL", "STATE",   "EXIT",  "CORES",    "MEM",
                                                "DEVICES", "PORTS", "IMAGE", "CONTAINER"};

int Fail(const Status& s) {
  std::cerr << "slotctl: " << s.message() << "\n";
  return 1;
}

// The claims directory `slotctl node` reads when neither --claims-dir nor --config names one.
constexpr char kDefaultClaimsDir[] = "/run/slotd/node";

// The claims directory for `slotctl node`: `flag` (--claims-dir), else the
// node.claims-dir of --config's agent.toml, else kDefaultClaimsDir.
slotd::Result<std::string> ClaimsDir(const Target& t, const std::string& flag) {
  if (!flag.empty()) return flag;
  if (t.config_path.empty()) return std::string(kDefaultClaimsDir);
  auto config = slotd::LoadConfig(t.config_path);
  if (!config.ok()) return config.status();
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
  std::optional<json> body;     // the JSON object it answered with (HTTP 200)
  std::string unknown_because;  // set when `body` is absent
};

// Asks the agent of `claims` for GET `path`: over its unix socket when this
// user may open it, else over TCP at its claimed address (a wildcard listen
// address is reached on loopback). No token is known here, so an agent that
// requires one (HTTP 401 on TCP) gives no answer; the reason then advises
// `slotctl --config <its config> <command>` as a user who can read its token.
AgentAnswer AskAgent(const slotd::AgentClaims& claims, const std::string& path, const std::string& command) {
  const std::string socket = claims.ipc_base_path + "/agent.sock";
  std::optional<HttpClient> client;
  if (access(socket.c_str(), R_OK | W_OK) == 0) {
    client = HttpClient::Unix(socket);
  } else if (claims.api_port != 0) {
    const std::string& host = claims.api_host;
    client = HttpClient::Tcp("http://" + HostPort(host == "0.0.0.0" ? "127.0.0.1" : host == "::" ? "::1" : host,
                                                  claims.api_port));
  } else {
    return {std::nullopt, "cannot open " + socket + " and the agent has not bound its TCP port yet"};
  }
  auto res = client->Request("GET", path, "", std::chrono::seconds(5));
  if (!res.ok()) return {std::nullopt, res.status().message()};
  if (res->status == 401)
    return {std::nullopt, client->Describe() + " requires a token (HTTP 401); run slotctl --config " +
                              claims.config_path + " " + command + " as a user who can read its token-file"};
  json body = json::parse(res->body, nullptr, false);
  if (res->status != 200 || !body.is_object())
    return {std::nullopt, client->Describe() + " answered GET " + path + " with HTTP " + std::to_string(res->status)};
  return {std::move(body), ""};
}

// How many of a live agent's kernels are RUNNING, as its API says; absent,
// with the reason, when it cannot be asked.
struct RunningKernels {
  std::optional<int> count;
  std::string unknown_because;
};

// Asks the agent of `claims` for its kernels (AskAgent); an agent that needs
// a token leaves the count unknown.
RunningKernels CountRunningKernels(const slotd::AgentClaims& claims) {
  AgentAnswer answer = AskAgent(claims, "/v1/kernels", "kernels");
  if (!answer.body) return {std::nullopt, answer.unknown_because};
  const json& kernels = answer.body->contains("kernels") ? (*answer.body)["kernels"] : json();
  if (!kernels.is_array()) return {std::nullopt, "the answer to GET /v1/kernels has no kernels array"};
  int running = 0;
  for (const auto& kernel : kernels)
    if (kernel.value("state", "") == "RUNNING") ++running;
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

// The claims of the live agents in the claims directory `dir`; an error
// with advice when the directory does not exist.
slotd::Result<std::vector<slotd::AgentClaims>> LiveAgents(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec))
    return Status::NotFound(
        "claims directory " + dir + " does not exist, so no agent has started with it as node.claims-dir. Name the "
        "node's directory with --claims-dir DIR, or --config agent.toml to use that agent's node.claims-dir");
  return slotd::NodeClaims::ReadLive(dir);
}

// What `slotctl node` prints for a directory without live agents.
std::string NoAgents(const std::string& dir, bool json_output) {
  return json_output ? "[]\n" : "no agents: no live agent holds claims in " + dir + "\n";
}

// `slotctl node`: one row per live agent in the claims directory `dir`.
// Returns 0, or 1 when the directory is missing or unreadable.
int ShowNode(const std::string& dir, bool json_output) {
  auto live = LiveAgents(dir);
  if (!live.ok()) return Fail(live.status());
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
  if (json_output) return std::cout << agents.dump(2) << "\n", 0;
  PrintTable({"AGENT", "PID", "API", "CORES", "MEMORY", "DEVICES", "KERNELS"}, rows);
  for (const auto& line : unknown) std::cout << line << "\n";
  return 0;
}

// The agent's measures as `slotctl stats` prints them: its kernels, then its slice of the node.
std::string StatsView(const json& stats, slotctl::KernelOrder order) {
  return slotctl::FormatKernelsTable(stats, order) + "\n" + slotctl::FormatAgentSlice(stats);
}

// `view(body)`, or an error naming `what` when the body is not in the form
// docs/api.md gives (an agent of another version).
slotd::Result<std::string> Render(const std::function<std::string()>& view, const std::string& what) {
  try {
    return view();
  } catch (const json::exception& e) {
    return Status::Internal("cannot show " + what + ": it is not in the form slotctl knows (" + e.what() +
                            "); is the agent of another slotd version?");
  }
}

// Prints `frame()` `iterations` times (0: until interrupted), one every
// `interval`. On a terminal (`clear_screen`) each frame replaces the screen;
// otherwise frames follow each other, separated by a blank line. Returns 0,
// or 1 after printing the error of the first frame that failed.
int Refresh(std::chrono::milliseconds interval, int iterations, bool clear_screen,
            const std::function<slotd::Result<std::string>()>& frame) {
  for (int i = 0; iterations == 0 || i < iterations; ++i) {
    const auto next = std::chrono::steady_clock::now() + interval;
    auto text = frame();
    if (!text.ok()) return Fail(text.status());
    if (clear_screen) std::cout << "\033[H\033[2J";
    else if (i > 0) std::cout << "\n";
    std::cout << *text << std::flush;
    if (iterations == 0 || i + 1 < iterations) std::this_thread::sleep_until(next);
  }
  return 0;
}

// One frame of `slotctl top`: the agent's header line and its stats, busiest
// kernel first (with --json: the agent's JSON on one line).
slotd::Result<std::string> TopFrame(const Target& t) {
  auto r = Call(t, "GET", "/v1/stats");
  if (!r.ok()) return r.status();
  if (t.json_output) return r->dump() + "\n";
  return Render([&] { return slotctl::FormatStatsHeader(*r) + StatsView(*r, slotctl::KernelOrder::kByCpuPercentDesc); },
                "the agent's stats");
}

// One frame of `slotctl node --top`: for each live agent of the claims
// directory `dir`, its header line and its kernels (busiest first), or a
// "? <agent>: <reason>" line when it cannot be asked. With --json: one line,
// an array of {"agent", "stats"} (stats null, with "error", when it cannot be asked).
slotd::Result<std::string> NodeTopFrame(const std::string& dir, bool json_output) {
  auto live = LiveAgents(dir);
  if (!live.ok()) return live.status();
  if (live->empty()) return NoAgents(dir, json_output);
  json agents = json::array();
  std::string text;
  for (const auto& claims : *live) {
    AgentAnswer answer = AskAgent(claims, "/v1/stats", "stats");
    if (json_output) {
      json agent = {{"agent", claims.agent_id}, {"stats", answer.body ? *answer.body : json(nullptr)}};
      if (!answer.body) agent["error"] = answer.unknown_because;
      agents.push_back(agent);
      continue;
    }
    if (!text.empty()) text += "\n";
    if (!answer.body) {
      text += "? " + claims.agent_id + ": " + answer.unknown_because + "\n";
      continue;
    }
    auto view = Render(
        [&] {
          return slotctl::FormatStatsHeader(*answer.body) +
                 slotctl::FormatKernelsTable(*answer.body, slotctl::KernelOrder::kByCpuPercentDesc);
        },
        "the stats of agent " + claims.agent_id);
    text += view.ok() ? *view : "? " + claims.agent_id + ": " + view.status().message() + "\n";
  }
  return json_output ? agents.dump() + "\n" : text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"slotctl: talk to a slotd agent (its kernels, resources, logs), or list every agent of this node."};
  app.require_subcommand(1);
  Target t;
  app.add_option("--agent", t.agent_url, "agent API base URL, e.g. http://127.0.0.1:6001");
  app.add_option("--socket", t.socket_path, "agent unix socket, e.g. /run/slotd/gpu1-a/agent.sock");
  app.add_option("--config", t.config_path, "read the agent's socket, address and token from its agent.toml");
  app.add_option("--token-file", t.token_file, "file holding the API bearer token");
  app.add_flag("--json", t.json_output, "print machine-readable JSON");

  auto* info = app.add_subcommand("info", "show the agent, its slot capacity, use and devices");
  auto* kernels = app.add_subcommand("kernels", "list this agent's kernels");

  auto* run = app.add_subcommand("run", "create a kernel: slotctl run IMAGE -- CMD...");
  std::string image, kernel_id, session_id, mem;
  int cpu = 0;
  std::vector<std::string> command, env, labels, devices;
  std::vector<int> ports;
  run->add_option("image", image, "image to run")->required();
  run->add_option("command", command, "command and arguments (after --)");
  run->add_option("--cpu", cpu, "whole CPU cores (default 1)");
  run->add_option("--mem", mem, "memory, e.g. 256m (default 256m)");
  run->add_option("--env", env, "KEY=VALUE, repeatable")->allow_extra_args(false);
  run->add_option("--id", kernel_id, "kernel id (default: generated)");
  run->add_option("--session", session_id, "session id (default: the kernel id)");
  run->add_option("--port", ports, "container port that needs a host port, repeatable")->allow_extra_args(false);
  run->add_option("--label", labels, "KEY=VALUE user label, repeatable")->allow_extra_args(false);
  run->add_option("--device", devices, "SLOT=COUNT device request, e.g. mock.device=1, repeatable")->allow_extra_args(false);

  auto* rm = app.add_subcommand("rm", "stop and remove kernels, freeing their resources");
  std::vector<std::string> rm_ids;
  rm->add_option("kernel", rm_ids, "kernel ids")->required();

  auto* restart = app.add_subcommand("restart", "restart a kernel's container, keeping its allocation");
  std::string restart_id;
  restart->add_option("kernel", restart_id, "kernel id")->required();

  auto* exec = app.add_subcommand("exec", "run a command in a kernel: slotctl exec ID -- CMD...");
  std::string exec_id;
  std::vector<std::string> exec_command;
  int exec_timeout = 30;
  exec->add_option("kernel", exec_id, "kernel id")->required();
  exec->add_option("command", exec_command, "command and arguments (after --)")->required();
  exec->add_option("--timeout", exec_timeout, "seconds before the command is abandoned");

  auto* logs = app.add_subcommand("logs", "print a kernel's output");
  std::string logs_id;
  int tail = 0;
  logs->add_option("kernel", logs_id, "kernel id")->required();
  logs->add_option("--tail", tail, "only the last N lines");
  bool follow = false;
  logs->add_flag("--follow,-f", follow, "keep printing new output until the kernel ends or Ctrl-C");

  auto* node = app.add_subcommand(
      "node", "list this node's live agents (from its claims directory): pid, API, cores, memory, devices, kernels");
  std::string claims_dir;
  node->add_option("--claims-dir", claims_dir,
                   std::string("the node's claims directory (default: --config's node.claims-dir, else ") +
                       kDefaultClaimsDir + ")");
  bool node_top = false;
  auto* node_top_flag = node->add_flag(
      "--top", node_top, "refresh a view of every live agent's kernels and their measures (GET /v1/stats of each)");
  node->fallthrough();

  auto* stats = app.add_subcommand(
      "stats", "show the agent's measures: its running kernels (cpu, memory, pids, io, GPU memory), cores, memory "
               "and devices; or one kernel's measures");
  std::string stats_id;
  stats->add_option("kernel", stats_id, "kernel id (default: every running kernel and the agent's slice)");

  auto* top = app.add_subcommand("top", "refresh `slotctl stats`, busiest kernel first, until interrupted");

  // --interval and --iterations of `top` and `node --top`.
  std::string interval_text = "1s";
  int iterations = 0;
  for (CLI::App* refreshing : {top, node}) {
    auto* interval_option = refreshing->add_option("--interval", interval_text,
                                                   "time between refreshes, e.g. 500ms or 2s (default 1s)");
    auto* iterations_option =
        refreshing->add_option("--iterations", iterations, "refresh N times, then exit (default 0: until interrupted)");
    if (refreshing == node) {
      interval_option->needs(node_top_flag);
      iterations_option->needs(node_top_flag);
    }
  }

  CLI11_PARSE(app, argc, argv);

  std::chrono::milliseconds interval{0};
  if (*top || node_top) {
    auto parsed = slotd::ParseDuration(interval_text);
    if (!parsed.ok()) return Fail(Status::InvalidArgument("--interval: " + parsed.status().message()));
    if (parsed->count() == 0)
      return Fail(Status::InvalidArgument("--interval " + interval_text + ": must be more than 0, e.g. 500ms"));
    interval = *parsed;
    if (iterations < 0)
      return Fail(Status::InvalidArgument("--iterations " + std::to_string(iterations) +
                                          ": must be a count of refreshes, or 0 to refresh until interrupted"));
  }
  // Frames replace each other on a terminal; --json frames are one line each.
  const bool clear_screen = isatty(STDOUT_FILENO) && !t.json_output;

  if (*node) {
    auto dir = ClaimsDir(t, claims_dir);
    if (!dir.ok()) return Fail(dir.status());
    if (node_top)
      return Refresh(interval, iterations, clear_screen, [&] { return NodeTopFrame(*dir, t.json_output); });
    return ShowNode(*dir, t.json_output);
  }
  if (*stats) {
    auto r = Call(t, "GET", stats_id.empty() ? "/v1/stats" : "/v1/kernels/" + stats_id + "/stats");
    if (!r.ok()) return Fail(r.status());
    if (t.json_output) return std::cout << r->dump(2) << "\n", 0;
    auto text = stats_id.empty()
                    ? Render([&] { return StatsView(*r, slotctl::KernelOrder::kById); }, "the agent's stats")
                    : Render([&] { return slotctl::FormatKernelStats(*r); }, "the stats of kernel " + stats_id);
    if (!text.ok()) return Fail(text.status());
    std::cout << *text;
    return 0;
  }
  if (*top) return Refresh(interval, iterations, clear_screen, [&] { return TopFrame(t); });
  if (*info) {
    auto r = Call(t, "GET", "/v1/agent");
    if (!r.ok()) return Fail(r.status());
    if (t.json_output) return std::cout << r->dump(2) << "\n", 0;
    const json& a = *r;
    std::cout << "agent " << Str(a["id"]) << " on node " << Str(a["node"]) << " (version " << Str(a["version"])
              << ", pid " << Str(a["pid"]) << ")\n"
              << "api " << Str(a["api_address"]) << ", socket " << Str(a["unix_socket"]) << ", ports "
              << Str(a["port_range"][0]) << "-" << Str(a["port_range"][1]) << "\n\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& [slot, use] : a["resources"].items()) {
      bool bytes = slot == "mem";
      auto fmt = [&](const json& v) { return bytes ? slotd::FormatSize(v.get<uint64_t>()) : Str(v); };
      std::string detail = use.contains("cores") ? "cores " + Str(use["cores"])
                           : use.contains("range") ? "range " + Str(use["range"][0]) + "-" + Str(use["range"][1])
                                                   : "";
      rows.push_back({slot, fmt(use["capacity"]), fmt(use["used"]), fmt(use["free"]), detail});
    }
    PrintTable({"SLOT", "CAPACITY", "USED", "FREE", "DETAIL"}, rows);
    std::vector<std::vector<std::string>> device_rows;
    for (const auto& [slot, use] : a["resources"].items()) {
      if (!use.contains("devices")) continue;
      for (const auto& d : use["devices"]) {
        std::string props;
        for (const auto& [key, value] : d.items()) {
          if (key == "id" || key == "numa_node" || key == "held_by") continue;
          std::string shown = key == "memory" ? slotd::FormatSize(value.get<uint64_t>()) : Str(value);
          props += (props.empty() ? "" : " ") + key + "=" + shown;
        }
        device_rows.push_back({slot, Str(d["id"]), Str(d["numa_node"]), Str(d["held_by"]), props});
      }
    }
    if (!device_rows.empty()) {
      std::cout << "\n";
      PrintTable({"SLOT", "DEVICE", "NUMA", "HELD BY", "PROPERTIES"}, device_rows);
    }
    return 0;
  }
  if (*kernels) {
    auto r = Call(t, "GET", "/v1/kernels");
    if (!r.ok()) return Fail(r.status());
    if (t.json_output) return std::cout << (*r)["kernels"].dump(2) << "\n", 0;
    std::vector<std::vector<std::string>> rows;
    for (const auto& k : (*r)["kernels"]) rows.push_back(KernelRow(k));
    PrintTable(kKernelHeader, rows);
    return 0;
  }
  if (*run) {
    json body = {{"image", image}};
    if (!command.empty()) body["command"] = command;
    if (!kernel_id.empty()) body["kernel_id"] = kernel_id;
    if (!session_id.empty()) body["session_id"] = session_id;
    json resources = json::object();
    if (cpu) resources["cpu"] = cpu;
    if (!mem.empty()) resources["mem"] = mem;
    auto split = [](const std::string& kv, const char* what) -> slotd::Result<std::pair<std::string, std::string>> {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        return Status::InvalidArgument(std::string(what) + " \"" + kv + "\": expected KEY=VALUE");
      return std::make_pair(kv.substr(0, eq), kv.substr(eq + 1));
    };
    for (const auto& d : devices) {
      auto kv = split(d, "--device");
      if (!kv.ok()) return Fail(kv.status());
      char* end = nullptr;
      long n = std::strtol(kv->second.c_str(), &end, 10);
      if (*end != '\0') return Fail(Status::InvalidArgument("--device " + d + ": COUNT must be a whole number"));
      resources[kv->first] = n;
    }
    if (!resources.empty()) body["resources"] = resources;
    for (const auto& [flag, list, field] :
         {std::tuple{"--env", &env, "env"}, std::tuple{"--label", &labels, "labels"}}) {
      for (const auto& item : *list) {
        auto kv = split(item, flag);
        if (!kv.ok()) return Fail(kv.status());
        body[field][kv->first] = kv->second;
      }
    }
    if (!ports.empty()) body["ports"] = ports;
    auto r = Call(t, "POST", "/v1/kernels", body);
    if (!r.ok()) return Fail(r.status());
    if (t.json_output) return std::cout << r->dump(2) << "\n", 0;
    PrintTable(kKernelHeader, {KernelRow(*r)});
    return 0;
  }
  if (*rm) {
    int status = 0;
    for (const auto& id : rm_ids) {
      auto r = Call(t, "DELETE", "/v1/kernels/" + id);
      if (!r.ok()) {
        status = Fail(r.status());
        continue;
      }
      if (t.json_output) std::cout << r->dump() << "\n";
      else std::cout << "removed " << id << " (exit code " << Str((*r)["exit_code"]) << ")\n";
    }
    return status;
  }
  if (*restart) {
    auto r = Call(t, "POST", "/v1/kernels/" + restart_id + "/restart");
    if (!r.ok()) return Fail(r.status());
    if (t.json_output) return std::cout << r->dump(2) << "\n", 0;
    PrintTable(kKernelHeader, {KernelRow(*r)});
    return 0;
  }
  if (*exec) {
    auto r = Call(t, "POST", "/v1/kernels/" + exec_id + "/exec", {{"command", exec_command}, {"timeout_s", exec_timeout}},
                  std::chrono::seconds(exec_timeout + 30));
    if (!r.ok()) return Fail(r.status());
    if (t.json_output) return std::cout << r->dump(2) << "\n", 0;
    std::cout << (*r)["stdout"].get<std::string>();
    std::cerr << (*r)["stderr"].get<std::string>();
    return (*r)["exit_code"].get<int>();
  }
  if (*logs) {
    const std::string path = "/v1/kernels/" + slotd::UrlEncode(logs_id) + "/logs?tail=" + std::to_string(tail) +
                             (follow ? "&follow=1" : "");
    if (t.json_output && !follow) {
      auto r = Call(t, "GET", path, nullptr, std::chrono::seconds(120), /*as_text=*/true);
      if (!r.ok()) return Fail(r.status());
      return std::cout << json{{"kernel_id", logs_id}, {"logs", (*r)["text"]}}.dump(-1, ' ', false, json::error_handler_t::replace) << "\n", 0;
    }
    // The output as it comes, never held whole; with --json, one line per piece.
    auto client = Connect(t);
    if (!client.ok()) return Fail(client.status());
    const std::atomic<bool> never{false};
    auto print = [&](std::string_view piece) {
      if (t.json_output) {
        std::cout << json{{"kernel_id", logs_id}, {"output", std::string(piece)}}.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      } else {
        std::cout.write(piece.data(), static_cast<std::streamsize>(piece.size()));
      }
      std::cout.flush();
      return static_cast<bool>(std::cout);
    };
    Status s = client->Stream("GET", path, "", [] {}, print, never, /*end_is_ok=*/true);
    if (!s.ok()) return Fail(s);
    return 0;
  }
  return 0;
}
