// Test harness for integration tests: real slotd/slotctl processes against
// the real engine at $DOCKER_HOST (scripts/test starts a private one).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/http_client.h"
#include "engine/docker/docker_engine.h"

namespace slotd::testing {

inline constexpr char kTestImage[] = "slotd-test/busybox:latest";

// $DOCKER_HOST; aborts the test binary with advice when unset.
std::string DockerHost();

// The engine at $DOCKER_HOST, for checks and for acting behind the agent's back.
DockerEngine& Engine();
// Whether that engine is Podman (its Docker-compatible API), for the checks
// whose honest answer differs (docs/engines.md); aborts when it does not answer.
bool EngineIsPodman();
// `image` ("name:tag") as the engine names it in a container's record:
// Podman qualifies a name "team/name:tag" without a registry with docker.io/.
std::string AsTheEngineNamesIt(const std::string& image);
// Commits container `container` as image `image` ("name:tag") with
// `changes` (Dockerfile lines, as `docker commit --change` takes them),
// through the engine's API with an empty config: `docker commit` sends no
// body, which Podman's compatible API refuses ("Decode(): EOF"). ADD_FAILUREs
// with the engine's answer when it fails.
void CommitImage(const std::string& container, const std::string& image, const std::vector<std::string>& changes = {});

// A fresh directory under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A tmpfs of `size` ("256k") mounted at `path` (made when absent) for the
// life of the object: a small filesystem to fill. Tests run as root; where
// mounting is not permitted, mounted() is false and error() says why.
class SmallTmpfs {
 public:
  SmallTmpfs(std::string path, const std::string& size);
  ~SmallTmpfs();  // unmounts (lazily: a process may still hold a file)
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  // Writes <path>/<name> until the filesystem is full.
  void Fill(const std::string& name) const;

 private:
  std::string path_;
  bool mounted_ = false;
  std::string error_;
};

// Writes `text` to `path`.
void WriteFile(const std::string& path, const std::string& text);
std::string ReadFile(const std::string& path);

// The number at the start of the line "<field>:" of /proc/<pid>/status
// ("VmRSS" in KiB, "Threads"); -1 when there is no such line.
long ProcStatusField(pid_t pid, const std::string& field);

// The open files of process `pid` (the links of /proc/<pid>/fd), counted by
// kind: "socket unix", "socket tcp" (an inode of /proc/<pid>/net/unix,
// tcp or tcp6), "socket other", "pipe", "anon_inode:[eventfd]" (and the other
// anonymous inodes by their own names: eventpoll, inotify, timerfd), "cgroup
// file" (a path under /sys/fs/cgroup), "device" (under /dev), "regular file"
// (any other path). Empty when the process is gone.
std::map<std::string, long> OpenFileKinds(pid_t pid);
// The kinds whose count is higher in `after` than in `before`, as
// "socket unix +3, pipe +1"; empty when none grew.
std::string GrownFileKinds(const std::map<std::string, long>& before, const std::map<std::string, long>& after);

// A unique id fragment for this test process ("p1234").
std::string RunTag();

// Result of running a command to completion.
struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs argv (no shell; a bare name is looked up in $PATH), capturing stdout and stderr.
CommandResult RunCommand(const std::vector<std::string>& argv);

// A TCP port of 127.0.0.1 that nothing listens on now (bound and released).
int FreeLoopbackPort();
// Runs build/bin/slotctl with `args`.
CommandResult Slotctl(const std::vector<std::string>& args);
// Runs build/bin/slotd with `args`.
CommandResult Slotd(const std::vector<std::string>& args);
// The status code of a raw HTTP answer ("HTTP/1.1 503 ..." -> 503); 0 when none.
int StatusOf(const std::string& answer);

// A client socket driven byte by byte, for clients that must misbehave
// (slow, idle, never finishing their request).
class RawClient {
 public:
  // Connects to 127.0.0.1:`port`.
  explicit RawClient(int port);
  // Connects to 127.0.0.1:`port` from the loopback address `from`
  // (127.0.0.2, say: a client address of its own).
  RawClient(int port, const std::string& from);
  // Connects to the unix socket at `path`.
  explicit RawClient(const std::string& path);
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  // Sends all of `bytes`; false when the connection is broken.
  bool Send(std::string_view bytes);
  // Half-closes: the peer reads the end of what this client sends, and may still answer.
  void ShutdownSend();
  // Closes with a reset (RST) instead of an orderly close.
  void Reset();
  // Reads what comes within `limit`, or until `until` has come; `closed`
  // tells whether the peer closed.
  std::string Read(std::chrono::milliseconds limit, bool* closed = nullptr, std::string_view until = {});

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// Settings for one agent's agent.toml.
struct AgentOptions {
  std::string id;
  std::string node;           // agent.node; empty: the host name
  std::string cores = "0";    // allowed-cores
  std::string memory = "1g";  // resource.memory.size
  int port_first = 32000;
  int port_last = 32009;
  std::string token;          // non-empty: write a token-file
  std::string claims_dir;     // node.claims-dir; empty: one of the agent's own
  std::string ipc_dir;        // agent.ipc-base-path; empty: one of the agent's own
  int rpc_port = 0;           // the port of rpc-listen-addr (127.0.0.1); 0: picked at start
  // [container] auto-pull and allow-root: tests run the root test image and
  // never pull unless they say so (a pull would reach past the loopback).
  std::string auto_pull = "none";
  bool allow_root = true;
  std::string stop_timeout = "1s";  // container.stop-timeout: short, so that deletes are quick
  std::string agent_toml;     // lines added to the [agent] section verbatim
  std::string container_toml; // lines added to the [container] section verbatim
  std::string extra_toml;     // appended verbatim
  std::string docker_host;    // container.docker-host; empty: $DOCKER_HOST
  std::string binary;         // the slotd to run (an installed one); empty: the build's
  std::vector<std::string> env;  // "NAME=value" added to (or replacing in) the agent's environment
};

// One slotd process with its own directory, config and log.
class AgentProcess {
 public:
  explicit AgentProcess(AgentOptions options);
  ~AgentProcess();  // SIGKILLs the process if still running, removes the agent's containers

