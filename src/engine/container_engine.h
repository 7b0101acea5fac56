// ContainerEngine: the narrow interface between the agent and a container
// runtime. DockerEngine (engine/docker/) speaks the Docker Engine API; a fake
// in tests/ stands in for unit tests of the core.
//
// Every method is safe to call from several threads at once. Errors keep the
// engine's own message; codes map as: connection failure -> kUnavailable,
// HTTP 404 -> kNotFound, 409 -> kConflict, 400 -> kInvalidArgument, other ->
// kInternal.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace slotd {

using Labels = std::map<std::string, std::string>;

// A host port bound to a container port (TCP).
struct PortBinding {
  int container_port = 0;
  int host_port = 0;
};

// A filesystem mounted into a container.
struct Mount {
  enum class Type { kBind, kTmpfs };
  Type type = Type::kBind;
  std::string source;  // kBind: the host path
  std::string target;  // the path inside the container
  bool read_only = false;
  uint64_t tmpfs_bytes = 0;  // kTmpfs: its size; 0: the engine's default

  bool operator==(const Mount&) const = default;
};

// Everything needed to create one container.
struct ContainerSpec {
  std::string name;                  // container name; the engine refuses duplicates
  std::string image;
  std::vector<std::string> command;  // empty: the image's default
  std::vector<std::string> env;      // "KEY=value"
  std::string user;                  // "uid:gid" the processes run as; empty: the image's user
  Labels labels;
  std::string cpuset_cpus;           // "0-3,8"; empty: no restriction
  int64_t cpu_quota_us = 0;          // with cpu_period_us; 0: none
  int64_t cpu_period_us = 0;
  int64_t memory_bytes = 0;          // 0: no limit
  int64_t pids_limit = 0;            // most processes at once; 0: no limit
  uint64_t log_max_bytes = 0;        // the output kept, per log file (two files); 0: the engine's default logging
  uint64_t shm_bytes = 0;            // the size of /dev/shm; 0: the engine's default
  std::vector<Mount> mounts;
  std::map<std::string, int64_t> ulimits;  // name ("nofile") -> soft and hard limit; -1: unlimited
  std::string network_mode = "none";
  std::vector<PortBinding> ports;
  // Device requests (HostConfig.DeviceRequests): driver, ids, capabilities.
  struct DeviceRequest {
    std::string driver;
    std::vector<std::string> device_ids;
    std::vector<std::string> capabilities;
  };
  std::vector<DeviceRequest> device_requests;
  std::vector<std::string> cdi_devices;  // CDI names, e.g. "nvidia.com/gpu=GPU-..."
  bool no_new_privileges = false;        // no process may gain privileges (set-uid files, file capabilities)
  // The signal the engine's stop sends first ("SIGUSR1"); empty: the image's
  // STOPSIGNAL, else SIGTERM. The engine keeps it: `docker stop` uses it too.
  std::string stop_signal;
  // How long the engine's stop waits after that signal before SIGKILL when
  // the caller names no timeout (`docker stop`); 0: the engine's default.
  int stop_timeout_s = 0;
  // Whether PID 1 is the engine's init (Docker's docker-init), which reaps
  // zombies and passes signals on to the command.
  bool init = false;
};

// What the engine reports about one container (from list or inspect).
struct ContainerInfo {
  std::string id;
  std::string name;      // without the leading "/"
  std::string image;
  std::string image_id;  // "sha256:..." of the image it was made from
  Labels labels;
  std::string state;     // created | running | paused | restarting | removing | exited | dead
  bool running = false;
  int exit_code = 0;     // meaningful when state is exited/dead; only inspect fills it
  int pid = 0;           // init pid on the host when running; only inspect fills it
  int64_t created_unix = 0;
  std::string started_at;   // RFC 3339 from inspect; empty from list
  std::string finished_at;  // RFC 3339 from inspect; empty from list
  int64_t started_ms = 0;   // started_at in unix milliseconds; 0: it never started, or only listed
  int64_t finished_ms = 0;  // finished_at in unix milliseconds; 0: it never ended, or only listed
  // From inspect only: what HostConfig holds, for checks.
  std::string cpuset_cpus;
  int64_t memory_bytes = 0;
  int64_t pids_limit = 0;    // 0 or less: none
  std::vector<std::string> env;
};

// Who answers at the engine's address, from its /version.
struct EngineIdentity {
  std::string name;         // "docker" or "podman" (Podman names itself in its components)
  std::string version;      // the engine's own version: "20.10.24", "4.3.1"
  std::string api_version;  // the Docker Engine API version it serves: "1.41"
};

// A named volume of the engine, as listed. Kernels get none; agents keep
// their engine lease in one (node/engine_lease.h).
struct VolumeInfo {
  std::string name;
  Labels labels;
};

