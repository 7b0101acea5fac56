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
};

// Reads the host under `root` ("/"; tests pass a tree with proc/self/mountinfo
// and run/systemd/system): its cgroup mounts and whether systemd runs it.
CgroupHost DetectCgroupHost(const std::string& root = "/");

// One line for each thing that makes `host` hard or impossible to measure:
// no cgroup mounted, the hybrid layout. Each says what is wrong and what to
// do; empty: nothing.
std::vector<std::string> CgroupLayoutWarnings(const CgroupHost& host);

// The same for an engine of `host`, from its info: the cgroupfs driver on a
// cgroup v2 host that systemd manages.
std::vector<std::string> EngineCgroupWarnings(const CgroupHost& host, const EngineInfo& engine);

}  // namespace slotd
