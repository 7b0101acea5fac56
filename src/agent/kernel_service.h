// KernelService: what the API asks of the agent, and nothing more. The
// agent implements it (Agent); ApiServer takes it, so that each route's
// handler is tested in-process against a fake (tests/testing/).
//
// Thread-safety: every method may be called from any thread at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/device_manager.h"
#include "agent/warm_pool.h"
#include "common/status.h"
#include "config/config.h"
#include "model/container.h"
#include "model/kernel.h"

namespace slotd {

class KernelService {
 public:
  virtual ~KernelService() = default;

  // ---- kernels

  // The outcome of a create: the kernel, and whether this call created it
  // (false: an identical earlier request did).
  struct CreateOutcome {
    Kernel kernel;
    bool created = false;
  };
  // Allocates, creates and starts a kernel, all or nothing. A repeat of the
  // same request returns the existing kernel; a different request with the
  // same id, or one naming a warm pool's kernel not yet given, is
  // kConflict; no room is kResourceExhausted; an unknown slot type is
  // kInvalidArgument; an unknown image is kNotFound naming it; while the
  // agent drains, kUnavailable naming the drain.
  virtual Result<CreateOutcome> CreateKernel(const CreateRequest& request) = 0;
  // Each kernel's record as the API shows it (Kernel::ToJson, as text), in
  // id order; a warm pool's kernels not yet given only `with_warm`.
  virtual std::vector<std::shared_ptr<const std::string>> ListKernelRecords(bool with_warm) const = 0;
  // One kernel's record, as in ListKernelRecords; kNotFound naming it.
  virtual Result<std::shared_ptr<const std::string>> KernelRecord(const std::string& kernel_id) const = 0;
  // Every kernel, in id order (warm pools' too).
  virtual std::vector<Kernel> ListKernels() const = 0;
  // The kernel; kNotFound naming it.
  virtual Result<Kernel> GetKernel(const std::string& kernel_id) const = 0;
  // Stops and removes the container, frees the kernel and forgets it;
  // returns the final record. When the engine fails, the kernel and its
  // resources are kept and the error returned.
  virtual Result<Kernel> DeleteKernel(const std::string& kernel_id) = 0;
  // Restarts the container, keeping (or taking again) its allocation;
  // kResourceExhausted when it was given away meanwhile.
  virtual Result<Kernel> RestartKernel(const std::string& kernel_id) = 0;

  // ---- exec and output

  // Runs `command` in the RUNNING kernel and waits for it, at most
  // `timeout`; `stop` set ends the wait (kUnavailable) and `exec_id`
  // receives the exec's id once it exists.
  virtual Result<ExecResult> Exec(const std::string& kernel_id, const std::vector<std::string>& command,
                                  std::chrono::seconds timeout, const std::atomic<bool>* stop = nullptr,
                                  std::string* exec_id = nullptr) = 0;
  // Starts `command` in the RUNNING kernel with a terminal of `rows` x
  // `cols`; the caller relays the session, closes it and calls
  // InteractiveExecEnded.
  virtual Result<ExecSession> ExecInteractive(const std::string& kernel_id, const std::vector<std::string>& command,
                                              int rows, int cols) = 0;
  // An interactive exec of `kernel_id` ended.
  virtual void InteractiveExecEnded(const std::string& kernel_id) = 0;
  // What the engine says of `kernel_id`'s exec `exec_id`; kNotFound when it
  // is not an exec of this kernel's container.
  virtual Result<ExecInfo> InspectExec(const std::string& kernel_id, const std::string& exec_id) = 0;
  // Ends the exec if it still runs: SIGHUP, then SIGKILL after `grace`.
  virtual Status HangUpExec(const std::string& kernel_id, const std::string& exec_id,
                            std::chrono::milliseconds grace) = 0;
  // Sets the terminal size of the exec; errors as InspectExec's.
  virtual Status ResizeExec(const std::string& kernel_id, const std::string& exec_id, int rows, int cols) = 0;
  // Streams the kernel's output (ContainerEngine::StreamLogs); kNotFound
  // for an unknown kernel.
  virtual Status StreamLogs(const std::string& kernel_id, int tail, bool follow,
                            const std::function<void()>& on_started,
                            const std::function<bool(std::string_view)>& on_output,
                            const std::atomic<bool>& stop) = 0;

  // ---- images

  // One image of the engine, with its use.
  struct NodeImage {
    ImageInfo info;
    int64_t last_used = 0;                // unix seconds: the newest container made from it, of any owner; 0: none
    std::vector<std::string> kernel_ids;  // this agent's kernels whose container runs it
  };
  // Every image of the engine, newest use first.
  virtual Result<std::vector<NodeImage>> ListImages() = 0;
  // Pulls `image` now, whether or not it is there; returns it as the engine has it.
  virtual Result<ImageInfo> PullImage(const std::string& image) = 0;

  // ---- the agent and its devices

  using Drain = DeviceManager::Drain;
  using DeviceChange = DeviceManager::DeviceChange;
  using DeviceState = DeviceManager::DeviceState;
  // Whether the agent drains, since when, and its deadline.
  virtual Drain Draining() const = 0;
  // Drains or opens the agent; `within`: how long from now until the
  // deadline; unset: none (or the one set before). kUnavailable when the
  // record cannot be written.
  virtual Result<Drain> SetDraining(bool drain, std::optional<std::chrono::milliseconds> within = std::nullopt) = 0;
  // The devices with their drains and health marks.
  virtual std::vector<DeviceState> DeviceStates() const = 0;
  virtual Result<DeviceChange> DrainDevice(const std::string& name, bool drain) = 0;
  virtual Result<DeviceChange> ClearDevice(const std::string& name) = 0;
  // Capacity, used and free per slot type.
  virtual nlohmann::json DescribeResources() const = 0;
  // The warm pools as [[pool]] gives them, and per pool how many kernels it
  // has and why its latest could not be made.
  virtual const std::vector<WarmPool>& Pools() const = 0;
  struct PoolCount {
    int warm = 0;
    int making = 0;
    std::string trouble;   // the failure's message; empty: none since its last kernel made
    int64_t retry_at = 0;  // with trouble: when the pool is tried again (unix seconds)
  };
  virtual std::map<std::string, PoolCount> CountPools() const = 0;

  // ---- health of the agent

  // Seconds since the last successful relist (or restore); negative if never.
  virtual double LastSyncAgeSeconds() const = 0;
  // Whether the engine answered recently.
  virtual bool EngineReachable() const = 0;
  // Whether the engine is known not to answer (nothing answered for
  // kEngineDownAfter): routes that would wait on it refuse at once.
  virtual bool EngineKnownDown() const = 0;
  static constexpr std::chrono::seconds kEngineDownAfter{5};

  // The agent's configuration.
  virtual const Config& config() const = 0;
};

}  // namespace slotd
