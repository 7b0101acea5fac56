#include "integration/harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "model/kernel.h"
#include "testing/eventually.h"

extern char** environ;

namespace slotd::testing {
namespace {

// The engine CTest gave this test process, or "" when it gave none.
// scripts/test starts one engine per id of its resource spec and names each
// in $SLOTD_TEST_ENGINE_<id>; a test with RESOURCE_GROUPS engine:1 finds its
// id in $CTEST_RESOURCE_GROUP_0_ENGINE ("id:1,slots:1").
std::string AssignedEngine() {
  const char* group = std::getenv("CTEST_RESOURCE_GROUP_0_ENGINE");
  if (!group || std::strncmp(group, "id:", 3) != 0) return "";
  std::string id(group + 3);
  id = id.substr(0, id.find(','));
  const char* host = std::getenv(("SLOTD_TEST_ENGINE_" + id).c_str());
  return host ? host : "";
}

// Points $DOCKER_HOST at the assigned engine before any test runs, so that
// the agents, slotctl and docker commands a test starts all use that one.
const bool kDockerHostIsTheAssignedEngine = [] {
  const std::string host = AssignedEngine();
  return !host.empty() && ::setenv("DOCKER_HOST", host.c_str(), 1) == 0;
}();

}  // namespace

std::string DockerHost() {
  const char* host = std::getenv("DOCKER_HOST");
  if (!host || !*host) {
    fprintf(stderr,
            "integration tests need a Docker engine: set DOCKER_HOST (scripts/test starts a private one)\n");
    std::abort();
  }
  return host;
}

DockerEngine& Engine() {
  static std::unique_ptr<DockerEngine> engine = [] {
    auto e = DockerEngine::FromHost(DockerHost());
    if (!e.ok()) {
      fprintf(stderr, "DOCKER_HOST: %s\n", e.status().message().c_str());
      std::abort();
    }
    return std::move(*e);
  }();
  return *engine;
}

void CommitImage(const std::string& container, const std::string& image, const std::vector<std::string>& changes) {
  const std::string host = DockerHost();
  const size_t colon = image.rfind(':');
  std::string query = "container=" + UrlEncode(container) + "&repo=" + UrlEncode(image.substr(0, colon)) +
                      "&tag=" + UrlEncode(image.substr(colon + 1));
  for (const std::string& change : changes) query += "&changes=" + UrlEncode(change);
  auto committed = HttpClient::Unix(host.substr(host.find("://") + 3)).Request("POST", "/v1.41/commit?" + query, "{}");
  if (!committed.ok() || committed->status != 201)
    ADD_FAILURE() << "commit " << container << " as " << image << ": "
                  << (committed.ok() ? committed->body : committed.status().message());
}

std::string AsTheEngineNamesIt(const std::string& image) {
  const std::string first = image.substr(0, image.find('/'));
  return EngineIsPodman() && image.find('/') != std::string::npos && first != "localhost" &&
                 first.find_first_of(".:") == std::string::npos
             ? "docker.io/" + image
             : image;
}

bool EngineIsPodman() {
  static const bool podman = [] {
    auto identity = Engine().Identify();
    if (!identity.ok()) {
      fprintf(stderr, "the engine at $DOCKER_HOST does not answer: %s\n", identity.status().message().c_str());
      std::abort();
    }
    return identity->name == "podman";
  }();
  return podman;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/slotd-it.XXXXXX";
  path_ = mkdtemp(tmpl);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

SmallTmpfs::SmallTmpfs(std::string path, const std::string& size) : path_(std::move(path)) {
  std::error_code ec;
  std::filesystem::create_directories(path_, ec);
  mounted_ = ::mount("tmpfs", path_.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0755").c_str()) == 0;
  if (!mounted_) error_ = "mount -t tmpfs " + path_ + ": " + std::strerror(errno);
}

SmallTmpfs::~SmallTmpfs() {
  if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
}

void SmallTmpfs::Fill(const std::string& name) const {
  const int fd = ::open((path_ + "/" + name).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const std::string block(4096, 'x');
  while (fd >= 0 && ::write(fd, block.data(), block.size()) > 0) {
  }
  // A tmpfs may still take a few bytes past the last whole block.
  while (fd >= 0 && ::write(fd, block.data(), 1) > 0) {
  }
  if (fd >= 0) ::close(fd);
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RunTag() { return "p" + std::to_string(getpid()); }

CommandResult RunCommand(const std::vector<std::string>& argv) {
  TempDir dir;
  std::string out_path = dir.path() + "/out", err_path = dir.path() + "/err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  CommandResult result;
  if (posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) {
    result.err = "cannot run " + argv[0];
    return result;
  }
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

CommandResult Slotctl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {std::string(SLOTD_BIN_DIR) + "/slotctl"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

CommandResult Slotd(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {std::string(SLOTD_BIN_DIR) + "/slotd"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

int StatusOf(const std::string& answer) {
  if (answer.rfind("HTTP/1.1 ", 0) != 0 || answer.size() < 12) return 0;
  return std::atoi(answer.substr(9, 3).c_str());
}

AgentOptions TwoCoreAgent(const std::string& name, const std::string& container_toml) {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = "0-1";
  o.container_toml = container_toml;
  return o;
}

nlohmann::json SleepKernel(const std::string& id, const std::string& mem) {
  return {{"kernel_id", id},
          {"image", kTestImage},
          {"command", {"sleep", "3600"}},
          {"resources", {{"cpu", 1}, {"mem", mem}}}};
}

std::string RunIn(const AgentProcess& agent, const std::string& kernel_id, const std::string& script) {
  const nlohmann::json out =
      agent.CallJson("POST", "/v1/kernels/" + kernel_id + "/exec", {{"command", {"sh", "-c", script}}}, 200);
  return out["stdout"];
}

AgentProcess::AgentProcess(AgentOptions options) : options_(std::move(options)) {
  config_path_ = dir_.path() + "/agent.toml";
  socket_path_ = (options_.ipc_dir.empty() ? dir_.path() + "/ipc" : options_.ipc_dir) + "/agent.sock";
  log_path_ = dir_.path() + "/slotd.log";
  if (!options_.token.empty()) WriteFile(dir_.path() + "/token", options_.token + "\n");
  WriteConfig();
}

void AgentProcess::SetExtraToml(std::string extra_toml) {
  options_.extra_toml = std::move(extra_toml);
  WriteConfig();
}

long ProcStatusField(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
  return -1;
}

namespace {

// The socket inodes listed in /proc/<pid>/net/<table> (unix: the 7th field;
// tcp, tcp6: the 10th), added to `inodes`.
void SocketInodesOf(pid_t pid, const std::string& table, std::set<std::string>& inodes) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/net/" + table);
  const size_t field = table == "unix" ? 6 : 9;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string value;
    for (size_t i = 0; i <= field && fields >> value; ++i)
      if (i == field) inodes.insert(value);
  }
}

}  // namespace

std::map<std::string, long> OpenFileKinds(pid_t pid) {
  std::map<std::string, long> kinds;
  std::set<std::string> unix_inodes, tcp_inodes;
  SocketInodesOf(pid, "unix", unix_inodes);
  SocketInodesOf(pid, "tcp", tcp_inodes);
  SocketInodesOf(pid, "tcp6", tcp_inodes);
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error)) {
    const std::string target = std::filesystem::read_symlink(entry.path(), error).string();
    if (error) continue;  // closed since it was listed
    std::string kind;
    if (target.rfind("socket:[", 0) == 0) {
      const std::string inode = target.substr(8, target.size() - 9);
      kind = unix_inodes.contains(inode) ? "socket unix" : tcp_inodes.contains(inode) ? "socket tcp" : "socket other";
    } else if (target.rfind("pipe:", 0) == 0) {
      kind = "pipe";
    } else if (target.rfind("anon_inode:", 0) == 0) {
      kind = target;
    } else if (target.rfind("/sys/fs/cgroup/", 0) == 0) {
      kind = "cgroup file";
    } else if (target.rfind("/dev/", 0) == 0) {
      kind = "device";
    } else {
      kind = "regular file";
    }
    ++kinds[kind];
  }
  return kinds;
}

std::string GrownFileKinds(const std::map<std::string, long>& before, const std::map<std::string, long>& after) {
  std::string grown;
  for (const auto& [kind, n] : after) {
    const auto was = before.find(kind);
    const long growth = n - (was == before.end() ? 0 : was->second);
    if (growth > 0) grown += (grown.empty() ? "" : ", ") + kind + " +" + std::to_string(growth);
  }
  return grown;
}

RawClient::RawClient(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

RawClient::RawClient(int port, const std::string& from) {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in source{};
  source.sin_family = AF_INET;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  connected_ = fd_ >= 0 && ::inet_pton(AF_INET, from.c_str(), &source.sin_addr) == 1 &&
               ::bind(fd_, reinterpret_cast<sockaddr*>(&source), sizeof source) == 0 &&
               ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

RawClient::RawClient(const std::string& path) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

RawClient::~RawClient() {
  if (fd_ >= 0) ::close(fd_);
}

bool RawClient::Send(std::string_view bytes) {
  return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

void RawClient::ShutdownSend() { ::shutdown(fd_, SHUT_WR); }

void RawClient::Reset() {
  const linger abort{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  ::close(fd_);
  fd_ = -1;
  connected_ = false;
}

std::string RawClient::Read(std::chrono::milliseconds limit, bool* closed, std::string_view until) {
  std::string got;
  const auto end = std::chrono::steady_clock::now() + limit;
  if (closed) *closed = false;
  while (until.empty() || got.find(until) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      if (closed) *closed = true;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

void AgentProcess::WriteConfig() const {
  std::string agent_lines;
  if (!options_.node.empty()) agent_lines += "node = \"" + options_.node + "\"\n";
  if (!options_.token.empty()) agent_lines += "token-file = \"" + dir_.path() + "/token\"\n";
  agent_lines += options_.agent_toml;
  WriteFile(config_path_, "[agent]\n"
                          "id = \"" + options_.id + "\"\n"
                          "rpc-listen-addr = \"127.0.0.1:" + std::to_string(options_.rpc_port) + "\"\n"
                          "ipc-base-path = \"" + (options_.ipc_dir.empty() ? dir_.path() + "/ipc" : options_.ipc_dir) +
                          "\"\n"
                          "var-base-path = \"" + dir_.path() + "/var\"\n" + agent_lines +
                          "[node]\n"
                          "claims-dir = \"" + (options_.claims_dir.empty() ? dir_.path() + "/claims" : options_.claims_dir) +
                          "\"\n"
                          "[container]\n"
                          "docker-host = \"" + (options_.docker_host.empty() ? DockerHost() : options_.docker_host) + "\"\n"
                          "port-range = [" + std::to_string(options_.port_first) + ", " +
                          std::to_string(options_.port_last) + "]\n"
                          "stop-timeout = \"" + options_.stop_timeout + "\"\n"
                          "auto-pull = \"" + options_.auto_pull + "\"\n"
                          "allow-root = " + (options_.allow_root ? "true" : "false") + "\n" + options_.container_toml +
                          "[resource.cpu]\n"
                          "allowed-cores = \"" + options_.cores + "\"\n"
                          "[resource.memory]\n"
                          "size = \"" + options_.memory + "\"\n" + options_.extra_toml);
}

AgentProcess::~AgentProcess() {
  Kill(SIGKILL);
  auto listed = Engine().List({std::string(label::kOwner) + "=" + options_.id});
  if (listed.ok())
    for (const auto& c : *listed) (void)Engine().Remove(c.id, true);
}

bool AgentProcess::Start() {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  std::string bin = options_.binary.empty() ? std::string(SLOTD_BIN_DIR) + "/slotd" : options_.binary;
  std::vector<char*> args = {bin.data(), const_cast<char*>("--config"), config_path_.data(),
                             const_cast<char*>("--log-level"), const_cast<char*>("debug"), nullptr};
  // This process's environment, with options().env's variables in place of any of the same name.
  std::vector<std::string> env_strings = options_.env;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string entry = *variable;
    const std::string name = entry.substr(0, entry.find('='));
    const bool replaced = std::any_of(options_.env.begin(), options_.env.end(), [&](const std::string& mine) {
      return mine.compare(0, name.size() + 1, name + "=") == 0;
    });
    if (!replaced) env_strings.push_back(entry);
  }
  std::vector<char*> env;
  for (std::string& entry : env_strings) env.push_back(entry.data());
  env.push_back(nullptr);
  if (posix_spawn(&pid_, bin.c_str(), &actions, nullptr, args.data(), env.data()) != 0) return false;
  posix_spawn_file_actions_destroy(&actions);
  static const std::regex kReady(R"(slotd ready: agent \S+ api https?://[0-9.]+:([0-9]+) )");
  const auto give_up = std::chrono::steady_clock::now() + ScaledLimit(std::chrono::seconds(15));
  while (std::chrono::steady_clock::now() < give_up) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      pid_ = -1;
      return false;
    }
    std::smatch m;
    std::string text = log();
    std::string::const_iterator from = text.begin();
    std::string last_port;
    while (std::regex_search(from, text.cend(), m, kReady)) {
      last_port = m[1];
      from = m[0].second;
    }
    if (!last_port.empty() && Call("GET", "/health").status == 200) {
      port_ = std::stoi(last_port);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void AgentProcess::Kill(int signal) {
  if (pid_ <= 0) return;
  ::kill(pid_, signal);
  int status = 0;
  waitpid(pid_, &status, 0);
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  pid_ = -1;
}

std::string AgentProcess::log() const { return ReadFile(log_path_); }

std::string AgentProcess::GeneratedToken() const {
  std::string token = ReadFile(dir_.path() + "/var/api.token");
  while (!token.empty() && token.back() == '\n') token.pop_back();
  return token;
}

HttpResponse AgentProcess::Call(const std::string& method, const std::string& path, const std::string& body,
                                bool tcp, const std::string& token) const {
  HttpClient client = tcp ? HttpClient::Tcp("http://127.0.0.1:" + std::to_string(port_)) : HttpClient::Unix(socket_path_);
  if (!token.empty()) client.SetBearerToken(token);
  if (tcp && token.empty() && options_.token.empty()) client.SetBearerToken(GeneratedToken());
  auto res = client.Request(method, path, body, std::chrono::seconds(60));
  if (!res.ok()) return HttpResponse{0, res.status().message()};
  return *res;
}

nlohmann::json AgentProcess::CallJson(const std::string& method, const std::string& path, const nlohmann::json& body,
                                      long expect) const {
  HttpResponse res = Call(method, path, body.is_null() ? "" : body.dump());
  EXPECT_EQ(res.status, expect) << method << " " << path << " -> " << res.body;
  nlohmann::json parsed = nlohmann::json::parse(res.body, nullptr, false);
  return parsed.is_discarded() ? nlohmann::json{{"raw", res.body}} : parsed;
}

nlohmann::json AgentProcess::CreateKernel(const nlohmann::json& request) const {
  return CallJson("POST", "/v1/kernels", request, 201);
}

nlohmann::json AgentProcess::WaitForState(const std::string& kernel_id, const std::string& state,
                                          std::chrono::milliseconds limit) const {
  auto deadline = std::chrono::steady_clock::now() + ScaledLimit(limit);
  nlohmann::json last;
  while (std::chrono::steady_clock::now() < deadline) {
    HttpResponse res = Call("GET", "/v1/kernels/" + kernel_id);
    last = nlohmann::json::parse(res.body, nullptr, false);
    if (res.status == 200 && last.value("state", "") == state) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "kernel " << kernel_id << " did not reach " << state << "; last seen: " << last.dump();
  return last;
}

}  // namespace slotd::testing
