#include "cli/slotd_split.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli/table.h"
#include "common/atomic_file.h"
#include "common/units.h"
#include "config/toml_reader.h"
#include "node/check.h"
#include "node/split.h"
#include "resources/agent_config.h"

namespace slotd {
namespace {

namespace fs = std::filesystem;

// Prints "slotd split: <what>" on stderr; returns 2.
int Refuse(const std::string& what) {
  std::cerr << "slotd split: " << what << "\n";
  return 2;
}

// The directory under which each agent gets <dir>/<id>: the parent of `path`
// when `path` ends in the base config's own id (the default /run/slotd/<id>),
// else `path` itself.
std::string PerAgentParent(const std::string& path, const std::string& base_id) {
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  return (p.filename() == base_id ? p.parent_path() : p).string();
}

// "2 cuda, 1 mock", or "-".
std::string DeviceSummary(const AgentPlan& plan) {
  std::string text;
  for (const auto& [kind, ids] : plan.devices) text += (text.empty() ? "" : ", ") + std::to_string(ids.size()) + " " + kind;
  return text.empty() ? "-" : text;
}

// The comment at the top of agent `index`'s file.
std::string Header(const SplitOptions& options, const AgentPlan& plan, size_t index, size_t count) {
  std::string header = "# Written by slotd split: " + OneLine(options.command_line) + "\n";
  header += "# Agent " + std::to_string(index + 1) + " of " + std::to_string(count) +
            (plan.numa_node ? " (NUMA node " + std::to_string(*plan.numa_node) + ")" : std::string()) +
            ". Check the set with slotd check after any edit.\n";
  return header;
}

// The base config, as a Config for its values and as the file's tables for
// the files to be written over.
struct BaseConfig {
  Config config;
  toml::table tables;
};

// Loads `path` with `node`'s facts; without a path, a config of defaults.
// Fails with the line to print.
Result<BaseConfig> LoadBase(const std::string& path, const HostFacts& node) {
  if (path.empty()) {
    Result<Config> defaults = ParseConfig("[agent]\nid = \"split\"\n", "(no --base-config)", node);
    if (!defaults.ok()) return defaults.status();
    return BaseConfig{std::move(*defaults), {}};
  }
  Result<std::string> text = ReadConfigFile(path);
  if (!text.ok()) return text.status().WithPrefix("--base-config");
  Result<Config> config = ParseConfig(*text, path, node);
  if (!config.ok())
    return Status::InvalidArgument("the base config " + path + " does not load:\n" + config.status().message() +
                                   "\nfix it (slotd --config " + path + " reports the same) and run slotd split again");
  Result<toml::table> tables = ParseToml(*text, path);
  if (!tables.ok()) return tables.status();
  return BaseConfig{std::move(*config), std::move(*tables)};
}

// What `options` asks PlanSplit to divide with `base`'s values: `devices`,
// and each agent's directories under the parents of the base's own.
SplitRequest SplitRequestFor(const SplitOptions& options, const Config& base, std::vector<SplitDevice> devices) {
  SplitRequest request;
  request.agents = options.agents;
  request.by_numa = options.by_numa;
  request.cores = base.resource.allowed_cores;
  request.memory_bytes = base.resource.memory_size;
  request.devices = std::move(devices);
  request.node_name = base.agent.node;
  request.rpc_host = base.agent.rpc_host;
  request.rpc_port = base.agent.rpc_port;
  request.port_first = base.container.port_range_start;
  request.port_last = base.container.port_range_end;
  request.ipc_parent = PerAgentParent(base.agent.ipc_base_path, base.agent.id);
  request.var_parent = PerAgentParent(base.agent.var_base_path, base.agent.id);
  if (!base.container.scratch_root.empty())
    request.scratch_parent = PerAgentParent(base.container.scratch_root, base.agent.id);
  return request;
}

// The file in --out of each of `plans`, in order. Fails with the line to
// print when --out exists and is not a directory, or, without --force, when
// any of the files exists and is not an empty regular file.
Result<std::vector<std::string>> SplitOutputPaths(const SplitOptions& options, const std::vector<AgentPlan>& plans) {
  std::error_code ec;
  if (fs::exists(options.out_dir, ec) && !fs::is_directory(options.out_dir, ec))
    return Status::InvalidArgument("--out " + options.out_dir + " exists and is not a directory; choose a directory");
  std::vector<std::string> paths, in_the_way;
  for (const AgentPlan& plan : plans) {
    const std::string path = (fs::path(options.out_dir) / (plan.id + ".toml")).string();
    paths.push_back(path);
    if (fs::exists(path, ec) && (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > 0))
      in_the_way.push_back(path);
  }
  if (!in_the_way.empty() && !options.force) {
    std::string list;
    for (const std::string& path : in_the_way) list += "\n  " + path;
    return Status::Conflict("these files exist and would be overwritten:" + list +
                            "\npass --force to overwrite them, or choose another --out");
  }
  return paths;
}

// Makes --out and writes the config of plans[i] to paths[i], in order. Fails
// with the line to print when the directory cannot be made or a file cannot
// be written (the files before it stay written).
Status WriteSplitConfigs(const SplitOptions& options, const std::vector<AgentPlan>& plans,
                         const std::vector<std::string>& paths, const BaseConfig& base) {
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  if (ec)
    return Status::Internal("--out " + options.out_dir + ": cannot make the directory: " + ec.message());
  for (size_t i = 0; i < plans.size(); ++i) {
    const AgentPlan& plan = plans[i];
    const Status written = WriteFileAtomically(
        paths[i], Header(options, plan, i, plans.size()) +
                      RenderAgentConfig(base.tables, plan, base.config.node.claims_dir, ""));
    if (!written.ok())
      return Status::Internal(written.message() + "; the files before it were written, those after it were not");
  }
  return Status::Ok();
}

// Prints a table of `plans`, each with its file in `paths`, and the shared
// `claims_dir` on stdout.
void PrintSplitTable(const std::vector<AgentPlan>& plans, const std::vector<std::string>& paths,
                     const std::string& claims_dir) {
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < plans.size(); ++i) {
    const AgentPlan& plan = plans[i];
    rows.push_back({plan.id, paths[i], plan.numa_node ? std::to_string(*plan.numa_node) : "-",
                    FormatCoreList(plan.cores) + " (" + std::to_string(plan.cores.size()) + ")",
                    DescribeSize(plan.memory_bytes), DeviceSummary(plan),
                    plan.rpc_port == 0 ? "any" : std::to_string(plan.rpc_port),
                    std::to_string(plan.port_first) + "-" + std::to_string(plan.port_last)});
  }
  std::cout << slotctl::FormatTable({"ID", "FILE", "NUMA", "CORES", "MEMORY", "DEVICES", "API PORT", "PORT RANGE"},
                                    rows);
  std::cout << "claims-dir " << claims_dir << " (shared)\n";
}

// Prints a note on stdout for each config (*.toml) in `out_dir` that is not
// one of `paths`, by name.
void NoteOtherConfigs(const std::string& out_dir, const std::vector<std::string>& paths) {
  std::error_code ec;
  std::vector<std::string> others;  // configs in the directory this run did not write
  for (const auto& entry : fs::directory_iterator(out_dir, ec))
    if (entry.path().extension() == ".toml" &&
        std::find(paths.begin(), paths.end(), entry.path().string()) == paths.end())
      others.push_back(entry.path().filename().string());
  std::sort(others.begin(), others.end());
  for (const std::string& other : others)
    std::cout << "note: " << out_dir << " also has " << other
              << ", not written by this run; remove it before running its agents or slotd check on the directory\n";
}

}  // namespace

