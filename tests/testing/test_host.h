// The host the config tests load agent.toml files for.
#pragma once

#include "config/config.h"

namespace slotd {

// A 16-core (0-15), 64 GiB host named "testnode" without $DOCKER_HOST.
inline HostFacts TestHost() {
  HostFacts host;
  host.hostname = "testnode";
  for (int core = 0; core < 16; ++core) host.cpuset.push_back(core);
  host.memory_bytes = 64ull << 30;
  return host;
}

}  // namespace slotd
