// The container vocabulary the agent and its engines share: what a
// container is made from (ContainerSpec), what an engine reports of one
// (ContainerInfo, EngineEvent, ContainerStats, ExecInfo), of an image and of
// an exec. Plain data; ContainerEngine (engine/container_engine.h) is the
// interface that speaks it.
#pragma once

#include <cstdint>
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

// What an engine says of itself in its info: where it keeps its data and how
// it makes its containers' cgroups. A field the engine leaves out is empty.
struct EngineInfo {
  std::string data_root;       // Docker's DockerRootDir, where images live; never empty
  std::string cgroup_driver;   // "systemd" or "cgroupfs"
  std::string cgroup_version;  // "1" or "2"
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

}  // namespace slotd
