#include "config/local_checks.h"

#include <sys/un.h>

#include <filesystem>
#include <string_view>
#include <utility>

#include "common/paths.h"
#include "common/token_file.h"

namespace slotd {
namespace {

// A problem when `path` exists and is not a directory.
void ExpectDirectory(const std::string& key, const std::string& path, std::vector<std::string>& problems) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || status.type() == std::filesystem::file_type::not_found) return;
  if (status.type() != std::filesystem::file_type::directory)
    problems.push_back(key + ": " + path + " exists and is not a directory; remove it or choose another path");
}

}  // namespace

std::vector<std::string> LocalProblems(const Config& config) {
  std::vector<std::string> problems;
  const std::string& var = config.agent.var_base_path;
  for (const char* pseudo : {"/proc", "/sys", "/dev"}) {
    if (IsWithin(var, pseudo))
      problems.push_back("agent.var-base-path: " + var + " is on " + pseudo +
                         ", which holds no files of its own; choose a path such as /var/lib/slotd/" + config.agent.id);
  }
  ExpectDirectory("agent.var-base-path", var, problems);
  ExpectDirectory("agent.ipc-base-path", config.agent.ipc_base_path, problems);
  ExpectDirectory("node.claims-dir", config.node.claims_dir, problems);

  const std::string socket = config.agent.ipc_base_path + "/agent.sock";
  constexpr size_t kSocketPathMax = sizeof(sockaddr_un::sun_path) - 1;
  if (socket.size() > kSocketPathMax)
    problems.push_back("agent.ipc-base-path: the API socket " + socket + " would be " + std::to_string(socket.size()) +
                       " bytes long, over the unix limit of " + std::to_string(kSocketPathMax) +
                       "; choose a shorter ipc-base-path");
  if (config.agent.token_file) {
    Result<std::string> token = ReadTokenFile(*config.agent.token_file);
    if (!token.ok()) problems.push_back("agent.token-file: " + token.status().message());
  }
  for (std::string& problem : MountAllowProblems(config)) problems.push_back(std::move(problem));
  return problems;
}

std::vector<OwnPath> AgentOwnPaths(const Config& config) {
  std::vector<OwnPath> paths = {
      {config.agent.ipc_base_path, "the agent's ipc-base-path"},
      {config.agent.var_base_path, "the agent's var-base-path"},
      {ScratchRoot(config), "the kernels' scratch root"},
      {config.node.claims_dir, "the node's claims-dir"},
  };
  if (config.agent.token_file) paths.push_back({*config.agent.token_file, "the agent's token-file"});
  if (!config.container.registry_auth_file.empty())
    paths.push_back({config.container.registry_auth_file, "the agent's registry-auth-file"});
  if (!config.path.empty()) paths.push_back({config.path, "the agent's config file"});
  constexpr std::string_view kUnix = "unix://";
  if (config.container.docker_host.rfind(kUnix, 0) == 0)
    paths.push_back({config.container.docker_host.substr(kUnix.size()), "the container engine's socket"});
  for (OwnPath& own : paths) {
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(own.path, ec);
    if (!ec) own.path = NormalPath(absolute.string());
  }
  return paths;
}

std::vector<std::string> MountAllowProblems(const Config& config) {
  // Directories of the node's own system: a kernel writing there changes the node.
  static const char* const kSystemDirectories[] = {"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
                                                   "/boot", "/root", "/var/lib", "/var/run", "/run", "/opt"};
  std::vector<std::string> problems;
  const std::vector<OwnPath> own = AgentOwnPaths(config);
  for (size_t i = 0; i < config.container.mount_allow.size(); ++i) {
    const MountAllow& entry = config.container.mount_allow[i];
    const std::string key = "container.mount-allow[" + std::to_string(i) + "]: " + entry.path;
    const std::string path = NormalPath(entry.path);
    if (path == "/") {
      problems.push_back(key + " lets kernels mount the node's whole filesystem; allow only the directories they need");
      continue;
    }
    bool pseudo = false;
    for (const char* dir : {"/proc", "/sys", "/dev"}) {
      if (!IsWithin(path, dir)) continue;
      problems.push_back(key + " is in " + dir + ", the node's own kernel and devices; no kernel may mount it");
      pseudo = true;
    }
    if (pseudo) continue;
    if (entry.mode == "rw") {
      for (const char* dir : kSystemDirectories) {
        if (!IsWithin(path, dir) && !IsWithin(dir, path)) continue;
        problems.push_back(key + " (rw) " + (IsWithin(path, dir) ? "is in " : "holds ") + dir +
                           ", a system directory of the node; a kernel writing there changes the node: make it "
                           "\"ro\" or allow another directory");
        break;
      }
    }
    for (const OwnPath& p : own) {
      if (!IsWithin(p.path, path)) continue;
      problems.push_back(key + " holds " + p.what + " (" + p.path +
                         "); no kernel may reach it: allow a directory beside it instead");
    }
  }
  return problems;
}

}  // namespace slotd
