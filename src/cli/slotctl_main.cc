// slotctl: the command-line client of one slotd agent, and of every agent
// of this node through the node's claims directory (`slotctl node`). This
// file is the command line: the flags of each subcommand and a table that
// runs the one given (slotctl_commands.h).
#include <exception>
#include <functional>
#include <memory>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/slotctl_client.h"
#include "cli/slotctl_commands.h"
#include "cli/slotctl_tls.h"
#include "common/version.h"
#include "config/defaults.h"

namespace {

using slotctl::AgentClient;
using slotctl::Options;

// One subcommand: its CLI11 app, and what runs it with the parsed flags,
// which live in the closures. Exactly one of `with_agent` (given the run's one
// client) and `local` is set.
struct Subcommand {
  CLI::App* app;
  std::function<int(const Options&, const AgentClient&)> with_agent;
  std::function<int(const Options&)> local;
};

void AddGlobalFlags(CLI::App& app, Options& o) {
  app.add_option("--agent", o.target.agent_url,
                 std::string("agent API base URL (without --socket and --config: ") + slotd::DefaultApiUrl() + ")");
  app.add_option("--socket", o.target.socket_path, "agent unix socket, e.g. /run/slotd/gpu1-a/agent.sock");
  app.add_option("--config", o.target.config_path, "read the agent's socket, address and token from its agent.toml");
  app.add_option("--token-file", o.target.token_file,
                 "file holding the API bearer token (a fleet's: sent to every agent --place tries)")
      ->envname("SLOTCTL_TOKEN_FILE");
  app.add_option("--cacert", o.target.tls.ca_file,
                 "https: PEM file of the CAs that sign the agent's certificate (default: the system's; with --config: "
                 "the agent's own certificate, pinned)")
      ->envname("SLOTCTL_CACERT");
  app.add_option("--cert", o.target.tls.cert_file,
                 "https: PEM client certificate, for an agent that asks for one (tls-client-ca-file)")
      ->envname("SLOTCTL_CERT");
  app.add_option("--key", o.target.tls.key_file, "https: the private key of --cert (default: in the --cert file)")
      ->envname("SLOTCTL_KEY");
  app.add_option("--fingerprint", o.target.tls.fingerprint,
                 "https: trust only the agent certificate of this SHA-256 fingerprint (AB:CD:..., as the agent "
                 "logs it), instead of a CA and host name check")
      ->envname("SLOTCTL_FINGERPRINT");
  app.add_flag("--json", o.json_output, "print machine-readable JSON");
}

// A subcommand without flags of its own.
Subcommand AddPlain(CLI::App& app, const char* name, const char* help,
                    int (*run)(const Options&, const AgentClient&)) {
  return {app.add_subcommand(name, help), run, nullptr};
}

// --etcd, --namespace, --etcd-user, --etcd-password-file and the etcd TLS
// flags of `command`, bound to `fleet`.
std::vector<CLI::Option*> AddFleetFlags(CLI::App* command, slotctl::FleetArgs& fleet) {
  return {command->add_option("--etcd", fleet.etcd,
                              "etcd URL where the agents register, repeatable (default: [etcd] endpoints of --config)")
              ->allow_extra_args(false),
          command->add_option("--namespace", fleet.key_namespace,
                              "the agents' etcd key prefix (default: --config's [etcd] namespace, else /slotd)"),
          command->add_option("--etcd-user", fleet.etcd_user, "etcd user (with --etcd-password-file)"),
          command->add_option("--etcd-password-file", fleet.etcd_password_file, "file holding the etcd user's password"),
          command->add_option("--etcd-cacert", fleet.etcd_cacert,
                              "https etcd: PEM file of the CAs that sign etcd's certificate (default: --config's "
                              "[etcd] ca-file, else the system's)"),
          command->add_option("--etcd-cert", fleet.etcd_cert,
                              "https etcd: PEM client certificate for etcd's --client-cert-auth (default: --config's "
                              "[etcd] cert-file)"),
          command->add_option("--etcd-key", fleet.etcd_key, "https etcd: the private key of --etcd-cert")};
}

Subcommand AddCluster(CLI::App& app) {
  auto args = std::make_shared<slotctl::ClusterArgs>();
  CLI::App* cluster = app.add_subcommand(
      "cluster", "list the agents of every node registered in etcd: node, address, drain, free cpu/mem/devices, kernels");
  AddFleetFlags(cluster, args->fleet);
  cluster->add_flag("--watch", args->watch, "then follow arrivals, departures and drains until interrupted");
  cluster->add_option("--prometheus-sd", args->prometheus_sd,
                      "write a Prometheus file_sd file of every agent's /metrics target (labels node, agent_id, "
                      "scaling_group); with --watch, keep it current");
  cluster->footer("Agents register with [etcd] in their agent.toml. An agent that stops leaves at once; one that "
                  "dies leaves when its lease runs out ([etcd] lease-ttl).");
  cluster->fallthrough();  // the global flags (--json, --config) may follow the subcommand
  return {cluster, nullptr, [args](const Options& o) { return slotctl::RunCluster(*args, o); }};
}

Subcommand AddRun(CLI::App& app) {
  auto args = std::make_shared<slotctl::CreateArgs>();
  auto place = std::make_shared<slotctl::PlaceArgs>();
  auto placed = std::make_shared<bool>(false);
  CLI::App* run = app.add_subcommand("run", "create a kernel: slotctl run IMAGE -- CMD...");
  run->add_option("image", args->image, "image to run")->required();
  run->add_option("command", args->command, "command and arguments (after --)");
  run->add_option("--cpu", args->cpu,
                  "whole exclusive CPU cores (2), or a quota from the shared pool: a fraction (0.5) or millicores "
                  "(250m) (default 1)");
  run->add_option("--mem", args->mem, "memory, e.g. 256m (default 256m)");
  run->add_option("--env", args->env, "KEY=VALUE, repeatable")->allow_extra_args(false);
  run->add_option("--id", args->kernel_id, "kernel id (default: generated)");
  run->add_option("--session", args->session_id, "session id (default: the kernel id)");
  run->add_option("--port", args->ports, "container port that needs a host port, repeatable")
      ->allow_extra_args(false);
  run->add_option("--label", args->labels, "KEY=VALUE user label, repeatable")->allow_extra_args(false);
  run->add_option("--mount", args->mounts,
                  "SOURCE:TARGET[:ro] host directory to mount (within the agent's [container] mount-allow), repeatable")
      ->allow_extra_args(false);
  run->add_option("--shm", args->shm, "size of /dev/shm, counted within --mem (default 64m)");
  run->add_option("--scratch", args->scratch, "size of the kernel's scratch at /home/work (default: the agent's scratch-size)");
  run->add_option("--max-lifetime", args->max_lifetime, "stop the kernel after this long, e.g. 2h");
  run->add_option("--pull", args->pull, "pull the image: digest (when its tag moved), tag (when missing), none; "
                                        "only stricter than the agent's [container] auto-pull")
      ->check(CLI::IsMember({"digest", "tag", "none"}));
  run->add_option("--restart", args->restart,
                  "start it again when its container ends: on-failure (a non-zero exit), always, never (default)")
      ->check(CLI::IsMember({"never", "on-failure", "always"}));
  run->add_option("--restart-max", args->restart_max,
                  "the most restarts (default: the agent's [container] restart-max); implies --restart on-failure")
      ->check(CLI::Range(1, 1'000'000));
  run->add_option("--restart-backoff", args->restart_backoff,
                  "the wait before the first restart, doubled for each later one, e.g. 5s (default: the agent's)");
  run->add_option("--stop-signal", args->stop_signal, "the signal a stop sends first, e.g. SIGUSR1 (default SIGTERM)");
  run->add_option("--stop-timeout", args->stop_timeout,
                  "how long a stop waits before SIGKILL, e.g. 30s (default and most: the agent's [container] "
                  "stop-timeout)");
  run->add_option("--pre-stop", args->pre_stop, "a shell command run in the kernel before its stop signal");
  run->add_option("--health-cmd", args->health_cmd, "a health check: a shell command run in the kernel, exit 0 is healthy");
  run->add_option("--health-http", args->health_http,
                  "a health check: PORT[:PATH] answered 2xx or 3xx is healthy, e.g. 8080:/healthz (PORT is added "
                  "to --port)");
  run->add_option("--health-tcp", args->health_tcp, "a health check: PORT accepting a connection is healthy")
      ->check(CLI::Range(1, 65535));
  run->add_option("--health-interval", args->health_interval, "between two checks, e.g. 5s (default: the agent's)");
  run->add_option("--on-unhealthy", args->on_unhealthy,
                  "what an unhealthy kernel comes to: none (reported), restart (as its restart policy says), stop")
      ->check(CLI::IsMember({"none", "restart", "stop"}));
  run->add_flag("--wait-ready", args->wait_ready,
                "return once the kernel is ready (RUNNING and, with a health check, passed one); fail naming the last "
                "check when it turns unhealthy or ends first");
  run->add_option("--device", args->devices, "SLOT=COUNT device request, SLOT one of the device slot types that slotctl info lists (<kind>.device, cuda.mig-<g>c<m>g), repeatable")
      ->allow_extra_args(false);
  CLI::Option* place_flag = run->add_flag(
      "--place", *placed,
      "create it on the registered agent (etcd) that fits it best: the least free capacity left, skipping draining "
      "agents and unhealthy or drained devices; the next one when an agent is full");
  for (CLI::Option* fleet_flag : AddFleetFlags(run, place->fleet)) fleet_flag->needs(place_flag);
  run->add_option("--scaling-group", place->scaling_group, "with --place: only agents of this scaling group")
      ->needs(place_flag);
  return {run, nullptr, [args, place, placed](const Options& o) {
            if (*placed) return slotctl::RunPlaced(*args, *place, o);
            auto agent = AgentClient::Connect(o.target);
            if (!agent.ok()) return slotctl::Report(agent.failure());
            return slotctl::RunCreate(*args, o, *agent);
          }};
}

Subcommand AddPull(CLI::App& app) {
  auto image = std::make_shared<std::string>();
  CLI::App* pull = app.add_subcommand("pull", "pull an image onto the agent's node, showing its progress");
  pull->add_option("image", *image, "image, e.g. 127.0.0.1:5000/team/torch:2.3")->required();
  return {pull, [image](const Options& o, const AgentClient& a) { return slotctl::RunPull(*image, o, a); }, nullptr};
}

Subcommand AddRemove(CLI::App& app) {
  auto ids = std::make_shared<std::vector<std::string>>();
  CLI::App* rm = app.add_subcommand("rm", "stop and remove kernels, freeing their resources");
  rm->add_option("kernel", *ids, "kernel ids")->required();
  return {rm, [ids](const Options& o, const AgentClient& a) { return slotctl::RunRemove(*ids, o, a); }, nullptr};
}

Subcommand AddDevice(CLI::App& app) {
  auto action = std::make_shared<std::string>();
  auto id = std::make_shared<std::string>();
  CLI::App* device = app.add_subcommand("device", "drain, undrain or clear a device: slotctl device drain ID");
  device->footer("drain: the device stays with its kernel but is given to no new one (kept across restarts); "
                 "undrain: it is given again; clear: forget its health mark (a critical Xid), once it is repaired.\n"
                 "ID names the device as resource.<kind>.allowed-devices does: a GPU index or UUID, a MIG UUID, a "
                 "mock device id.");
  device->add_option("action", *action, "drain, undrain or clear")
      ->required()
      ->check(CLI::IsMember({"drain", "undrain", "clear"}));
  device->add_option("device", *id, "the device, as slotctl info lists it")->required();
  return {device, [action, id](const Options& o, const AgentClient& a) { return slotctl::RunDevice(*action, *id, o, a); },
          nullptr};
}

Subcommand AddDrain(CLI::App& app) {
  auto wait = std::make_shared<bool>(false);
  auto deadline = std::make_shared<std::string>();
  CLI::App* drain = app.add_subcommand("drain", "close the agent to new kernels; its kernels run on");
  drain->footer("New creates are answered 503 draining until `slotctl undrain`; kept across agent restarts. With "
                "--deadline, the kernels run on until the deadline (a kernel with warn_before is sent its signal that "
                "long before it; no other is signalled), none is restarted, and those still there at the deadline "
                "are stopped (reason drained).");
  drain->add_flag("--wait", *wait, "then wait until none of the agent's kernels runs any more");
  drain->add_option("--deadline", *deadline, "stop the kernels still running after this long, e.g. 30m");
  return {drain,
          [wait, deadline](const Options& o, const AgentClient& a) {
            return slotctl::RunDrain(true, *wait, *deadline, o, a);
          },
          nullptr};
}

Subcommand AddUndrain(CLI::App& app) {
  CLI::App* undrain = app.add_subcommand("undrain", "open a drained agent to new kernels again");
  return {undrain, [](const Options& o, const AgentClient& a) { return slotctl::RunDrain(false, false, "", o, a); },
          nullptr};
}

Subcommand AddRestart(CLI::App& app) {
  auto id = std::make_shared<std::string>();
  CLI::App* restart = app.add_subcommand("restart", "restart a kernel's container, keeping its allocation");
  restart->add_option("kernel", *id, "kernel id")->required();
  return {restart, [id](const Options& o, const AgentClient& a) { return slotctl::RunRestart(*id, o, a); }, nullptr};
}

Subcommand AddExec(CLI::App& app) {
  auto args = std::make_shared<slotctl::ExecArgs>();
  CLI::App* exec = app.add_subcommand("exec", "run a command in a kernel: slotctl exec [-it] ID -- CMD...");
  exec->add_option("kernel", args->kernel_id, "kernel id")->required();
  exec->add_option("command", args->command, "command and arguments (after --)")->required();
  exec->add_option("--timeout", args->timeout_s, "seconds before the command is abandoned (not with -it)");
  exec->add_flag("-i,--interactive", args->interactive, "pass this terminal's input to the command (with -t)");
  exec->add_flag("-t,--tty", args->tty, "give the command a terminal, sized and resized as this one (with -i)");
  return {exec, [args](const Options& o, const AgentClient& a) { return slotctl::RunExec(*args, o, a); }, nullptr};
}

Subcommand AddLogs(CLI::App& app) {
  auto args = std::make_shared<slotctl::LogsArgs>();
  CLI::App* logs = app.add_subcommand("logs", "print a kernel's output");
  logs->add_option("kernel", args->kernel_id, "kernel id")->required();
  logs->add_option("--tail", args->tail, "only the last N lines");
  logs->add_flag("--follow,-f", args->follow, "keep printing new output until the kernel ends or Ctrl-C");
  return {logs, [args](const Options& o, const AgentClient& a) { return slotctl::RunLogs(*args, o, a); }, nullptr};
}

// --interval and --iterations of `top` and `node --top`, bound to `args`.
std::vector<CLI::Option*> AddRefreshFlags(CLI::App* refreshing, slotctl::RefreshArgs& args) {
  return {refreshing->add_option("--interval", args.interval, "time between refreshes, e.g. 500ms or 2s (default 1s)"),
          refreshing->add_option("--iterations", args.iterations,
                                 "refresh N times, then exit (default 0: until interrupted)")};
}

Subcommand AddStats(CLI::App& app) {
  auto id = std::make_shared<std::string>();
  CLI::App* stats = app.add_subcommand(
      "stats", "show the agent's measures: its running kernels (cpu, memory, pids, io, GPU memory), cores, memory "
               "and devices; or one kernel's measures");
  stats->add_option("kernel", *id, "kernel id (default: every running kernel and the agent's slice)");
  return {stats, [id](const Options& o, const AgentClient& a) { return slotctl::RunStats(*id, o, a); }, nullptr};
}

Subcommand AddTop(CLI::App& app) {
  auto args = std::make_shared<slotctl::RefreshArgs>();
  CLI::App* top = app.add_subcommand("top", "refresh `slotctl stats`, busiest kernel first, until interrupted");
  AddRefreshFlags(top, *args);
  return {top, [args](const Options& o, const AgentClient& a) { return slotctl::RunTop(*args, o, a); }, nullptr};
}

Subcommand AddNode(CLI::App& app) {
  auto args = std::make_shared<slotctl::NodeArgs>();
  CLI::App* node = app.add_subcommand(
      "node", "list this node's live agents (from its claims directory): pid, API, cores, memory, devices, kernels");
  node->add_option("--claims-dir", args->claims_dir,
                   std::string("the node's claims directory (default: --config's node.claims-dir, else ") +
                       std::string(slotd::kDefaultClaimsDir) + ")");
  CLI::Option* top = node->add_flag(
      "--top", args->top, "refresh a view of every live agent's kernels and their measures (GET /v1/stats of each)");
  for (CLI::Option* refresh_flag : AddRefreshFlags(node, args->refresh)) refresh_flag->needs(top);
  node->fallthrough();
  return {node, nullptr, [args](const Options& o) { return slotctl::RunNode(*args, o); }};
}

// `slotctl tls` (slotctl_tls.h), which talks to no agent.
Subcommand AddTls(CLI::App& app) {
  slotctl::TlsCommand tls = slotctl::AddTlsCommands(app);
  return {tls.app, nullptr, [run = tls.run](const Options&) { return run(); }};
}

// Runs `command`: with the run's one client of the agent, made here, when it talks to one.
int Run(const Subcommand& command, const Options& options) {
  if (command.local) return command.local(options);
  auto agent = AgentClient::Connect(options.target);
  if (!agent.ok()) return slotctl::Report(agent.failure());
  return command.with_agent(options, *agent);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"slotctl: talk to a slotd agent (its kernels, resources, logs), or list every agent of this node."};
  app.require_subcommand(1);
  app.footer(slotctl::ExitStatusHelp());
  app.set_version_flag("--version",
                       std::string("slotctl ") + slotd::kSlotdVersion + " (commit " + slotd::kSlotdCommit + ")",
                       "print the version and the source commit, and exit");
  Options options;
  AddGlobalFlags(app, options);
  const std::vector<Subcommand> commands = {
      AddPlain(app, "info", "show the agent, its slot capacity, use and devices", slotctl::RunInfo),
      AddPlain(app, "kernels", "list this agent's kernels", slotctl::RunKernels),
      AddPlain(app, "images", "list the node's images: size, last use, this agent's kernels on each",
               slotctl::RunImages),
      AddRun(app), AddCluster(app), AddPull(app), AddRemove(app), AddDevice(app), AddDrain(app), AddUndrain(app), AddRestart(app), AddExec(app), AddLogs(app), AddNode(app), AddStats(app),
      AddTop(app), AddTls(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that exit 0; every other is a usage error.
    const int status = app.exit(e);
    return status == 0 ? 0 : static_cast<int>(slotctl::Exit::kUsage);
  }
  try {
    for (const Subcommand& command : commands)
      if (command.app->parsed()) return Run(command, options);
  } catch (const std::exception& e) {
    // Nothing above throws by design; this keeps a bug from ending in a core dump.
    return slotctl::Report({slotctl::Exit::kFailure, std::string("unexpected error: ") + e.what()});
  }
  return static_cast<int>(slotctl::Exit::kUsage);  // unreachable: CLI11 requires one subcommand
}
