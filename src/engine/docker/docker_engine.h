// DockerEngine: ContainerEngine over the Docker Engine API, version 1.41
// (Docker 20.10 and later), on a unix socket or plain TCP.
//
// Thread-safety: every method may be called from several threads at once.
// Errors follow container_engine.h and always keep the engine's own message.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <functional>
#include <string_view>

#include "common/byte_budget.h"
#include "common/http_client.h"
#include "common/mutex.h"
#include "engine/container_engine.h"

namespace slotd {

class DockerEngine : public ContainerEngine {
 public:
  // Connects lazily to `docker_host`: "unix:///path/docker.sock" or
  // "tcp://HOST:PORT" (spoken as plain http). Nothing is sent until the first
  // call. kInvalidArgument for any other form.
  static Result<std::unique_ptr<DockerEngine>> FromHost(const std::string& docker_host);

  // GET /version; remembers which engine it is (see Create).
  Result<EngineIdentity> Identify() override;
  Status Ping(std::chrono::milliseconds timeout) override;
  // Sets Image, Cmd, Env, Labels, ExposedPorts and HostConfig (CpusetCpus,
  // CpuQuota/CpuPeriod, Memory with MemorySwap equal to it so that the limit
  // cannot be exceeded through swap, NetworkMode, PortBindings on every host
  // address, DeviceRequests). API 1.41 has no CDI field: each CDI name is sent
  // as a DeviceRequest with Driver "cdi", which engines with CDI support
  // (Docker 25+) resolve and older ones refuse at start.
  // On Podman, which gives a container nofile and nproc limits of its own
  // (1048576) when it is given none, and whose runtime then fails to start
  // it where it lacks CAP_SYS_RESOURCE, each of the two a spec does not name
  // is sent at the limit a container of Docker inherits: the engine's own
  // hard limit (of the process serving its unix socket), or the agent's
  // where lower or where the engine's cannot be read (TCP, another pid
  // namespace). Podman's API ignores device requests (DeviceRequests, CDI
  // names): a spec with any is kFailedPrecondition there, never a container
  // without its devices.
  // kNotFound when the image is missing; kConflict when the name is taken.
  Result<std::string> Create(const ContainerSpec& spec) override;
  // Starting a running container is OK.
  Status Start(const std::string& id) override;
  Status Stop(const std::string& id, std::chrono::seconds timeout) override;
  // kConflict when the container is not running.
  Status Kill(const std::string& id, const std::string& signal = "KILL") override;
  Status Restart(const std::string& id, std::chrono::seconds timeout) override;
  Status UpdateCpuset(const std::string& id, const std::string& cpuset) override;
  Status Rename(const std::string& id, const std::string& name) override;
  // Removes the container's anonymous volumes with it (v=1: those an
  // image's VOLUME made); named volumes stay.
  Status Remove(const std::string& id, bool force) override;
  Result<ContainerInfo> Inspect(const std::string& id) override;
  // GET /containers/{id}/archive, one call per symbolic link followed (at most 8).
  Result<std::string> ReadFile(const std::string& id, const std::string& path, size_t max_bytes) override;
  // An empty `label_filters` lists every container of the engine.
  Result<std::vector<ContainerInfo>> List(const std::vector<std::string>& label_filters) override;
  // A stopped container is kFailedPrecondition (the engine answers it with an
  // empty reading dated at the zero time).
  Result<ContainerStats> Stats(const std::string& id) override;
  // A command still running at `timeout`, or when `stop` becomes true, keeps
  // running in the container (the API cannot kill an exec); only the wait
  // ends. kConflict when the container is not running.
  Result<ExecResult> Exec(const std::string& id, const std::vector<std::string>& command,
                          std::chrono::seconds timeout, const std::atomic<bool>* stop,
                          std::string* exec_id) override;
  // POST /exec/{id}/start with Connection: Upgrade, the connection hijacked
  // (Tty: output comes as written, not multiplexed); then the size is set.
  Result<ExecSession> ExecInteractive(const std::string& id, const std::vector<std::string>& command, int rows,
                                      int cols) override;
  Status ResizeExec(const std::string& exec_id, int rows, int cols) override;
  Result<ExecInfo> InspectExec(const std::string& exec_id) override;
  Status StreamLogs(const std::string& id, int tail, bool follow, const std::function<void()>& on_started,
                    const std::function<bool(std::string_view)>& on_output, const std::atomic<bool>& stop) override;
  // POST /images/create with the progress stream read line by line; an
  // error line in the stream fails the pull with the engine's message.
  Status Pull(const std::string& image, const std::string& registry_auth,
              const std::function<void(const PullMessage&)>& on_message, const std::atomic<bool>& stop) override;
  // GET /distribution/{name}/json: the engine asks the registry.
  Result<std::string> RegistryDigest(const std::string& image, const std::string& registry_auth) override;
  Result<ImageInfo> InspectImage(const std::string& image) override;
  Result<std::vector<ImageInfo>> ListImages() override;
  // GET /info's DockerRootDir, CgroupDriver and CgroupVersion.
  Result<EngineInfo> Info() override;
  // Without force: an image a container uses is kConflict.
  Status RemoveImage(const std::string& id) override;
  Status CreateVolume(const std::string& name, const Labels& labels) override;
  Result<std::vector<VolumeInfo>> ListVolumes(const std::vector<std::string>& label_filters) override;
  Status RemoveVolume(const std::string& name) override;
  // `action` is kept as the engine sends it ("exec_start: sh -c ..." too).
  Status StreamEvents(const std::vector<std::string>& label_filters, const std::vector<std::string>& actions,
                      const std::function<void()>& on_connected,
                      const std::function<void(const EngineEvent&)>& on_event,
                      const std::atomic<bool>& stop) override;

 private:
  DockerEngine(HttpClient http, std::string socket_path);

  // What Create needs to know of the engine, from the last Identify.
  struct Learnt {
    bool podman = false;
    std::map<std::string, int64_t> inherited_ulimits;  // added where a spec does not name them; empty on Docker
  };
  // The engine as last identified; identifies it first when it has not
  // answered yet (Docker's nothing-to-add when it does not answer).
  Learnt KnownEngine();

  const HttpClient http_;          // constant after construction
  const std::string socket_path_;  // the unix socket's path; empty for TCP
  Mutex identity_mutex_;
  std::optional<Learnt> learnt_ GUARDED_BY(identity_mutex_);  // once Identify has answered
  // The output every one-shot exec running now holds (ExecResult::kMaxExecOutputHeld).
  ByteBudget exec_output_{ExecResult::kMaxExecOutputHeld};
};


}  // namespace slotd