int RunSplit(const SplitOptions& options) {
  if (options.agents < 1) return Refuse("--agents " + std::to_string(options.agents) + ": give at least 1 agent");

  const HostFacts host = HostFacts::Detect();
  std::error_code ec;
  const bool live = fs::equivalent(options.sysfs_root, "/", ec);
  Result<NodeLayout> layout =
      ReadNodeLayout(options.sysfs_root, live ? std::optional<std::vector<int>>(host.cpuset) : std::nullopt);
  if (!layout.ok()) return Refuse("--sysfs-root " + options.sysfs_root + ": " + layout.status().message());
  const HostFacts node = layout->AsHostFacts(host);

  Result<BaseConfig> base = LoadBase(options.base_config, node);
  if (!base.ok()) return Refuse(base.status().message());

  Result<std::vector<SplitDevice>> devices = ListSplitDevices(base->config);
  if (!devices.ok()) return Refuse("cannot list the devices of the base config: " + devices.status().message());

  Result<std::vector<AgentPlan>> plans =
      PlanSplit(*layout, SplitRequestFor(options, base->config, std::move(*devices)));
  if (!plans.ok()) return Refuse(plans.status().message());

  // Nothing is written unless every file can be.
  Result<std::vector<std::string>> paths = SplitOutputPaths(options, *plans);
  if (!paths.ok()) return Refuse(paths.status().message());
  if (Status written = WriteSplitConfigs(options, *plans, *paths, *base); !written.ok())
    return Refuse(written.message());

  PrintSplitTable(*plans, *paths, base->config.node.claims_dir);
  NoteOtherConfigs(options.out_dir, *paths);
  const CheckReport report = CheckNodeConfigs(*paths, live ? host : node);
  std::cout << report.Text();
  return report.ExitCode();
}

}  // namespace slotd
