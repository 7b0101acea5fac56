#include "node/check.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/units.h"
#include "config/local_checks.h"
#include "node/claims.h"
#include "node/scratch_limits.h"
#include "resources/agent_config.h"
#include "resources/device_kinds.h"
#include "stats/cgroup_host.h"

namespace slotd {
namespace {

// The devices a config's allow-lists resolve to on this node.
struct ResolvedDevices {
  // kind ("cuda") -> the device ids the agent would own.
  std::map<std::string, std::vector<std::string>> ids;
  // Kinds that would take every device of the node (no allow-list) but whose
  // devices could not be listed here; such a kind clashes with any device of
  // the same kind in another config.
  std::set<std::string> every_device;
  // What could not be checked and why, one line each; not a problem.
  std::vector<std::string> notes;
  // An allow-list that names a device this node does not have (the kind's
  // own message), one line each.
  std::vector<std::string> missing;
};

// Resolves `config`'s device sections through their kinds.
ResolvedDevices ResolveDevices(const Config& config) {
  ResolvedDevices resolved;
  for (const DeviceKind& kind : DeviceKinds()) {
    auto section = config.resource.devices.by_kind.find(kind.name);
    if (section == config.resource.devices.by_kind.end()) continue;
    Result<CheckedDevices> checked = kind.check_devices(*section->second);
    if (!checked.ok()) {
      resolved.missing.push_back(checked.status().message());
      continue;
    }
    if (!checked->ids.empty()) resolved.ids[kind.name] = checked->ids;
    if (checked->every_device) resolved.every_device.insert(kind.name);
    if (!checked->note.empty()) resolved.notes.push_back(checked->note);
  }
  return resolved;
}

// One config that loaded, with what it would claim on this node.
struct LoadedConfig {
  Config config;
  ResolvedDevices devices;
  AgentClaims claims;
};

// "1 config", "3 configs".
std::string Count(size_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// Appends every line of `text` to `out`, each after `prefix`.
void AddLines(const std::string& prefix, const std::string& text, std::vector<std::string>& out) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) out.push_back(prefix + line);
}

// The problems of one pair: FindClashes' values, devices that one of them
// takes without an allow-list, and differing claims directories.
void ComparePair(const LoadedConfig& a, const LoadedConfig& b, std::vector<std::string>& problems) {
  const std::string both = a.config.path + " and " + b.config.path;
  for (const Clash& clash : FindClashes(a.claims, b.claims))
    problems.push_back("clash: " + both + " both claim " + clash.what + " " + clash.value);

  std::set<std::string> every = a.devices.every_device;
  every.insert(b.devices.every_device.begin(), b.devices.every_device.end());
  for (const std::string& plugin : every) {
    const bool a_all = a.devices.every_device.count(plugin) > 0, b_all = b.devices.every_device.count(plugin) > 0;
    const bool a_any = a_all || a.claims.devices.count(plugin) > 0;
    const bool b_any = b_all || b.claims.devices.count(plugin) > 0;
    if (!a_any || !b_any) continue;
    const std::string who = a_all && b_all ? "both take" : (a_all ? a.config.path : b.config.path) + " takes";
    problems.push_back("clash: " + both + " both claim " + plugin + " devices: " + who +
                       " every one (no resource." + plugin + ".allowed-devices)");
  }

  if (a.config.node.claims_dir != b.config.node.claims_dir)
    problems.push_back("mismatch: " + both + " name different node.claims-dir (" + a.config.node.claims_dir + ", " +
                       b.config.node.claims_dir + "), so their agents cannot see each other's claims");
}

// The problem when the memory shares add up to more than `node_memory`.
void CompareMemory(const std::vector<LoadedConfig>& loaded, uint64_t node_memory, std::vector<std::string>& problems) {
  uint64_t total = 0;
  std::string shares;
  for (const LoadedConfig& c : loaded) {
    total += c.config.resource.memory_size;
    shares += (shares.empty() ? "" : ", ") + c.config.path + " " + DescribeSize(c.config.resource.memory_size) +
              (c.config.resource.memory_size_explicit ? "" : " by default (node memory minus reserved-mem)");
  }
  if (total > node_memory)
    problems.push_back("clash: memory shares add up to " + DescribeSize(total) + ", more than the node's " +
                       DescribeSize(node_memory) + ": " + shares + "; lower resource.memory.size");
}

// The agents of a node collect images of one engine: marks that differ make
// the collection depend on which agent happens to run it.
void CompareImageGc(const std::vector<LoadedConfig>& loaded, std::vector<std::string>& notes) {
  auto marks = [](const LoadedConfig& c) {
    return std::to_string(c.config.container.image_gc_high) + "/" + std::to_string(c.config.container.image_gc_low);
  };
  for (size_t i = 1; i < loaded.size(); ++i) {
    if (marks(loaded[i]) == marks(loaded[0])) continue;
    notes.push_back("warning: " + loaded[0].config.path + " and " + loaded[i].config.path +
                    " collect the node's images at different marks (container.image-gc-high/low " + marks(loaded[0]) +
                    " and " + marks(loaded[i]) + "); give every agent of the node the same");
  }
}

}  // namespace

