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
#include "model/container.h"

namespace slotd {

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
  // The engine's info: its data root and cgroup driver and version.
  virtual Result<EngineInfo> Info() = 0;
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
