// `slotd check`: agent configs validated as a set of agents that will share
// one node, before any of them starts. It compares files only: claims in a
// claims directory (live or dead) play no part.
//
// Each file is loaded on its own first (LoadConfig); then every pair of the
// files that loaded is compared through ClaimsOf/FindClashes (agent id, fixed
// API port, ipc and var paths, port range, CPU cores, devices), their
// node.claims-dir must agree, and their memory shares must fit in the node.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "stats/cgroup_host.h"

namespace slotd {

// What `slotd check` found. Each line is printed as is, in member order.
struct CheckReport {
  int files = 0;   // config files given
  int loaded = 0;  // of them, those that loaded and were compared
  // "error: ...": a file that does not load (LoadConfig's lines), or is given twice.
  std::vector<std::string> errors;
  // "clash: a.toml and b.toml both claim cpu cores 2-3", "missing: ...": what
  // stops these agents from sharing the node; "problem: a.toml: ...": what
  // stops one of them from starting here (LocalProblems).
  std::vector<std::string> problems;
  // "warning: a.toml: ...": what is unsafe but does not stop the agent
  // (LocalWarnings); the exit status does not count them.
  std::vector<std::string> warnings;
  // "note: ...": what could not be checked, and why.
  std::vector<std::string> notes;

  // 2 when a file does not load, else 1 when there are problems, else 0.
  int ExitCode() const;
  // Every error, problem, warning and note, one per line, then one summary
  // line that says what to do.
  std::string Text() const;
};

// The engine a config names ([container] docker-host), for the checks that
// ask it; the error when it cannot be made.
using EngineFor = std::function<Result<std::unique_ptr<ContainerEngine>>(const Config&)>;

// Loads each of `paths` with `host`'s facts, resolves each loaded config's
// device allow-lists on this node through its device kinds
// (DeviceKind::check_devices), then compares the configs as agents of one
// node whose memory is host.memory_bytes.
// With `engine_for`, each config's own engine is asked, when the config
// has what needs it: its data root against mount-allow entries
// (EngineRootProblems), its images against the warm pools'
// (CheckPoolImages), and, with `cgroups`, its cgroup driver against the
// host's; an engine that cannot be asked is a note. With `cgroups` (the
// node's, DetectCgroupHost), a layout the agents cannot measure is a
// warning too (CgroupLayoutWarnings, EngineCgroupWarnings).
// With `focus` (one of `paths`), only that agent's own problems count: its
// load errors, its local problems and warnings, its clashes with each other
// file and the node's memory; another file that does not load is a note
// (the check goes on without it), and clashes between two other files are
// not looked for. This is the check before one agent's start: another
// agent's broken file must not stop it.
CheckReport CheckNodeConfigs(const std::vector<std::string>& paths, const HostFacts& host,
                             const EngineFor& engine_for = {}, const CgroupHost* cgroups = nullptr,
                             const std::string& focus = "");

// Adds to `report` a warning for each [[pool]] of `config` whose image
// `engine` does not have, saying what to do (the agent makes none of its
// kernels until the image is there); a note, once, when the engine cannot
// say.
void CheckPoolImages(const Config& config, ContainerEngine& engine, CheckReport& report);

}  // namespace slotd