void CheckPoolImages(const Config& config, ContainerEngine& engine, CheckReport& report) {
  const std::string where = config.path + ": ";
  for (const PoolConfig& pool : config.pools) {
    Result<ImageInfo> image = engine.InspectImage(pool.image);
    if (image.ok()) continue;
    if (image.status().code() != Status::Code::kNotFound) {
      report.notes.push_back("note: " + where + "the warm pools' images could not be checked: the engine at " +
                             config.container.docker_host + " said: " + image.status().message());
      return;
    }
    const std::string pulls =
        config.container.auto_pull == PullPolicy::kNone
            ? "the pool stays empty until it is: load or pull it (slotctl pull " + pool.image +
                  ") or name another image"
            : "the agent pulls it before it makes the pool's first kernel ([container] auto-pull); pull it now "
              "(slotctl pull " + pool.image + ") to have the pool ready at start";
    report.warnings.push_back("warning: " + where + "[[pool]] \"" + pool.name + "\" names image " + pool.image +
                              ", which the engine at " + config.container.docker_host + " does not have; " + pulls);
  }
}

int CheckReport::ExitCode() const {
  if (!errors.empty()) return 2;
  return problems.empty() ? 0 : 1;
}

std::string CheckReport::Text() const {
  std::string text;
  for (const auto* lines : {&errors, &problems, &warnings, &notes})
    for (const std::string& line : *lines) text += line + "\n";
  const std::string configs = Count(static_cast<size_t>(files), "config");
  if (!errors.empty()) {
    text += "slotd check: " + std::to_string(files - loaded) + " of " + configs +
            " did not load; fix the errors above and run slotd check again";
    if (loaded > 1)
      text += " (the " + std::to_string(loaded) + " that loaded have " + Count(problems.size(), "problem") + ")";
    return text + "\n";
  }
  if (!problems.empty())
    return text + "slotd check: " + Count(problems.size(), "problem") + " among " + configs +
           "; give each agent of the node its own id, API port, ipc-base-path, var-base-path, port-range, cores and "
           "devices, all of them the same node.claims-dir, and memory shares that fit the node\n";
  const std::string mind = warnings.empty() ? "notes" : notes.empty() ? "warnings" : "warnings and notes";
  return text + "slotd check: " + configs + ", no clashes: they can share one node" +
         (warnings.empty() && notes.empty() ? "" : " (mind the " + mind + " above)") + "\n";
}

namespace {

// The checks of `config` (loaded from `path`) that ask its engine
// (`engine_for`): its data root against the mount-allow entries, its cgroup
// driver against the host's cgroups (with `cgroups`), its images against
// the warm pools'.
void CheckWithEngine(const std::string& path, const Config& config, const EngineFor& engine_for,
                     const CgroupHost* cgroups, CheckReport& report) {
  std::string unchecked;  // what goes unchecked without the engine's info, for a note
  auto add = [](std::string& list, const char* item) { list += (list.empty() ? "" : ", ") + std::string(item); };
  if (!config.container.mount_allow.empty()) add(unchecked, "its mount-allow entries against the engine's data root");
  if (cgroups) add(unchecked, "the engine's cgroup driver against the host's");
  Result<std::unique_ptr<ContainerEngine>> engine = engine_for(config);
  if (!engine.ok()) {
    std::string without_engine = unchecked;
    if (!config.pools.empty()) add(without_engine, "its warm pools' images");
    report.notes.push_back("note: " + path + ": its engine could not be asked, so these were not checked: " +
                           without_engine + ": " + engine.status().message());
    return;
  }
  if (!unchecked.empty()) {
    Result<EngineInfo> info = (*engine)->Info();
    if (!info.ok()) {
      report.notes.push_back("note: " + path + ": not checked: " + unchecked + ": " + info.status().message() +
                             " (start the engine and check again)");
    } else {
      if (!config.container.mount_allow.empty())
        for (const std::string& problem : EngineRootProblems(config, info->data_root))
          report.problems.push_back("problem: " + path + ": " + problem);
      if (cgroups)
        for (const std::string& warning : EngineCgroupWarnings(*cgroups, *info))
          report.warnings.push_back("warning: " + path + ": " + warning);
    }
  }
  if (!config.pools.empty()) CheckPoolImages(config, **engine, report);
}

}  // namespace

