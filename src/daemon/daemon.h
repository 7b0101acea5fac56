// The agent daemon: what `slotd --config FILE` runs. Loads and checks the
// config, admits the agent to its node (daemon/admission.h), assembles the
// agent, its API, stats, watcher and etcd registration, serves until
// SIGTERM or SIGINT (SIGHUP reads the registry credentials again) and stops
// them in order, leaving the kernels running.
#pragma once

#include <string>

namespace slotd {

// Runs the agent of the agent.toml at `config_path` in the foreground.
// Returns the process's exit status: 0 after a clean stop, 1 when it cannot
// start (the reason logged and printed on stderr), 2 for an invalid config.
int RunDaemon(const std::string& config_path);

}  // namespace slotd
