// What about a host's cgroups keeps an agent from measuring its kernels, or
// lets their cgroups be disturbed: `slotd check` warns of it, and the agent
// logs it when it starts. A pure rule over what was read (DetectCgroupHost)
// and what the engine says of itself.
#pragma once

#include <string>
#include <vector>

#include "model/container.h"
#include "stats/cgroup.h"

namespace slotd {

// A host's cgroups as an agent sees them.
struct CgroupHost {
  CgroupLayout layout = CgroupLayout::kNone;
  bool systemd_manages = false;  // systemd is the init (<root>/run/systemd/system exists)
  // On a v1 or hybrid host, the measured controllers no v1 hierarchy has
  // (CgroupReader::UnmountedV1Controllers); empty otherwise.
  std::vector<std::string> unmounted_v1_controllers;
};

// Reads the host under `root` ("/"; tests pass a tree with proc/self/mountinfo
// and run/systemd/system): its cgroup mounts and whether systemd runs it.
CgroupHost DetectCgroupHost(const std::string& root = "/");

// One line for each thing that makes `host` hard or impossible to measure:
// no cgroup mounted, or a v1 or hybrid host where a measured controller is
// in no v1 hierarchy (systemd's hybrid layout with every controller on v1
// and an empty v2 hierarchy is measured as v1, and is not one). Each says
// what is wrong and what to do; empty: nothing.
std::vector<std::string> CgroupLayoutWarnings(const CgroupHost& host);

// The same for an engine of `host`, from its info: the cgroupfs driver on a
// cgroup v2 host that systemd manages.
std::vector<std::string> EngineCgroupWarnings(const CgroupHost& host, const EngineInfo& engine);

}  // namespace slotd
