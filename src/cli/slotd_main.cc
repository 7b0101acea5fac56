// slotd: the agent. `slotd --config FILE` runs one agent in the foreground;
// `slotd check FILE...` compares agent configs that will share one node;
// `slotd split --agents N --out DIR` writes such configs for this node.
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "model/kernel.h"
#include "cli/slotd_split.h"
#include "common/units.h"
#include "common/version.h"
#include "daemon/daemon.h"
#include "engine/docker/docker_engine.h"
#include "node/check.h"

namespace {

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
// that `node_cores` and `node_memory` give when not empty; with `focus`,
// only that file's problems count (CheckNodeConfigs). Returns 0 when
// there is no problem, 1 for problems, 2 when a file (or a flag) is invalid.
int CheckConfigs(const std::vector<std::string>& paths, const std::string& node_cores, const std::string& node_memory,
                 const std::string& focus) {
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
  // Each config's own engine, asked for its data root (mount-allow) and
  // whether it has the warm pools' images.
  const auto engine_for = [](const slotd::Config& config) -> slotd::Result<std::unique_ptr<slotd::ContainerEngine>> {
    auto engine = slotd::DockerEngine::FromHost(config.container.docker_host);
    if (!engine.ok()) return engine.status().WithPrefix("container.docker-host");
    return std::unique_ptr<slotd::ContainerEngine>(std::move(*engine));
  };
  const slotd::CgroupHost cgroups = slotd::DetectCgroupHost();
  const slotd::CheckReport report = slotd::CheckNodeConfigs(paths, host, engine_for, &cgroups, focus);
  std::cout << report.Text();
  return report.ExitCode();
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
      "range, CPU core or device, and checks that the memory shares fit in this node. A config with warm pools "
      "([[pool]]) has its engine asked for their images: a warning for each one it lacks. A host whose cgroups "
      "the agents cannot measure (none mounted, a measured controller in no v1 hierarchy, an engine's cgroupfs driver on a cgroup v2 host "
      "that systemd manages) is a warning too.\n"
      "With --for FILE (one of the files), only FILE's agent's problems count: its own, and its clashes with the "
      "others; another file that does not load is a note (the check before one agent's start, so that one "
      "agent's broken file stops no other agent).\n"
      "Exit status: 0 no problem, 1 problems (each printed with both files and the value), 2 a file does not load.");
  std::vector<std::string> check_paths;
  std::string node_cores, node_memory, check_focus;
  check->add_option("files", check_paths, "the agent.toml files of the node's agents")->required();
  check->add_option("--node-cores", node_cores,
                    "check for a node with these cores (e.g. 0-191) instead of this machine's cpuset");
  check->add_option("--node-memory", node_memory,
                    "check for a node with this much memory (e.g. 2t) instead of this machine's");
  check->add_option("--for", check_focus,
                    "count only this file's problems (one of the files): its own and its clashes with the others");
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
  if (*check) return CheckConfigs(check_paths, node_cores, node_memory, check_focus);
  if (*split) {
    split_options.by_numa = split_by == "numa";
    for (int i = 0; i < argc; ++i) split_options.command_line += (i == 0 ? "slotd" : " " + ShellWord(argv[i]));
    return slotd::RunSplit(split_options);
  }
  if (config_path.empty())
    return app.exit(CLI::RequiredError(
        "--config FILE (to run an agent; or `slotd check FILE...` to compare configs, `slotd split` to write them)"));
  return slotd::RunDaemon(config_path);
}
