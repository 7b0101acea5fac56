// slotd: the agent. `slotd --config FILE` runs one agent in the foreground;
// `slotd check FILE...` compares agent configs that will share one node;
// `slotd split --agents N --out DIR` writes such configs for this node.
#include <malloc.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "node/engine_lease.h"
#include "agent/foreign_holders.h"
#include "agent/kernel.h"
#include "agent/watcher.h"
#include "api/server.h"
#include "cli/slotd_split.h"
#include "common/lock_file.h"
#include "common/token_file.h"
#include "common/units.h"
#include "common/version.h"
#include "config/config.h"
#include "config/local_checks.h"
#include "engine/docker/docker_engine.h"
#include "fleet/agent_document.h"
#include "fleet/etcd_client.h"
#include "fleet/registrar.h"
#include "node/check.h"
#include "node/scratch_limits.h"
#include "node/claims.h"
#include "resources/agent_config.h"
#include "stats/collector.h"

namespace {

using slotd::Status;

// Sets up stderr logging in `format` (text|json) at `level`.
void SetUpLogging(const std::string& format, const std::string& level) {
  auto logger = spdlog::stderr_color_mt("slotd");
  if (format == "json")
    logger->set_pattern(R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%v"})");
  else
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

// The device claims of `plugins` (ResourcePlugin::ClaimedDevices), by plugin name; plugins without devices are left out.
std::map<std::string, std::vector<std::string>> ClaimedDevices(
    const std::vector<std::unique_ptr<slotd::ResourcePlugin>>& plugins) {
  std::map<std::string, std::vector<std::string>> devices;
  for (const auto& plugin : plugins)
    if (!plugin->ClaimedDevices().empty()) devices[plugin->Name()] = plugin->ClaimedDevices();
  return devices;
}

// `word` as a shell would need it written: as is when it is made of safe
// characters only, else in single quotes.
std::string ShellWord(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                           "0123456789-_./=:,@+") == std::string::npos;
  if (safe) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs `slotd check`: prints every problem of `paths` as agents of one node
// and a summary. The node is this machine, except for the cores and memory
// that `node_cores` and `node_memory` give when not empty. Returns 0 when
// there is no problem, 1 for problems, 2 when a file (or a flag) is invalid.
int CheckConfigs(const std::vector<std::string>& paths, const std::string& node_cores, const std::string& node_memory) {
  slotd::HostFacts host = slotd::HostFacts::Detect();
  if (!node_cores.empty()) {
    auto cores = slotd::ParseCoreList(node_cores);
    if (!cores.ok()) return std::cerr << "slotd check: --node-cores: " << cores.status().message() << "\n", 2;
    host.cpuset = *cores;
  }
  if (!node_memory.empty()) {
    auto bytes = slotd::ParseSize(node_memory);
    if (!bytes.ok()) return std::cerr << "slotd check: --node-memory: " << bytes.status().message() << "\n", 2;
    host.memory_bytes = *bytes;
  }
  const slotd::CheckReport report = slotd::CheckNodeConfigs(paths, host);
  std::cout << report.Text();
  return report.ExitCode();
}

// Runs the agent until SIGTERM/SIGINT. Returns the process exit status.
// Process settings a long-running agent needs: memory freed by large
// requests goes back to the system (a fixed mmap threshold, so big buffers
// are mapped and unmapped, and few malloc arenas, so threads do not each
// keep their own freed memory), and the open-file limit is raised to its
// hard maximum, so [api] max-connections is not cut short by it.
void SetUpProcess() {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_ARENA_MAX, 2);
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

// What the stats loop measures: the agent's running kernels, their
// containers and the devices they hold.
std::vector<slotd::StatsTarget> StatsTargetsOf(const slotd::Agent& agent) {
  std::vector<slotd::StatsTarget> targets;
  for (slotd::Agent::RunningKernel& kernel : agent.RunningKernels())
    targets.push_back({std::move(kernel.kernel_id), std::move(kernel.container_id), std::move(kernel.devices)});
  return targets;
}

// The agent as its etcd registration shows it, with `address` ("host:port")
// as its API address: ids, drain, each slot's capacity/used/free, the
// devices' health, and the kernels not yet ended.
slotd::AgentDocument FleetDocumentOf(const slotd::Agent& agent, const slotd::Config& config,
                                     const std::string& address) {
  slotd::AgentDocument doc;
  doc.id = config.agent.id;
  doc.node = config.agent.node;
  doc.address = address;
  doc.version = slotd::kSlotdVersion;
  doc.scaling_group = config.agent.scaling_group;
  doc.draining = agent.Draining().draining;
  doc.SetResources(agent.DescribeResources());
  doc.kernels = agent.ActiveKernels();
  return doc;
}

int RunAgent(const std::string& config_path) {
  SetUpProcess();
  const slotd::HostFacts host = slotd::HostFacts::Detect();
  auto config = slotd::LoadConfig(config_path, host);
  if (!config.ok()) {
    std::cerr << "slotd: invalid configuration:\n" << config.status().message() << "\n";
    return 2;
  }
  auto fail = [](const Status& s) {
    spdlog::critical("cannot start: {}", s.message());
    std::cerr << "slotd: cannot start: " << s.message() << "\n";
    return 1;
  };
  std::vector<std::string> problems = slotd::LocalProblems(*config);
  for (std::string& problem : slotd::ScratchProblems(*config)) problems.push_back(std::move(problem));
  if (!problems.empty()) {
    std::string text;
    for (const std::string& problem : problems) text += (text.empty() ? "" : "\n  ") + problem;
    return fail(Status::InvalidArgument(text));
  }
  for (const std::string& warning : slotd::LocalWarnings(*config)) spdlog::warn("{}", warning);
  // With [etcd]: an agent id registered anywhere in the cluster is refused
  // before this agent touches anything; the agent registers once it serves.
  std::optional<slotd::EtcdClient> etcd;
  std::string etcd_key, etcd_lease_file;
  if (config->etcd) {
    auto options = slotd::EtcdOptionsFor(*config->etcd);
    if (!options.ok()) return fail(options.status());
    etcd.emplace(*options);
    etcd_key = slotd::AgentKey(config->etcd->key_namespace, config->agent.id);
    etcd_lease_file = config->agent.var_base_path + "/etcd-lease";
    if (Status s = slotd::CheckAgentIdFree(*etcd, etcd_key, etcd_lease_file); !s.ok()) return fail(s);
  }
  const std::string& ipc = config->agent.ipc_base_path;
  if (Status s = slotd::MakeDirs(ipc); !s.ok()) return fail(s.WithPrefix("agent.ipc-base-path"));
  if (Status s = slotd::MakeDirs(config->agent.var_base_path); !s.ok())
    return fail(s.WithPrefix("agent.var-base-path"));
  auto lock = slotd::LockFile::Acquire(ipc + "/agent.lock");
  if (!lock.ok())
    return fail(lock.status().WithPrefix("another agent uses ipc-base-path " + ipc +
                                         "; give each agent its own ipc-base-path"));

  // The TCP API never goes without a token: without token-file, the agent's own.
  std::string token;
  if (config->agent.token_file) {
    auto read = slotd::ReadTokenFile(*config->agent.token_file);
    if (!read.ok()) return fail(read.status().WithPrefix("agent.token-file"));
    token = *read;
  } else {
    const std::string path = slotd::GeneratedTokenPath(config->agent.var_base_path);
    auto made = slotd::ReadOrMakeToken(path);
    if (!made.ok()) return fail(made.status().WithPrefix("the agent's own API token (no agent.token-file)"));
    token = *made;
    spdlog::info("no [agent] token-file: requests on TCP need the token in {} (mode 0600; slotctl --config reads it)",
                 path);
  }

  auto engine = slotd::DockerEngine::FromHost(config->container.docker_host);
  if (!engine.ok()) return fail(engine.status().WithPrefix("container.docker-host"));
  auto version = (*engine)->Version();
  if (!version.ok())
    return fail(version.status().WithPrefix("cannot reach the Docker engine at " + config->container.docker_host +
                                            " (start it, or set container.docker-host or DOCKER_HOST)"));
  spdlog::info("engine {} at {}", *version, config->container.docker_host);

  // Block the signals the agent waits for before any thread starts, so only
  // sigwait sees them: the stop signals, and SIGHUP to read the registry
  // credentials again.
  sigset_t wait_signals;
  sigemptyset(&wait_signals);
  sigaddset(&wait_signals, SIGTERM);
  sigaddset(&wait_signals, SIGINT);
  sigaddset(&wait_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &wait_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto plugins = slotd::MakePlugins(*config, host);
  if (!plugins.ok()) return fail(plugins.status());

  const slotd::AgentClaims mine = slotd::ClaimsOf(*config, ClaimedDevices(*plugins));
  auto claims = slotd::NodeClaims::Register(config->node.claims_dir, mine, host.memory_bytes,
                                            [&] { return slotd::CheckForeignHolders(**engine, mine); });
  if (!claims.ok()) return fail(claims.status());
  auto lease = slotd::EngineLease::Take(
      **engine, {config->agent.id, config->node.claims_dir, config->agent.node, static_cast<int>(getpid())},
      &slotd::NodeClaims::IsLive);
  if (!lease.ok()) return fail(lease.status());

  slotd::EventHub hub;
  slotd::Agent agent(*config, **engine, std::move(*plugins), hub);
  if (Status s = agent.LoadRegistryCredentials(); !s.ok()) return fail(s);
  if (Status s = agent.Restore(); !s.ok()) return fail(s);

  slotd::StatsCollector::Options stats;
  stats.agent_id = config->agent.id;
  stats.stats_type = config->container.stats_type;
  stats.interval = config->container.stats_interval;
  stats.cores = config->resource.allowed_cores;
  stats.memory_share_bytes = config->resource.memory_size;
  stats.unmetered_devices = agent.UnmeteredDevices();
  slotd::StatsCollector collector(stats, [&agent] { return StatsTargetsOf(agent); }, **engine, agent.DeviceMeters());

  slotd::http::ServerOptions limits;
  limits.max_connections = config->api.max_connections;
  limits.request_timeout = config->api.request_timeout;
  limits.max_body_bytes = config->api.max_body_size;
  slotd::ApiServer api(agent, hub, collector, token, limits, config->api.max_exec_sessions);
  if (Status s = api.Bind(config->agent.rpc_host, config->agent.rpc_port, ipc + "/agent.sock"); !s.ok())
    return fail(s);
  if (Status s = (*claims)->SetApiPort(api.port()); !s.ok()) return fail(s);
  std::optional<slotd::Registrar> registrar;
  if (etcd) {
    const std::string address = api.AdvertisedAddress();
    registrar.emplace(*etcd,
                      slotd::Registrar::Options{
                          etcd_key, std::chrono::duration_cast<std::chrono::seconds>(config->etcd->lease_ttl),
                          etcd_lease_file},
                      [&agent, &config, address] { return FleetDocumentOf(agent, *config, address); });
    if (Status s = registrar->RegisterOnce(); !s.ok()) return fail(s);
    api.ShowRegistration(&*registrar);
  }
  slotd::Watcher watcher(agent, **engine, std::chrono::seconds(10));
  watcher.Start();
  collector.Start();
  api.Start();
  if (registrar) registrar->Start();
  spdlog::info("slotd ready: agent {} api http://{}:{} socket {}/agent.sock pid {}", config->agent.id,
               config->agent.rpc_host, api.port(), ipc, getpid());

  int signal_number = 0;
  while (sigwait(&wait_signals, &signal_number) == 0 && signal_number == SIGHUP) {
    if (Status s = agent.LoadRegistryCredentials(); !s.ok())
      spdlog::error("SIGHUP: {}; the credentials read before stay in use", s.message());
    else
      spdlog::info("SIGHUP: read the registry credentials again");
  }
  spdlog::info("received {}; shutting down (kernels keep running)", strsignal(signal_number));
  if (registrar) registrar->Stop(/*deregister=*/true);  // first, so that no scheduler picks this agent any more
  api.Stop();
  collector.Stop();
  watcher.Stop();
  agent.ApplyDeviceHealth();  // the latest health marks are recorded before the agent goes
  (*lease)->Release();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"slotd: a compute-node agent that runs kernels in containers, each with an exclusive slice of the node.\n"
               "Several agents can share one node; see docs/multi-agent.md."};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("slotd ") + slotd::kSlotdVersion + " (commit " + slotd::kSlotdCommit +
                                        "), label format " + std::to_string(slotd::label::kCurrentFormat),
                       "print the version, the source commit and the container label format, and exit");
  std::string config_path, log_format = "text", log_level = "info";
  auto* config_option = app.add_option("--config,-c", config_path, "run the agent of this agent.toml in the foreground")
                            ->check(CLI::ExistingFile);
  app.add_option("--log-format", log_format, "log format on stderr")->check(CLI::IsMember({"text", "json"}));
  app.add_option("--log-level", log_level, "least severe level logged")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));

  auto* check = app.add_subcommand("check", "validate agent configs as a set of agents that will share this node");
  check->footer(
      "Loads each file, then compares every pair for a shared agent id, API port, ipc or var path, overlapping port "
      "range, CPU core or device, and checks that the memory shares fit in this node.\n"
      "Exit status: 0 no problem, 1 problems (each printed with both files and the value), 2 a file does not load.");
  std::vector<std::string> check_paths;
  std::string node_cores, node_memory;
  check->add_option("files", check_paths, "the agent.toml files of the node's agents")->required();
  check->add_option("--node-cores", node_cores,
                    "check for a node with these cores (e.g. 0-191) instead of this machine's cpuset");
  check->add_option("--node-memory", node_memory,
                    "check for a node with this much memory (e.g. 2t) instead of this machine's");
  check->excludes(config_option);

  auto* split = app.add_subcommand("split", "divide this node (or one recorded under --sysfs-root) into the configs "
                                            "of N agents, and check them");
  split->footer(
      "Reads the cores and memory of each NUMA node from sysfs and the devices through the base config's device "
      "sections, and writes <out>/<node>-<i>.toml for i = 0..N-1: each agent its own id, API port (the base's + i), "
      "ipc, var and scratch paths (<dir>/<id>), part of the port range, cores (the base's allowed-cores, or every "
      "core but the last reserved-cpu), memory share (of the node's memory minus reserved-mem) and devices, all "
      "of them the base's claims-dir. Then runs slotd check on them.\n"
      "Exit status: 0 written and checked, 1 written but the check found problems, 2 nothing written.");
  slotd::SplitOptions split_options;
  std::string split_by;
  split->add_option("--agents,-n", split_options.agents, "how many agents")->required();
  split->add_option("--out,-o", split_options.out_dir, "the directory to write the configs to (made if missing)")
      ->required();
  split->add_option("--by", split_by,
                    "numa: each agent's cores and devices on one NUMA node (N a multiple of the NUMA nodes)")
      ->check(CLI::IsMember({"numa"}));
  split->add_option("--base-config", split_options.base_config,
                    "an agent.toml giving every key that is not divided, and the device sections to divide")
      ->check(CLI::ExistingFile);
  split->add_option("--sysfs-root", split_options.sysfs_root,
                    "read the node from DIR/sys/devices/system/node and DIR/proc/meminfo, for tests and what-if "
                    "planning (default /: this machine)");
  split->add_flag("--force", split_options.force, "overwrite existing files");
  split->excludes(config_option);

  CLI11_PARSE(app, argc, argv);
  SetUpLogging(log_format, log_level);
  if (*check) return CheckConfigs(check_paths, node_cores, node_memory);
  if (*split) {
    split_options.by_numa = split_by == "numa";
    for (int i = 0; i < argc; ++i) split_options.command_line += (i == 0 ? "slotd" : " " + ShellWord(argv[i]));
    return slotd::RunSplit(split_options);
  }
  if (config_path.empty())
    return app.exit(CLI::RequiredError(
        "--config FILE (to run an agent; or `slotd check FILE...` to compare configs, `slotd split` to write them)"));
  return RunAgent(config_path);
}
