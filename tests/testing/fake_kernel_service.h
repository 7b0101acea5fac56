// FakeKernelService: a KernelService in memory, for the API's handler
// tests. It keeps the kernels a test gives it, answers each call from them
// (or with the error a test queued for that call), and records every call
// it was made with what it was given, so a test sees what a route asked.
// No engine, no plugin, no rule of the agent's: those are the agent's tests.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/kernel_service.h"
#include "common/mutex.h"

namespace slotd {

class FakeKernelService : public KernelService {
 public:
  FakeKernelService();
  ~FakeKernelService() override;

  // ---- set up by a test

  // Keeps `kernel` (by its id), as later calls find it.
  void Put(const Kernel& kernel) EXCLUDES(mutex_);
  // The next call of `method` (its name: "CreateKernel", "DeleteKernel",
  // ...) answers `status` instead of doing anything; queued per method.
  void FailNext(const std::string& method, Status status) EXCLUDES(mutex_);
  // What Exec answers, what StreamLogs streams, what ListImages gives, and
  // what InspectExec says.
  void SetExecResult(ExecResult result) EXCLUDES(mutex_);
  void SetLogs(std::vector<std::string> chunks) EXCLUDES(mutex_);
  void SetImages(std::vector<NodeImage> images) EXCLUDES(mutex_);
  void SetExecInfo(ExecInfo info) EXCLUDES(mutex_);
  void SetEngineKnownDown(bool down) { engine_down_ = down; }
  // The test's end of the latest ExecInteractive's terminal (a socket pair:
  // what the test writes there is the command's output, what it reads is
  // the client's input); -1 when none was started. The caller closes it.
  int TakeTerminalPeer() EXCLUDES(mutex_);

  // ---- read by a test

  // Every call so far, in order, as "Method arg arg..." (kernel ids, exec
  // ids, device names, the pulled image, drain flags, terminal sizes).
  std::vector<std::string> Calls() const EXCLUDES(mutex_);
  // The command of the latest Exec or ExecInteractive.
  std::vector<std::string> LastExecCommand() const EXCLUDES(mutex_);

  // ---- KernelService

  Result<CreateOutcome> CreateKernel(const CreateRequest& request) override EXCLUDES(mutex_);
  std::vector<std::shared_ptr<const std::string>> ListKernelRecords(bool with_warm) const override EXCLUDES(mutex_);
  Result<std::shared_ptr<const std::string>> KernelRecord(const std::string& kernel_id) const override
      EXCLUDES(mutex_);
  std::vector<Kernel> ListKernels() const override EXCLUDES(mutex_);
  Result<Kernel> GetKernel(const std::string& kernel_id) const override EXCLUDES(mutex_);
  Result<Kernel> DeleteKernel(const std::string& kernel_id) override EXCLUDES(mutex_);
  Result<Kernel> RestartKernel(const std::string& kernel_id) override EXCLUDES(mutex_);
  Result<ExecResult> Exec(const std::string& kernel_id, const std::vector<std::string>& command,
                          std::chrono::seconds timeout, const std::atomic<bool>* stop = nullptr,
                          std::string* exec_id = nullptr) override EXCLUDES(mutex_);
  Result<ExecSession> ExecInteractive(const std::string& kernel_id, const std::vector<std::string>& command, int rows,
                                      int cols) override EXCLUDES(mutex_);
  void InteractiveExecEnded(const std::string& kernel_id) override EXCLUDES(mutex_);
  Result<ExecInfo> InspectExec(const std::string& kernel_id, const std::string& exec_id) override EXCLUDES(mutex_);
  Status HangUpExec(const std::string& kernel_id, const std::string& exec_id,
                    std::chrono::milliseconds grace) override EXCLUDES(mutex_);
  Status ResizeExec(const std::string& kernel_id, const std::string& exec_id, int rows, int cols) override
      EXCLUDES(mutex_);
  Status StreamLogs(const std::string& kernel_id, int tail, bool follow, const std::function<void()>& on_started,
                    const std::function<bool(std::string_view)>& on_output,
                    const std::atomic<bool>& stop) override EXCLUDES(mutex_);
  Result<std::vector<NodeImage>> ListImages() override EXCLUDES(mutex_);
  Result<ImageInfo> PullImage(const std::string& image) override EXCLUDES(mutex_);
  Drain Draining() const override EXCLUDES(mutex_);
  Result<Drain> SetDraining(bool drain, std::optional<std::chrono::milliseconds> within = std::nullopt) override
      EXCLUDES(mutex_);
  std::vector<DeviceState> DeviceStates() const override { return {}; }
  Result<DeviceChange> DrainDevice(const std::string& name, bool drain) override EXCLUDES(mutex_);
  Result<DeviceChange> ClearDevice(const std::string& name) override EXCLUDES(mutex_);
  nlohmann::json DescribeResources() const override;
  const std::vector<WarmPool>& Pools() const override { return pools_; }
  std::map<std::string, PoolCount> CountPools() const override { return {}; }
  double LastSyncAgeSeconds() const override { return 0.5; }
  bool EngineReachable() const override { return !engine_down_; }
  bool EngineKnownDown() const override { return engine_down_; }
  const Config& config() const override { return config_; }

 private:
  // Records the call.
  void Record(const std::string& method, const std::string& args) const REQUIRES(mutex_);
  // Records the call and takes the error queued for `method`, if any.
  Status Enter(const std::string& method, const std::string& args) const REQUIRES(mutex_);
  // The kernel `kernel_id`, or kNotFound naming it as the agent does.
  Result<Kernel> Find(const std::string& kernel_id) const REQUIRES(mutex_);

  mutable Mutex mutex_;
  std::map<std::string, Kernel> kernels_ GUARDED_BY(mutex_);
  mutable std::map<std::string, std::deque<Status>> failures_ GUARDED_BY(mutex_);
  mutable std::vector<std::string> calls_ GUARDED_BY(mutex_);
  std::vector<std::string> last_exec_command_ GUARDED_BY(mutex_);
  ExecResult exec_result_ GUARDED_BY(mutex_);
  std::vector<std::string> logs_ GUARDED_BY(mutex_);
  std::vector<NodeImage> images_ GUARDED_BY(mutex_);
  ExecInfo exec_info_ GUARDED_BY(mutex_);
  int terminal_peer_ GUARDED_BY(mutex_) = -1;
  Drain drain_ GUARDED_BY(mutex_);
  std::atomic<bool> engine_down_{false};
  Config config_;
  std::vector<WarmPool> pools_;
};

}  // namespace slotd
