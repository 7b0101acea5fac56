// What `slotd --config` would refuse about a valid config on this host: its
// paths and its token file. One rule, two callers: the agent checks it
// before it starts, and `slotd check` reports it for each file.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace slotd {

// Every problem of `config`'s paths on this host, one line each, naming the
// key, the path and what to do: var-base-path that is not a directory or is
// under /proc or /sys; ipc-base-path or claims-dir that is not a directory;
// an agent.sock path over the unix socket limit; a token-file that is
// missing, a directory or empty; a scratch-root that is or holds one of
// AgentOwnPaths (ipc, var, claims, token, registry-auth, etcd password, the
// config file, the engine's socket) or lies inside its ipc-base-path or
// claims-dir. Paths that do not exist yet are fine (the agent creates
// them). Empty when there is none.
std::vector<std::string> LocalProblems(const Config& config);

// A path of the node that is the agent's own, or its engine's, with what it
// is ("the agent's ipc-base-path"), for messages.
struct OwnPath {
  std::string path;
  std::string what;
  std::string key;                // the config key that names it ("agent.ipc-base-path")
  bool may_hold_scratch = false;  // a scratch-root may lie inside it (var-base-path, a file)
};

// The agent's own paths (ipc-base-path, var-base-path, scratch root,
// claims-dir, token-file, registry-auth-file, its config file) and the
// engine's unix socket: what no kernel may mount, and no mount-allow entry
// may hold.
std::vector<OwnPath> AgentOwnPaths(const Config& config);

// Every [container] mount-allow entry that would let a kernel reach the
// node itself, one line each: an entry of /, /proc, /sys or /dev (or in
// them); a read-write entry over a system directory (/etc, /usr, /boot,
// /root, /var/lib, ...: the entry is in one, or holds one); an entry that
// holds one of AgentOwnPaths. Part of LocalProblems.
std::vector<std::string> MountAllowProblems(const Config& config);

// Every [container] mount-allow entry in or over `engine_root`, the engine's
// data root (its images', containers' and volumes' files, other tenants'
// included), one line each naming the entry and what to do. Checked at start
// and by `slotd check` once the engine names its data root.
std::vector<std::string> EngineRootProblems(const Config& config, const std::string& engine_root);

// What is unsafe but does not stop the agent, one line each, naming the key
// and what to do: a token-file or registry-auth-file that users other than
// its owner may read or write (mode & 077), and [container] ulimits above
// this process's own hard limits (of the agent when it runs them; of the
// shell when `slotd check` does). Empty when there is none.
std::vector<std::string> LocalWarnings(const Config& config);

}  // namespace slotd