CheckReport CheckNodeConfigs(const std::vector<std::string>& paths, const HostFacts& host,
                             const EngineFor& engine_for, const CgroupHost* cgroups, const std::string& focus) {
  CheckReport report;
  std::error_code focus_error;
  const std::filesystem::path focus_canonical =
      focus.empty() ? std::filesystem::path() : std::filesystem::weakly_canonical(focus, focus_error);
  // Whether `path` is the focus's file (every file is, without a focus).
  auto counts = [&](const std::string& path) {
    if (focus.empty()) return true;
    std::error_code ec;
    const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
    return path == focus || (!ec && !focus_error && canonical == focus_canonical);
  };
  if (!focus.empty() && std::none_of(paths.begin(), paths.end(), counts))
    report.errors.push_back("error: " + focus + " is not one of the files given; give it among them");
  size_t focus_index = SIZE_MAX;  // in `loaded`, once loaded
  // The host's own layout once (its engines' drivers are per config, below).
  if (cgroups)
    for (const std::string& warning : CgroupLayoutWarnings(*cgroups))
      report.warnings.push_back("warning: this node: " + warning);
  report.files = static_cast<int>(paths.size());
  std::vector<LoadedConfig> loaded;
  std::map<std::filesystem::path, std::string> seen;  // canonical path -> the path as given
  for (const std::string& path : paths) {
    std::error_code ec;
    const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
    if (!ec) {
      auto [it, inserted] = seen.emplace(canonical, path);
      if (!inserted) {
        report.errors.push_back("error: " + path + " is the same file as " + it->second + "; list each config once");
        continue;
      }
    }
    auto config = LoadConfig(path, host);
    const bool mine = counts(path);
    if (!config.ok()) {
      if (mine)
        AddLines("error: ", config.status().message(), report.errors);
      else
        report.notes.push_back("note: " + path + " does not load, so " + focus +
                               " was checked without it (its own agent's start will say why)");
      continue;
    }
    if (!mine) {  // another agent's file: only its claims, to compare the focus's with
      ResolvedDevices devices = ResolveDevices(*config);
      AgentClaims claims = ClaimsOf(*config, devices.ids);
      loaded.push_back({std::move(*config), std::move(devices), std::move(claims)});
      continue;
    }
    if (!focus.empty()) focus_index = loaded.size();
    for (const std::string& problem : LocalProblems(*config)) report.problems.push_back("problem: " + path + ": " + problem);
    for (const std::string& problem : ScratchProblems(*config)) report.problems.push_back("problem: " + path + ": " + problem);
    for (const std::string& warning : LocalWarnings(*config)) report.warnings.push_back("warning: " + path + ": " + warning);
    if (config->container.scratch_size > 0 || config->container.scratch_type == ScratchType::kHostFile)
      report.notes.push_back("note: " + path + ": " + ScratchAbilities(*config));
    if (engine_for && (cgroups || !config->container.mount_allow.empty() || !config->pools.empty()))
      CheckWithEngine(path, *config, engine_for, cgroups, report);
    ResolvedDevices devices = ResolveDevices(*config);
    for (const std::string& missing : devices.missing) report.problems.push_back("missing: " + path + ": " + missing);
    for (const std::string& note : devices.notes) report.notes.push_back("note: " + path + ": " + note);
    AgentClaims claims = ClaimsOf(*config, devices.ids);
    loaded.push_back({std::move(*config), std::move(devices), std::move(claims)});
  }
  report.loaded = static_cast<int>(loaded.size());

  for (size_t i = 0; i < loaded.size(); ++i)
    for (size_t j = i + 1; j < loaded.size(); ++j)
      if (focus.empty() || i == focus_index || j == focus_index) ComparePair(loaded[i], loaded[j], report.problems);
  CompareMemory(loaded, host.memory_bytes, report.problems);
  CompareImageGc(loaded, report.notes);
  return report;
}

}  // namespace slotd
