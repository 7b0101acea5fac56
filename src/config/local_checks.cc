#include "config/local_checks.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstdio>
#include <filesystem>
#include <map>
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

// `path` as the system will find it: absolute, normal, with the symbolic
// links of its existing part followed.
std::string Resolved(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? NormalPath(path) : NormalPath(canonical.string());
}

// A problem for each of the agent's own paths (AgentOwnPaths) that
// [container] scratch-root equals or holds (the scratch collector removes
// what lies there), and for a scratch-root inside a directory the agent
// shares or keeps in memory (ipc-base-path, claims-dir). Inside
// var-base-path is fine: that is its default.
void CheckScratchRoot(const Config& config, std::vector<std::string>& problems) {
  const std::string given = ScratchRoot(config), scratch = Resolved(given);
  for (const OwnPath& mine : AgentOwnPaths(config)) {
    if (mine.path.empty() || mine.key == "container.scratch-root") continue;
    const std::string path = Resolved(mine.path);
    if (IsWithin(path, scratch)) {
      problems.push_back("container.scratch-root: " + given + (path == scratch ? " is " : " holds ") + mine.key + " " +
                         mine.path + "; the agent removes what lies in its scratch root, so keep the agent's own " +
                         "files out of it: choose a scratch-root of its own (the default is <var-base-path>/scratch)");
    } else if (!mine.may_hold_scratch && IsWithin(scratch, path)) {
      problems.push_back("container.scratch-root: " + given + " lies inside " + mine.key + " " + mine.path +
                         ", which " + (mine.key == "node.claims-dir" ? "all agents of the node share" : "holds the "
                         "agent's socket and lock") + "; choose a scratch-root of its own (the default is "
                         "<var-base-path>/scratch)");
    }
  }
}

// The RLIMIT_ resource of a [container] ulimits name; -1 for none.
int ResourceOf(const std::string& name) {
  static const std::map<std::string, int> kResources = {
      {"core", RLIMIT_CORE},       {"cpu", RLIMIT_CPU},         {"data", RLIMIT_DATA},     {"fsize", RLIMIT_FSIZE},
      {"locks", RLIMIT_LOCKS},     {"memlock", RLIMIT_MEMLOCK}, {"msgqueue", RLIMIT_MSGQUEUE},
      {"nice", RLIMIT_NICE},       {"nofile", RLIMIT_NOFILE},   {"nproc", RLIMIT_NPROC},   {"rss", RLIMIT_RSS},
      {"rtprio", RLIMIT_RTPRIO},   {"rttime", RLIMIT_RTTIME},   {"sigpending", RLIMIT_SIGPENDING},
      {"stack", RLIMIT_STACK}};
  auto it = kResources.find(name);
  return it == kResources.end() ? -1 : it->second;
}

// A warning when the secret file `path` of `key` is open to users other than its owner.
void CheckSecretMode(const std::string& key, const std::string& path, std::vector<std::string>& warnings) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || (st.st_mode & 077) == 0) return;
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  warnings.push_back(key + ": " + path + " holds a secret but users other than its owner may " +
                     ((st.st_mode & 066) ? "read or write" : "open") + " it (mode " + mode + "); chmod 600 " + path);
}

}  // namespace

std::vector<std::string> LocalWarnings(const Config& config) {
  std::vector<std::string> warnings;
  if (config.agent.token_file) CheckSecretMode("agent.token-file", *config.agent.token_file, warnings);
  if (config.agent.tokens_file) CheckSecretMode("agent.tokens-file", *config.agent.tokens_file, warnings);
  if (config.agent.tls_key_file) CheckSecretMode("agent.tls-key-file", *config.agent.tls_key_file, warnings);
  if (config.etcd) CheckSecretMode("etcd.key-file", config.etcd->key_file, warnings);
  CheckSecretMode("container.registry-auth-file", config.container.registry_auth_file, warnings);
  for (const auto& [name, value] : config.container.ulimits) {
    rlimit own{};
    const int resource = ResourceOf(name);
    if (resource < 0 || ::getrlimit(resource, &own) != 0 || own.rlim_max == RLIM_INFINITY) continue;
    const bool unlimited = value < 0;
    if (!unlimited && static_cast<rlim_t>(value) <= own.rlim_max) continue;
    warnings.push_back("container.ulimits: " + name + " = " + (unlimited ? std::string("unlimited") : std::to_string(value)) +
                       " is above this process's own hard limit of " + std::to_string(own.rlim_max) +
                       "; kernels may be refused it or get less: lower it, or raise the agent's limit (LimitNOFILE= "
                       "and the like in its systemd unit)");
  }
  return warnings;
}

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
  CheckScratchRoot(config, problems);

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
      {config.agent.ipc_base_path, "the agent's ipc-base-path", "agent.ipc-base-path", false},
      {config.agent.var_base_path, "the agent's var-base-path", "agent.var-base-path", true},
      {ScratchRoot(config), "the kernels' scratch root", "container.scratch-root", true},
      {config.node.claims_dir, "the node's claims-dir", "node.claims-dir", false},
  };
  if (config.agent.token_file)
    paths.push_back({*config.agent.token_file, "the agent's token-file", "agent.token-file", true});
  if (config.agent.tokens_file)
    paths.push_back({*config.agent.tokens_file, "the agent's tokens-file", "agent.tokens-file", true});
  if (config.agent.tls_key_file)
    paths.push_back({*config.agent.tls_key_file, "the agent's TLS key", "agent.tls-key-file", true});
  if (!config.container.registry_auth_file.empty())
    paths.push_back({config.container.registry_auth_file, "the agent's registry-auth-file",
                     "container.registry-auth-file", true});
  if (config.etcd && !config.etcd->key_file.empty())
    paths.push_back({config.etcd->key_file, "the agent's etcd client key", "etcd.key-file", true});
  if (config.etcd && !config.etcd->password_file.empty())
    paths.push_back({config.etcd->password_file, "the agent's etcd password-file", "etcd.password-file", true});
  if (!config.path.empty()) paths.push_back({config.path, "the agent's config file", "the config file", true});
  constexpr std::string_view kUnix = "unix://";
  if (config.container.docker_host.rfind(kUnix, 0) == 0)
    paths.push_back({config.container.docker_host.substr(kUnix.size()), "the container engine's socket",
                     "container.docker-host", true});
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

std::vector<std::string> EngineRootProblems(const Config& config, const std::string& engine_root) {
  std::vector<std::string> problems;
  if (engine_root.empty() || engine_root[0] != '/') return problems;
  const std::string root = NormalPath(engine_root);
  for (size_t i = 0; i < config.container.mount_allow.size(); ++i) {
    const std::string path = NormalPath(config.container.mount_allow[i].path);
    const bool in = IsWithin(path, root);
    if (!in && !IsWithin(root, path)) continue;
    problems.push_back("container.mount-allow[" + std::to_string(i) + "]: " + config.container.mount_allow[i].path +
                       (in ? " is in " : " holds ") + "the container engine's data root (" + root +
                       "), where the files of every container and image on the node lie, other tenants' too; no "
                       "kernel may reach it: allow a directory outside it");
  }
  return problems;
}

}  // namespace slotd
