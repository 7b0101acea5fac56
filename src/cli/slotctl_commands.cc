// The subcommands that talk to one agent, and the refreshing views of `top`
// and `node --top`. `node` itself is in slotctl_node.cc.
#include "cli/slotctl_commands.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <thread>
#include <tuple>
#include <utility>

#include "cli/pull_progress.h"
#include "cli/stats_view.h"
#include "cli/terminal.h"
#include "cli/table.h"
#include "common/relay.h"
#include "common/units.h"

namespace slotctl {

using nlohmann::json;

namespace {

// The highest core number slotctl believes; past it a core list is a bad answer.
constexpr uint64_t kMaxCore = 1 << 20;

// Unix seconds as "2026-12-01 18:05:30 UTC": to the second, its zone named.
std::string FormatTime(uint64_t unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

void PrintTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::cout << FormatTable(header, rows);
}

// Prints the failure for `answer`'s problem; returns its exit status.
int ReportBadAnswer(const Answer& answer, const AgentClient& agent) {
  return Report(agent.BadAnswer(answer.request(), answer.problem()));
}

// The API path of kernel `id` ("/v1/kernels/<id>"), the id escaped.
std::string KernelPath(const std::string& id) { return "/v1/kernels/" + slotd::UrlEncode(id); }

const std::vector<std::string> kKernelHeader = {"KERNEL", "STATE", "HEALTH",  "RESTARTS", "EXIT",     "CORES",
                                                "MEM",    "DEVICES", "PORTS", "IMAGE", "CONTAINER"};

// A kernel record (docs/api.md) as a row of kKernelHeader.
std::vector<std::string> KernelRow(const AnswerField& k) {
  const AnswerField a = k["allocations"];
  const AnswerField health = k.Optional("health");
  std::vector<int> cores;
  for (const auto& core : a["cpu"].Elements()) cores.push_back(static_cast<int>(core.Count(kMaxCore)));
  std::string ports;
  for (const auto& p : k["ports"].Elements())
    ports += (ports.empty() ? "" : ",") + p["host"].Shown() + "->" + p["container"].Shown();
  std::string devices;
  for (const auto& plugin : a["devices"].Members())
    for (const auto& id : plugin.second.Elements()) devices += (devices.empty() ? "" : ",") + id.String();
  return {k["kernel_id"].String(),
          k["state"].String(),
          health.raw().is_object() ? health["status"].Shown() : "-",
          k.Optional("restarts").Shown(),
          k["exit_code"].Shown(),
          cores.empty() ? "-" : slotd::FormatCoreList(cores),
          slotd::FormatSize(a["mem"].Count()),
          devices.empty() ? "-" : devices,
          ports.empty() ? "-" : ports,
          k["image"].Shown(),
          k["container_id"].Shown().substr(0, 12)};
}

// "KEY=VALUE" of the option `flag` split in two; kUsage when there is no KEY=.
Outcome<std::pair<std::string, std::string>> SplitKeyValue(const std::string& item, const std::string& flag) {
  const auto eq = item.find('=');
  if (eq == std::string::npos || eq == 0)
    return Failure{Exit::kUsage, flag + " \"" + item + "\": expected KEY=VALUE"};
  return std::make_pair(item.substr(0, eq), item.substr(eq + 1));
}

// The agent's stats as `slotctl stats` shows them: its kernels in `order`, then its slice of the node.
Outcome<std::string> AgentStatsView(const Answer& stats, KernelOrder order, bool with_header,
                                    const AgentClient& agent) {
  // The containers the views walk; the values in them are read leniently.
  const AnswerField root = stats.Root();
  for (const auto& kernel : root["kernels"].Elements()) kernel.Members();
  root["agent"].Members();
  if (!stats.problem().empty()) return agent.BadAnswer(stats.request(), stats.problem());
  return Render("the agent's stats", [&] {
    return (with_header ? FormatStatsHeader(stats.body()) : "") + FormatKernelsTable(stats.body(), order) + "\n" +
           FormatAgentSlice(stats.body());
  });
}

}  // namespace

// Prints `value` as JSON (`indent` 2: over lines; -1: on one line), then a newline.
void PrintJson(const json& value, int indent) {
  std::cout << value.dump(indent, ' ', false, json::error_handler_t::replace) << "\n";
}

// Prints the kernel record `answer` (--json: as it is; else its row).
int PrintKernel(const Answer& answer, const Options& options, const AgentClient& agent) {
  if (options.json_output) return PrintJson(answer.body(), 2), 0;
  std::vector<std::string> row = KernelRow(answer.Root());
  if (!answer.problem().empty()) return ReportBadAnswer(answer, agent);
  PrintTable(kKernelHeader, {row});
  return 0;
}

// Adds the health check of `args` (--health-cmd, --health-http, --health-tcp)
// to `body`, the probed port to its ports; kUsage when more than one is given
// or one is malformed. True when it added one.
static Outcome<bool> AddHealthCheck(const CreateArgs& args, json& body) {
  const int kinds = !args.health_cmd.empty() + !args.health_http.empty() + (args.health_tcp > 0);
  if (kinds == 0) {
    if (!args.health_interval.empty() || !args.on_unhealthy.empty())
      return Failure{Exit::kUsage, "--health-interval and --on-unhealthy need a check: --health-cmd, --health-http "
                                   "or --health-tcp"};
    return false;
  }
  if (kinds > 1) return Failure{Exit::kUsage, "give one of --health-cmd, --health-http and --health-tcp"};
  json health = json::object();
  int port = 0;
  if (!args.health_cmd.empty()) {
    health["exec"] = {"sh", "-c", args.health_cmd};
  } else if (args.health_tcp > 0) {
    port = args.health_tcp;
    health["tcp"] = {{"port", port}};
  } else {
    const size_t colon = args.health_http.find(':');
    const std::string number = args.health_http.substr(0, colon);
    char* end = nullptr;
    const long n = std::strtol(number.c_str(), &end, 10);
    if (number.empty() || *end != '\0' || n < 1 || n > 65535)
      return Failure{Exit::kUsage, "--health-http \"" + args.health_http + "\": expected PORT or PORT:PATH, as in 8080:/healthz"};
    port = static_cast<int>(n);
    health["http"] = {{"port", port}, {"path", colon == std::string::npos ? "/" : args.health_http.substr(colon + 1)}};
  }
  if (!args.health_interval.empty()) health["interval"] = args.health_interval;
  if (!args.on_unhealthy.empty()) health["on_unhealthy"] = args.on_unhealthy;
  if (port > 0 && std::find(args.ports.begin(), args.ports.end(), port) == args.ports.end())
    body["ports"].push_back(port);
  body["health"] = std::move(health);
  return true;
}

// The body of POST /v1/kernels for `args`; kUsage naming the option when one is malformed.
Outcome<json> CreateRequest(const CreateArgs& args) {
  json body = {{"image", args.image}};
  if (!args.command.empty()) body["command"] = args.command;
  if (!args.kernel_id.empty()) body["kernel_id"] = args.kernel_id;
  if (!args.session_id.empty()) body["session_id"] = args.session_id;
  json resources = json::object();
  if (!args.cpu.empty()) {
    const std::string& cpu = args.cpu;
    const bool digits = std::all_of(cpu.begin(), cpu.end(), [](char c) { return c >= '0' && c <= '9'; });
    char* end = nullptr;
    const double cores = std::strtod(cpu.c_str(), &end);
    if (digits && cpu.size() <= 4)
      resources["cpu"] = std::stoi(cpu);
    else if (cpu.size() > 1 && cpu.back() == 'm')
      resources["cpu"] = cpu;  // millicores: the agent checks them
    else if (end && *end == '\0' && cpu.find_first_not_of("0123456789.") == std::string::npos)
      resources["cpu"] = cores;
    else
      return Failure{Exit::kUsage, "--cpu " + cpu + ": expected whole cores (2), a fraction of a core (0.5) or "
                                   "millicores (250m)"};
  }
  if (!args.mem.empty()) resources["mem"] = args.mem;
  for (const auto& device : args.devices) {
    auto kv = SplitKeyValue(device, "--device");
    if (!kv.ok()) return kv.failure();
    const std::string& count = kv->second;
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(count.c_str(), &end, 10);
    if (count.empty() || *end != '\0' || errno == ERANGE)
      return Failure{Exit::kUsage, "--device " + device + ": COUNT must be a whole number, as in SLOT=2"};
    resources[kv->first] = n;
  }
  if (!resources.empty()) body["resources"] = resources;
  for (const auto& [flag, items, field] : {std::tuple{"--env", &args.env, "env"},
                                           std::tuple{"--label", &args.labels, "labels"}}) {
    for (const auto& item : *items) {
      auto kv = SplitKeyValue(item, flag);
      if (!kv.ok()) return kv.failure();
      body[field][kv->first] = kv->second;
    }
  }
  if (!args.ports.empty()) body["ports"] = args.ports;
  for (const auto& mount : args.mounts) {
    // SOURCE:TARGET or SOURCE:TARGET:ro; neither path may hold a ":".
    const size_t first = mount.find(':');
    const size_t second = first == std::string::npos ? first : mount.find(':', first + 1);
    const std::string mode = second == std::string::npos ? "" : mount.substr(second + 1);
    if (first == std::string::npos || first == 0 || (second != std::string::npos && mode != "ro" && mode != "rw") ||
        mount.substr(first + 1, second - first - 1).empty())
      return Failure{Exit::kUsage, "--mount \"" + mount + "\": expected SOURCE:TARGET or SOURCE:TARGET:ro"};
    body["mounts"].push_back({{"source", mount.substr(0, first)},
                              {"target", mount.substr(first + 1, second - first - 1)},
                              {"readonly", mode == "ro"}});
  }
  if (!args.shm.empty()) body["resources"]["shm"] = args.shm;
  if (!args.scratch.empty()) body["resources"]["scratch"] = args.scratch;
  if (!args.max_lifetime.empty()) body["max_lifetime"] = args.max_lifetime;
  if (!args.pull.empty()) body["pull"] = args.pull;
  if (!args.stop_signal.empty()) body["stop_signal"] = args.stop_signal;
  if (!args.stop_timeout.empty()) body["stop_timeout"] = args.stop_timeout;
  if (!args.pre_stop.empty()) body["pre_stop"] = {"sh", "-c", args.pre_stop};
  if (Outcome<bool> health = AddHealthCheck(args, body); !health.ok()) return health.failure();
  if (!args.restart.empty() || args.restart_max > 0 || !args.restart_backoff.empty()) {
    json restart = {{"policy", args.restart.empty() ? "on-failure" : args.restart}};
    if (args.restart_max > 0) restart["max"] = args.restart_max;
    if (!args.restart_backoff.empty()) restart["backoff"] = {{"initial", args.restart_backoff}};
    body["restart"] = std::move(restart);
  }
  return body;
}

// "draining since ..., kernels stopped at ...\n" of an agent record; "" when it is not draining.
static std::string DrainLine(const AnswerField& a) {
  if (!a.Optional("draining").raw().is_boolean() || !a["draining"].Bool()) return "";
  std::string line = "draining since " + FormatTime(a["draining_since"].Count());
  if (!a.Optional("drain_deadline").IsNull()) line += "; kernels still running at " + FormatTime(a["drain_deadline"].Count()) + " are stopped";
  return line + "\n";
}

// "engine podman 4.3.1 (API 1.41) at unix://...\n" of an agent record; "" when it names none.
static std::string EngineLine(const AnswerField& a) {
  const AnswerField engine = a.Optional("engine");
  if (!engine.raw().is_object()) return "";
  return "engine " + engine["name"].Shown() + " " + engine["version"].Shown() + " (API " +
         engine["api_version"].Shown() + ") at " + engine["address"].Shown() + "\n";
}

int RunInfo(const Options& options, const AgentClient& agent) {
  auto answer = agent.Call("GET", "/v1/agent");
  if (!answer.ok()) return Report(answer.failure());
  if (options.json_output) return PrintJson(answer->body(), 2), 0;
  const AnswerField a = answer->Root();
  const std::string head = "agent " + a["id"].Shown() + " on node " + a["node"].Shown() + " (version " +
                           a["version"].Shown() + ", pid " + a["pid"].Shown() + ")\n" + "api " +
                           a["api_address"].Shown() + ", socket " + a["unix_socket"].Shown() + ", ports " +
                           a["port_range"].At(0).Shown() + "-" + a["port_range"].At(1).Shown() + "\n" +
                           EngineLine(a) + DrainLine(a) + "\n";
  std::vector<std::vector<std::string>> slot_rows, device_rows;
  for (const auto& resource : a["resources"].Members()) {
    const std::string& slot = resource.first;
    const AnswerField& use = resource.second;
    const bool bytes = slot == "mem";
    auto amount = [bytes](const AnswerField& v) { return bytes ? slotd::FormatSize(v.Count()) : v.Shown(); };
    const std::string detail = use.Has("cores")   ? "cores " + use["cores"].Shown()
                               : use.Has("range") ? "range " + use["range"].At(0).Shown() + "-" +
                                                        use["range"].At(1).Shown()
                                                  : "";
    slot_rows.push_back({slot, amount(use["capacity"]), amount(use["used"]), amount(use["free"]), detail});
    if (!use.Has("devices")) continue;
    for (const auto& d : use["devices"].Elements()) {
      std::string properties;
      for (const auto& [key, value] : d.Members()) {
        if (key == "id" || key == "numa_node" || key == "held_by" || key == "health" || key == "healthy" ||
            key == "reason" || key == "since" || key == "drained")
          continue;
        properties += (properties.empty() ? "" : " ") + key + "=" +
                      (key == "memory" ? slotd::FormatSize(value.Count()) : value.Shown());
      }
      std::string health = d.Has("health") ? d["health"].Shown() : "-";
      if (d.Has("reason") && !d["reason"].raw().is_null()) health += " (" + d["reason"].Shown() + ")";
      if (d.Has("drained") && d["drained"].Shown() == "true") health += ", drained";
      device_rows.push_back(
          {slot, d["id"].Shown(), d["numa_node"].Shown(), d["held_by"].Shown(), health, properties});
    }
  }
  std::vector<std::vector<std::string>> pool_rows;  // the warm pools: WARM kernels of their count
  std::string pool_errors;  // one line per pool whose latest kernel could not be made
  if (a.Has("warm"))
    for (const auto& pool : a["warm"]["pools"].Elements()) {
      pool_rows.push_back({pool["name"].Shown(), pool["image"].Shown(),
                           pool["warm"].Shown() + "/" + pool["count"].Shown(), pool["making"].Shown()});
      if (pool.Optional("error").IsNull()) continue;
      pool_errors += "pool " + pool["name"].Shown() + ": cannot make a kernel: " + pool["error"].Shown();
      if (!pool.Optional("retry_at").IsNull()) pool_errors += " (tried again at " + FormatTime(pool["retry_at"].Count()) + ")";
      pool_errors += "\n";
    }
  if (!answer->problem().empty()) return ReportBadAnswer(*answer, agent);
  std::cout << head;
  PrintTable({"SLOT", "CAPACITY", "USED", "FREE", "DETAIL"}, slot_rows);
  if (!device_rows.empty()) {
    std::cout << "\n";
    PrintTable({"SLOT", "DEVICE", "NUMA", "HELD BY", "HEALTH", "PROPERTIES"}, device_rows);
  }
  if (!pool_rows.empty()) {
    std::cout << "\n";
    PrintTable({"POOL", "IMAGE", "WARM", "MAKING"}, pool_rows);
    std::cout << pool_errors;
  }
  return 0;
}

int RunKernels(const Options& options, const AgentClient& agent) {
  auto answer = agent.Call("GET", "/v1/kernels");
  if (!answer.ok()) return Report(answer.failure());
  const AnswerField kernels = answer->Root()["kernels"];
  const std::vector<AnswerField> records = kernels.Elements();  // --json too needs the array
  std::vector<std::vector<std::string>> rows;
  if (!options.json_output)
    for (const auto& k : records) rows.push_back(KernelRow(k));
  if (!answer->problem().empty()) return ReportBadAnswer(*answer, agent);
  if (options.json_output) return PrintJson(kernels.raw(), 2), 0;
  PrintTable(kKernelHeader, rows);
  return 0;
}

int RunCreate(const CreateArgs& args, const Options& options, const AgentClient& agent) {
  auto request = CreateRequest(args);
  if (!request.ok()) return Report(request.failure());
  Outcome<Answer> answer = Failure{Exit::kFailure, ""};
  {
    PullProgressWatch progress(agent, args.image, !options.json_output);
    answer = agent.Call("POST", "/v1/kernels", *request, kPullWait);
  }
  if (!answer.ok()) return Report(answer.failure());
  if (!args.wait_ready) return PrintKernel(*answer, options, agent);
  Outcome<Answer> ready = WaitReady(answer->Root()["kernel_id"].String(), agent);
  if (!ready.ok()) return Report(ready.failure());
  return PrintKernel(*ready, options, agent);
}

Outcome<Answer> WaitReady(const std::string& kernel_id, const AgentClient& agent) {
  while (true) {
    Outcome<Answer> answer = agent.Call("GET", KernelPath(kernel_id));
    if (!answer.ok()) return answer;
    const AnswerField k = answer->Root();
    const std::string state = k["state"].String();
    if (!answer->problem().empty()) return agent.BadAnswer(answer->request(), answer->problem());
    if (k.Optional("ready").raw().is_boolean() && k["ready"].Bool()) return answer;
    if (state == "TERMINATED" || state == "ERROR")
      return Failure{Exit::kFailure, "kernel " + kernel_id + " is " + state + " (" + k["reason"].Shown() +
                                         ") before it was ready"};
    const AnswerField health = k.Optional("health");
    if (health.raw().is_object() && health["status"].String() == "unhealthy")
      return Failure{Exit::kFailure, "kernel " + kernel_id + " is unhealthy before it was ready; its last check: " +
                                         health["last_failure"].Shown()};
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int RunPull(const std::string& image, const Options& options, const AgentClient& agent) {
  Outcome<Answer> answer = Failure{Exit::kFailure, ""};
  {
    PullProgressWatch progress(agent, image, !options.json_output);
    answer = agent.Call("POST", "/v1/images/pull", {{"image", image}}, kPullWait);
  }
  if (!answer.ok()) return Report(answer.failure());
  if (options.json_output) return PrintJson(answer->body(), 2), 0;
  const AnswerField a = answer->Root();
  const std::string line = image + " " + a["id"].Shown() + " " + ReadableSize(a["size"].Count());
  if (!answer->problem().empty()) return ReportBadAnswer(*answer, agent);
  std::cout << line << "\n";
  return 0;
}

int RunImages(const Options& options, const AgentClient& agent) {
  auto answer = agent.Call("GET", "/v1/images");
  if (!answer.ok()) return Report(answer.failure());
  const AnswerField images = answer->Root()["images"];
  const std::vector<AnswerField> records = images.Elements();
  std::vector<std::vector<std::string>> rows;
  if (!options.json_output) {
    for (const auto& i : records) {
      std::string tags, kernels;
      for (const auto& tag : i["tags"].Elements()) tags += (tags.empty() ? "" : ",") + tag.String();
      for (const auto& kernel : i["kernels"].Elements()) kernels += (kernels.empty() ? "" : ",") + kernel.String();
      const std::string id = i["id"].String();
      rows.push_back({tags.empty() ? "<none>" : tags, id.substr(id.rfind(':') + 1, 12),
                      ReadableSize(i["size"].Count()), i["last_used"].raw().is_null() ? "-" : FormatTime(i["last_used"].Count()),
                      kernels.empty() ? "-" : kernels});
    }
  }
  if (!answer->problem().empty()) return ReportBadAnswer(*answer, agent);
  if (options.json_output) return PrintJson(images.raw(), 2), 0;
  PrintTable({"IMAGE", "ID", "SIZE", "LAST USED", "KERNELS"}, rows);
  return 0;
}

int RunRemove(const std::vector<std::string>& kernel_ids, const Options& options, const AgentClient& agent) {
  int status = 0;
  auto failed = [&status](int exit) {
    if (status == 0) status = exit;
  };
  for (const auto& id : kernel_ids) {
    auto answer = agent.Call("DELETE", KernelPath(id));
    if (!answer.ok()) {
      failed(Report(answer.failure()));
      continue;
    }
    if (options.json_output) {
      PrintJson(answer->body(), -1);
      continue;
    }
    const std::string exit_code = answer->Root()["exit_code"].Shown();
    if (!answer->problem().empty()) {
      failed(ReportBadAnswer(*answer, agent));
      continue;
    }
    std::cout << "removed " << id << " (exit code " << exit_code << ")\n";
  }
  return status;
}

int RunDrain(bool drain, bool wait, const std::string& deadline, const Options& options, const AgentClient& agent) {
  auto answer = deadline.empty() ? agent.Call("POST", drain ? "/v1/agent/drain" : "/v1/agent/undrain")
                                 : agent.Call("POST", "/v1/agent/drain", {{"deadline", deadline}});
  if (!answer.ok()) return Report(answer.failure());
  if (options.json_output && !wait) return PrintJson(answer->body(), 2), 0;
  if (!options.json_output) {
    std::cout << (drain ? "draining: no new kernels" : "undrained: takes new kernels");
    const AnswerField until = answer->Root().Optional("drain_deadline");
    if (drain && !until.IsNull()) std::cout << "; kernels still running at " << FormatTime(until.Count()) << " are stopped";
    std::cout << "\n";
  }
  if (!wait) return 0;
  std::string last;
  while (true) {
    auto kernels = agent.Call("GET", "/v1/kernels");
    if (!kernels.ok()) return Report(kernels.failure());
    std::string running;
    int count = 0;
    for (const auto& k : kernels->Root()["kernels"].Elements()) {
      const std::string state = k["state"].Shown();
      if (state == "TERMINATED" || state == "ERROR") continue;
      running += (running.empty() ? "" : ", ") + k["kernel_id"].Shown();
      ++count;
    }
    if (!kernels->problem().empty()) return ReportBadAnswer(*kernels, agent);
    if (count == 0) {
      if (!options.json_output) std::cout << "drained: no kernel runs\n";
      else PrintJson(answer->body(), 2);
      return 0;
    }
    if (running != last && !options.json_output)
      std::cout << "waiting for " << count << " kernel" << (count == 1 ? "" : "s") << ": " << running << "\n"
                << std::flush;
    last = running;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int RunDevice(const std::string& action, const std::string& device, const Options& options, const AgentClient& agent) {
  auto answer = agent.Call("POST", "/v1/devices/" + slotd::UrlEncode(device) + "/" + action);
  if (!answer.ok()) return Report(answer.failure());
  if (options.json_output) return PrintJson(answer->body(), 2), 0;
  const AnswerField a = answer->Root();
  std::string devices;
  for (const auto& id : a["devices"].Elements()) devices += (devices.empty() ? "" : ", ") + id.Shown();
  if (!answer->problem().empty()) return ReportBadAnswer(*answer, agent);
  const std::string done = action == "drain" ? "drained" : action == "undrain" ? "undrained" : "cleared the health mark of";
  std::cout << done << " " << a["plugin"].Shown() << " device" << (a["devices"].Elements().size() == 1 ? " " : "s ")
            << devices << "\n";
  return 0;
}

int RunRestart(const std::string& kernel_id, const Options& options, const AgentClient& agent) {
  auto answer = agent.Call("POST", KernelPath(kernel_id) + "/restart");
  if (!answer.ok()) return Report(answer.failure());
  return PrintKernel(*answer, options, agent);
}

namespace {

// `slotctl exec -it`: the terminal relayed to the command until it ends, then its exit status.
int RunInteractiveExec(const ExecArgs& args, const AgentClient& agent) {
  const WindowSize size = WindowSizeOf(STDIN_FILENO).value_or(WindowSize{24, 80});
  auto connection = agent.Upgrade(KernelPath(args.kernel_id) + "/exec",
                                  {{"command", args.command}, {"tty", true}, {"rows", size.rows}, {"cols", size.cols}});
  if (!connection.ok()) return Report(connection.failure());
  const std::string exec_path = KernelPath(args.kernel_id) + "/exec/" + slotd::UrlEncode(connection->Header("X-Slotd-Exec-Id"));
  {
    RawTerminal raw(STDIN_FILENO);
    WatchWindowChanges();
    const std::atomic<bool> never{false};
    if (slotd::WriteAll(STDOUT_FILENO, connection->early.data(), connection->early.size()))
      slotd::Relay(STDIN_FILENO, STDOUT_FILENO, connection->fd, never,
                   {.on_tick = [&] {
                     if (!WindowChanged()) return;
                     if (auto now = WindowSizeOf(STDIN_FILENO))
                       (void)agent.Call("POST", exec_path + "/resize", {{"rows", now->rows}, {"cols", now->cols}},
                                        std::chrono::seconds(5));
                   }});
  }
  ::close(connection->fd);
  // The output can end a moment before the engine records the exit code.
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto state = agent.Call("GET", exec_path);
    if (!state.ok()) return Report(state.failure());
    const AnswerField root = state->Root();
    const bool running = root["running"].raw().is_boolean() && root["running"].raw().get<bool>();
    if (!running) {
      const uint64_t code = root["exit_code"].Count(255);
      if (!state->problem().empty()) return ReportBadAnswer(*state, agent);
      return static_cast<int>(code);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Report({Exit::kAgentError, "the command's terminal closed but the agent still reports it running"});
}

}  // namespace

int RunExec(const ExecArgs& args, const Options& options, const AgentClient& agent) {
  if (args.interactive != args.tty)
    return Report({Exit::kUsage, "exec: -i and -t go together (-it): an interactive command gets a terminal"});
  if (args.interactive) return RunInteractiveExec(args, agent);
  auto answer = agent.Call("POST", KernelPath(args.kernel_id) + "/exec",
                           {{"command", args.command}, {"timeout_s", args.timeout_s}},
                           std::chrono::seconds(int64_t{args.timeout_s} + 30));
  if (!answer.ok()) return Report(answer.failure());
  if (options.json_output) return PrintJson(answer->body(), 2), 0;
  const AnswerField result = answer->Root();
  const std::string out = result["stdout"].String(), err = result["stderr"].String();
  const uint64_t exit_code = result["exit_code"].Count(255);
  if (!answer->problem().empty()) return ReportBadAnswer(*answer, agent);
  std::cout << out;
  std::cerr << err;
  return static_cast<int>(exit_code);
}

int RunLogs(const LogsArgs& args, const Options& options, const AgentClient& agent) {
  const std::string path = KernelPath(args.kernel_id) + "/logs?tail=" + std::to_string(args.tail) +
                           (args.follow ? "&follow=1" : "");
  if (options.json_output && !args.follow) {
    auto text = agent.CallText("GET", path);
    if (!text.ok()) return Report(text.failure());
    return PrintJson({{"kernel_id", args.kernel_id}, {"logs", *text}}, -1), 0;
  }
  // The output as it comes, never held whole; with --json, one line per piece.
  auto print = [&](std::string_view piece) {
    if (options.json_output) {
      PrintJson({{"kernel_id", args.kernel_id}, {"output", std::string(piece)}}, -1);
    } else {
      std::cout.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    }
    std::cout.flush();
    return static_cast<bool>(std::cout);
  };
  if (auto failure = agent.Stream(path, print)) return Report(*failure);
  return 0;
}

int RunStats(const std::string& kernel_id, const Options& options, const AgentClient& agent) {
  auto answer = agent.Call("GET", kernel_id.empty() ? "/v1/stats" : KernelPath(kernel_id) + "/stats");
  if (!answer.ok()) return Report(answer.failure());
  if (options.json_output) return PrintJson(answer->body(), 2), 0;
  Outcome<std::string> text = std::string();
  if (kernel_id.empty()) {
    text = AgentStatsView(*answer, KernelOrder::kById, /*with_header=*/false, agent);
  } else {
    answer->Root().Members();  // the view reads an object
    if (!answer->problem().empty()) return ReportBadAnswer(*answer, agent);
    text = Render("the stats of kernel " + kernel_id, [&] { return FormatKernelStats(answer->body()); });
  }
  if (!text.ok()) return Report(text.failure());
  std::cout << *text;
  return 0;
}

int RunTop(const RefreshArgs& args, const Options& options, const AgentClient& agent) {
  auto plan = PlanRefresh(args, options);
  if (!plan.ok()) return Report(plan.failure());
  return Refresh(*plan, [&]() -> Outcome<std::string> {
    auto answer = agent.Call("GET", "/v1/stats");
    if (!answer.ok()) return answer.failure();
    if (options.json_output) return answer->body().dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
    return AgentStatsView(*answer, KernelOrder::kByCpuPercentDesc, /*with_header=*/true, agent);
  });
}

Outcome<RefreshPlan> PlanRefresh(const RefreshArgs& args, const Options& options) {
  auto interval = slotd::ParseDuration(args.interval);
  if (!interval.ok()) return Failure{Exit::kUsage, "--interval: " + interval.status().message()};
  if (interval->count() == 0)
    return Failure{Exit::kUsage, "--interval " + args.interval + ": must be more than 0, e.g. 500ms"};
  if (args.iterations < 0)
    return Failure{Exit::kUsage, "--iterations " + std::to_string(args.iterations) +
                                     ": must be a count of refreshes, or 0 to refresh until interrupted"};
  // Frames replace each other on a terminal; --json frames are one line each.
  return RefreshPlan{*interval, args.iterations, isatty(STDOUT_FILENO) && !options.json_output};
}

int Refresh(const RefreshPlan& plan, const std::function<Outcome<std::string>()>& frame) {
  for (int i = 0; plan.iterations == 0 || i < plan.iterations; ++i) {
    const auto next = std::chrono::steady_clock::now() + plan.interval;
    auto text = frame();
    if (!text.ok()) return Report(text.failure());
    if (plan.clear_screen) std::cout << "\033[H\033[2J";
    else if (i > 0) std::cout << "\n";
    std::cout << *text << std::flush;
    if (plan.iterations == 0 || i + 1 < plan.iterations) std::this_thread::sleep_until(next);
  }
  return 0;
}

Outcome<std::string> Render(const std::string& what, const std::function<std::string()>& view) {
  try {
    return view();
  } catch (const json::exception& e) {
    return Failure{Exit::kAgentError, "cannot show " + what + ": it is not in the form slotctl knows (" + e.what() +
                                          "); is the agent of another slotd version?"};
  }
}

}  // namespace slotctl