// One event of the engine's event stream.
struct EngineEvent {
  std::string type;    // "container", "image", ...
  std::string action;  // "create", "start", "die", "destroy", "oom", ...
  std::string id;      // the actor id (container id)
  Labels attributes;   // the actor's attributes: labels, name, image, exitCode
  int64_t time_nano = 0;
};

// A one-shot reading of the engine's own stats for one container
// (GET /containers/{id}/stats?stream=false): the fallback of stats-type
// "docker" for hosts where the agent cannot read cgroups.
struct ContainerStats {
  uint64_t cpu_usage_ns = 0;        // cpu_stats.cpu_usage.total_usage
  uint64_t memory_used_bytes = 0;   // memory_stats.usage
  uint64_t memory_limit_bytes = 0;  // memory_stats.limit
  uint64_t memory_cache_bytes = 0;  // memory_stats.stats: "total_cache" or "cache" (v1), "file" (v2)
  uint64_t pids = 0;                // pids_stats.current
  uint64_t io_read_bytes = 0;       // blkio_stats.io_service_bytes_recursive, "read" entries summed
  uint64_t io_write_bytes = 0;      // the "write" entries summed
};

// An image the engine has.
struct ImageInfo {
  std::string id;                    // "sha256:..."
  std::vector<std::string> tags;     // RepoTags: "name:tag"
  std::vector<std::string> digests;  // RepoDigests: "name@sha256:..."
  int64_t size_bytes = 0;
  int64_t created_unix = 0;
  std::string user;                  // Config.User ("", "1000", "work:work"); only InspectImage fills it
};

// One progress message of a pull, as the engine sends it.
struct PullMessage {
  std::string layer;   // the layer's id; empty for a message about the whole image
  std::string status;  // "Pulling fs layer", "Downloading", "Pull complete", "Already exists", "Digest: ...", ...
  uint64_t current = 0;  // progressDetail: bytes so far of this layer's step
  uint64_t total = 0;    // and of all of it; 0: not known
};

// Output of a finished exec. Each stream keeps at most kMaxExecOutput bytes,
// and all one-shot execs running at once keep at most kMaxExecOutputHeld
// together; what came past either was read and dropped, and the flag says
// so. (In a JSON answer a byte can take six: 1 MiB stays a few MiB.)
struct ExecResult {
  static constexpr size_t kMaxExecOutput = 1u << 20;
  static constexpr size_t kMaxExecOutputHeld = 64u << 20;
  int exit_code = -1;
  std::string stdout_text;
  std::string stderr_text;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
};

// An interactive exec the engine started: its id, and the connection that
// carries its terminal (raw bytes both ways).
struct ExecSession {
  std::string exec_id;
  int fd = -1;        // a blocking socket; whoever holds the session closes it
  std::string early;  // output that came with the engine's answer, before the socket's
};

// What the engine says of an exec.
struct ExecInfo {
  std::string container_id;
  bool running = false;
  int pid = 0;  // the command's process on the host while it runs; 0 when not known
  std::optional<int> exit_code;  // once it has ended
};

class ContainerEngine {
 public:
  virtual ~ContainerEngine() = default;

  // Checks that the engine answers; says which engine it is.
  virtual Result<EngineIdentity> Identify() = 0;
  // The cheapest round trip to the engine (Docker's /_ping), for health:
  // OK when it answered within `timeout`.
  virtual Status Ping(std::chrono::milliseconds timeout) = 0;

  // Creates (does not start) a container; returns its id.
  virtual Result<std::string> Create(const ContainerSpec& spec) = 0;
  virtual Status Start(const std::string& id) = 0;
  // Stops with SIGTERM, then SIGKILL after `timeout`. Stopping a stopped container is OK.
  virtual Status Stop(const std::string& id, std::chrono::seconds timeout) = 0;
  virtual Status Kill(const std::string& id, const std::string& signal = "KILL") = 0;
  virtual Status Restart(const std::string& id, std::chrono::seconds timeout) = 0;
  // Gives the running container `id` the cores `cpuset` ("0-3,8"), its
  // other limits unchanged. kFailedPrecondition, saying so, where the engine
  // cannot change a running container's cores (Podman's compat API);
  // kNotFound when the container is gone.
  virtual Status UpdateCpuset(const std::string& id, const std::string& cpuset) = 0;
  // Gives the container the name `name`; kConflict when another container has it.
  virtual Status Rename(const std::string& id, const std::string& name) = 0;
  // Removes the container; `force` kills it first if running.
  virtual Status Remove(const std::string& id, bool force) = 0;
  virtual Result<ContainerInfo> Inspect(const std::string& id) = 0;

  // The content of the regular file `path` in container `id` (created or
  // running; read from its filesystem, nothing is run), following symbolic
  // links inside the container's filesystem. kNotFound when there is no such
  // file; kInvalidArgument when it is not a regular file or is longer than
  // `max_bytes`.
  virtual Result<std::string> ReadFile(const std::string& id, const std::string& path, size_t max_bytes) = 0;

