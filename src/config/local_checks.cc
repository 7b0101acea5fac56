#include "config/local_checks.h"

#include <sys/un.h>

#include <filesystem>

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
  return problems;
}

}  // namespace slotd
