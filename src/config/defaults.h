// The defaults of agent.toml that other programs need too: slotctl falls
// back on them when it is given no config file. Each is stated here once;
// the config tables (agent_schema.cc) and the Config structs use these names.
#pragma once

#include <string>
#include <string_view>

namespace slotd {

// [agent] rpc-listen-addr: the HTTP API's address when the file names none.
inline constexpr std::string_view kDefaultRpcHost = "127.0.0.1";
inline constexpr int kDefaultRpcPort = 6001;

// "http://127.0.0.1:6001": the API of an agent that kept the default address.
inline std::string DefaultApiUrl() {
  return "http://" + std::string(kDefaultRpcHost) + ":" + std::to_string(kDefaultRpcPort);
}

// [node] claims-dir: where the agents of one node claim what they use.
inline constexpr std::string_view kDefaultClaimsDir = "/run/slotd/node";

// [agent] ipc-base-path: the directory of agent `id`'s unix socket and lock file.
inline std::string DefaultIpcBasePath(std::string_view id) { return "/run/slotd/" + std::string(id); }

// [agent] var-base-path: the directory of agent `id`'s persistent files.
inline std::string DefaultVarBasePath(std::string_view id) { return "/var/lib/slotd/" + std::string(id); }

// [container] docker-host: the Docker Engine when neither the file nor $DOCKER_HOST names one.
inline constexpr std::string_view kDefaultDockerHost = "unix:///var/run/docker.sock";

}  // namespace slotd