  // Lists containers in every state whose labels match all `label_filters`
  // ("key=value" or "key"), filtered by the engine, not here.
  virtual Result<std::vector<ContainerInfo>> List(const std::vector<std::string>& label_filters) = 0;

  // Runs `command` in a running container and waits for it, at most `timeout`
  // (then kDeadlineExceeded) and, when `stop` is given, only until it becomes
  // true (then kUnavailable; noticed within about a second). stdout and
  // stderr are demultiplexed. `exec_id`, when given, gets the exec's id as
  // soon as the engine has made it, so that a caller that stopped waiting can
  // end the command: the engine leaves it running.
  virtual Result<ExecResult> Exec(const std::string& id, const std::vector<std::string>& command,
                                  std::chrono::seconds timeout, const std::atomic<bool>* stop,
                                  std::string* exec_id) = 0;

  // Starts `command` in a running container with a terminal of `rows` x
  // `cols` and its stdin attached, and returns the connection carrying it
  // (the end of what is written to it is the end of the command's input).
  // kConflict when the container is not running.
  virtual Result<ExecSession> ExecInteractive(const std::string& id, const std::vector<std::string>& command,
                                              int rows, int cols) = 0;
  // Sets the terminal size of an interactive exec.
  virtual Status ResizeExec(const std::string& exec_id, int rows, int cols) = 0;
  // kNotFound for an unknown exec.
  virtual Result<ExecInfo> InspectExec(const std::string& exec_id) = 0;

  // Streams the container's output (stdout and stderr interleaved, the bytes
  // as written) to `on_output`: the last `tail` lines first (tail <= 0: all),
  // then, with `follow`, new output until the container stops. `on_started`
  // runs once the engine has accepted the request, before any output (not
  // at all when it refuses). Returns OK at the end of the output, when `stop`
  // becomes true or when on_output returns false; kNotFound for a missing
  // container. Never holds more than a piece of the output.
  virtual Status StreamLogs(const std::string& id, int tail, bool follow, const std::function<void()>& on_started,
                            const std::function<bool(std::string_view)>& on_output,
                            const std::atomic<bool>& stop) = 0;

  // One reading of the engine's stats for a running container (the engine
  // takes about a second to answer: it samples twice). kNotFound when the
  // container is gone; kFailedPrecondition when it is not running.
  virtual Result<ContainerStats> Stats(const std::string& id) = 0;

  // Pulls `image` ("name[:tag]" or "name@digest") from its registry,
  // sending `registry_auth` (an X-Registry-Auth value; empty: none), and
  // calls `on_message` for each progress message. Returns OK when the
  // image is on the node, or when `stop` became true (the pull abandoned).
  // Errors keep the engine's message: kNotFound (no such image or tag),
  // kPermissionDenied (the registry refused the credentials or asked for
  // some), kUnavailable (the registry or the engine cannot be reached),
  // kInternal otherwise.
  virtual Status Pull(const std::string& image, const std::string& registry_auth,
                      const std::function<void(const PullMessage&)>& on_message, const std::atomic<bool>& stop) = 0;
  // The digest ("sha256:...") that `image`'s tag names in its registry now;
  // errors as Pull's.
  virtual Result<std::string> RegistryDigest(const std::string& image, const std::string& registry_auth) = 0;
  // kNotFound when the engine has no such image.
  virtual Result<ImageInfo> InspectImage(const std::string& image) = 0;
  // The engine's data root (Docker's DockerRootDir), where images live.
  virtual Result<std::string> DataRoot() = 0;
  // Every image of the engine (tagged or not), without `user`.
  virtual Result<std::vector<ImageInfo>> ListImages() = 0;
  // Removes the image `id` and its tags; kConflict while a container uses
  // it; kNotFound when it is gone.
  virtual Status RemoveImage(const std::string& id) = 0;

  // Creates the named volume with `labels`. Creating a volume that exists
  // is OK and changes nothing (the engine's rule): list it to see whose it is.
  virtual Status CreateVolume(const std::string& name, const Labels& labels) = 0;
  // Lists the volumes whose labels match all `label_filters` ("key=value" or "key").
  virtual Result<std::vector<VolumeInfo>> ListVolumes(const std::vector<std::string>& label_filters) = 0;
  // Removes the named volume; kNotFound when there is none, kConflict while a container uses it.
  virtual Status RemoveVolume(const std::string& name) = 0;

  // Streams events matching `label_filters` (and type=container) whose
  // action is one of `actions` (any action when empty), calling `on_event`
  // for each, from the moment the stream is connected (on_connected is
  // called then). Blocks until `stop` becomes true (returns OK) or the
  // stream breaks (returns kUnavailable). Does not reconnect; the caller does.
  virtual Status StreamEvents(const std::vector<std::string>& label_filters, const std::vector<std::string>& actions,
                              const std::function<void()>& on_connected,
                              const std::function<void(const EngineEvent&)>& on_event,
                              const std::atomic<bool>& stop) = 0;
};

}  // namespace slotd
