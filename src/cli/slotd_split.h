// `slotd split`: writes the agent configs of N agents that share this node
// (or a node recorded under --sysfs-root), then checks them as `slotd check`
// does. The planning is node/split.h's; this is the command around it.
#pragma once

#include <string>

namespace slotd {

struct SplitOptions {
  int agents = 0;
  std::string out_dir;       // where <id>.toml files are written; made when missing
  bool by_numa = false;      // --by numa
  std::string base_config;   // empty: none (no devices, every key's default)
  std::string sysfs_root = "/";  // the root whose sys/ and proc/ describe the node
  bool force = false;        // overwrite non-empty files
  std::string command_line;  // as typed, for the files' header
};

// Runs `slotd split`: prints a summary of the agents and the check's result.
// Returns 0 when the written configs pass the check, 1 when it finds
// problems, 2 when nothing was written (a bad option, a base config that
// does not load, a node that cannot be divided so, files in the way).
int RunSplit(const SplitOptions& options);

}  // namespace slotd