  // Replaces options().extra_toml and rewrites the config (takes effect at the next Start).
  void SetExtraToml(std::string extra_toml);

  // Starts slotd and waits until it serves /health; false if it exited first
  // (then exit_code() and log() tell why).
  bool Start();
  void Kill(int signal);        // sends `signal` and reaps the process
  int exit_code() const { return exit_code_; }
  std::string log() const;
  const std::string& config_path() const { return config_path_; }
  const std::string& socket_path() const { return socket_path_; }
  const std::string& dir() const { return dir_.path(); }
  const AgentOptions& options() const { return options_; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }  // TCP port parsed from the ready line

  // The token the agent made for itself (without options().token); "" before its first start.
  std::string GeneratedToken() const;
  // Calls the API over the unix socket, or TCP when `tcp` with `token`, else
  // options().token, else the agent's generated token; returns status and body.
  HttpResponse Call(const std::string& method, const std::string& path, const std::string& body = "",
                    bool tcp = false, const std::string& token = "") const;
  // Calls and parses JSON; fails the test when the status is not `expect`.
  nlohmann::json CallJson(const std::string& method, const std::string& path, const nlohmann::json& body,
                          long expect) const;
  // Creates a kernel and returns its record (expects 201).
  nlohmann::json CreateKernel(const nlohmann::json& request) const;
  // Polls GET /v1/kernels/{id} until its state is `state`, up to `limit`.
  nlohmann::json WaitForState(const std::string& kernel_id, const std::string& state,
                              std::chrono::milliseconds limit = std::chrono::seconds(10)) const;

 private:
  void WriteConfig() const;

  AgentOptions options_;
  TempDir dir_;
  std::string config_path_;
  std::string socket_path_;
  std::string log_path_;
  pid_t pid_ = -1;
  int exit_code_ = -1;
  int port_ = 0;
};

// The options of an agent of this test run named after `name` (id
// it-<run tag>-<name>) on cores 0-1 with `container_toml` in its
// [container]; the rest as AgentOptions has it.
AgentOptions TwoCoreAgent(const std::string& name, const std::string& container_toml = "");
// A create request for kernel `id` of the test image that sleeps an hour on
// one core with `mem`.
nlohmann::json SleepKernel(const std::string& id, const std::string& mem = "32m");
// Runs `script` with sh -c in the kernel (an exec through the API, which
// must answer 200) and returns its standard output.
std::string RunIn(const AgentProcess& agent, const std::string& kernel_id, const std::string& script);

}  // namespace slotd::testing
