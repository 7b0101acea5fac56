// Agent: the façade over the agent's owners. It builds them in order and
// answers the API (KernelService) and the agent's loops by asking the one
// that owns what is asked: the store (the kernel table and the plugins,
// under the core lock), creating (KernelCreator), ending and stopping
// (KernelEnds), converging on the engine (Converger), timed lives and
// restarts (KernelLifetimes), health (KernelHealth), warm pools
// (WarmKernels), execs and logs (KernelExec), images (NodeImages), devices
// and drains (DeviceManager). It holds no state of its own but the config.
//
// Thread-safety: every public method may be called from any thread.
// store_.mutex guards the kernel table and the plugins; engine calls are
// made without it. The plugins' device meters (and the devices no meter
// measures) are collected once, at construction.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "agent/container_stopper.h"
#include "agent/converger.h"
#include "agent/device_manager.h"
#include "agent/engine_health.h"
#include "agent/event_hub.h"
#include "agent/kernel_creator.h"
#include "agent/kernel_ends.h"
#include "agent/kernel_exec.h"
#include "agent/kernel_files.h"
#include "agent/kernel_health.h"
#include "agent/kernel_lifetimes.h"
#include "agent/kernel_service.h"
#include "agent/kernel_store.h"
#include "agent/kernel_users.h"
#include "agent/node_images.h"
#include "agent/shared_core_pool.h"
#include "agent/warm_kernels.h"
#include "common/clock.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "resources/device_meter.h"
#include "resources/plugin.h"

namespace slotd {

class Agent : public KernelService {
 public:
  // `engine`, `hub` and `clock` must outlive the agent. `clock` measures how
  // old the last relist and the last engine answer are.
  Agent(Config config, ContainerEngine& engine, std::vector<std::unique_ptr<ResourcePlugin>> plugins,
        EventHub& hub, Clock& clock = Clock::Real());

  // Applies what <var-base-path>/state.json records (the agent's drain, the
  // devices' drains and health marks), reports a device layout that changed
  // since (a device_layout event), starts the plugins' health monitors, then
  // rebuilds the kernel table from the owned containers' labels, as Relist
  // does, and flags the kernels on unhealthy or missing devices
  // (ApplyDeviceHealth). Fails (and the agent must not serve) when the
  // [[pool]] entries are refused, the engine cannot be listed, a container's
  // labels cannot be read, or a running kernel holds what this agent's
  // config no longer gives it; the message names the kernel and what to do.
  // A running container on resources that a newer kernel holds (started
  // again behind the agent's back) is no reason to refuse: it is stopped,
  // TERMINATED "stopped by slotd: ...". A warm pool's kernel never given
  // whose [[pool]] entry is gone or changed is removed, not adopted (its
  // removal failing refuses the start). `listed`: the engine's containers,
  // every owner's or this agent's, as listed just before (the admission's
  // list, so that a start lists once); unset: Restore lists them.
  Status Restore(std::optional<std::vector<ContainerInfo>> listed = std::nullopt);

  // ---- KernelService (kernel_service.h says what each answers)

  // A request that a warm pool serves (MatchesPool) is given one of its
  // WARM kernels when one is ready (WarmKernels::Give), and created as any
  // other (KernelCreator::Create) when none is.
  Result<CreateOutcome> CreateKernel(const CreateRequest& request) override;
  std::vector<std::shared_ptr<const std::string>> ListKernelRecords(bool with_warm) const override;
  Result<std::shared_ptr<const std::string>> KernelRecord(const std::string& kernel_id) const override;
  std::vector<Kernel> ListKernels() const override;
  Result<Kernel> GetKernel(const std::string& kernel_id) const override { return store_.Get(kernel_id); }
  Result<Kernel> DeleteKernel(const std::string& kernel_id) override { return ends_.Delete(kernel_id); }
  Result<Kernel> RestartKernel(const std::string& kernel_id) override { return lifetimes_.Restart(kernel_id); }
  Result<ExecResult> Exec(const std::string& kernel_id, const std::vector<std::string>& command,
                          std::chrono::seconds timeout, const std::atomic<bool>* stop = nullptr,
                          std::string* exec_id = nullptr) override {
    return exec_.Exec(kernel_id, command, timeout, stop, exec_id);
  }
  Result<ExecSession> ExecInteractive(const std::string& kernel_id, const std::vector<std::string>& command, int rows,
                                      int cols) override {
    return exec_.ExecInteractive(kernel_id, command, rows, cols);
  }
  void InteractiveExecEnded(const std::string& kernel_id) override { exec_.InteractiveExecEnded(kernel_id); }
  Result<ExecInfo> InspectExec(const std::string& kernel_id, const std::string& exec_id) override {
    return exec_.InspectExec(kernel_id, exec_id);
  }
  Status HangUpExec(const std::string& kernel_id, const std::string& exec_id, std::chrono::milliseconds grace) override {
    return exec_.HangUpExec(kernel_id, exec_id, grace);
  }
  Status ResizeExec(const std::string& kernel_id, const std::string& exec_id, int rows, int cols) override {
    return exec_.ResizeExec(kernel_id, exec_id, rows, cols);
  }
  Status StreamLogs(const std::string& kernel_id, int tail, bool follow, const std::function<void()>& on_started,
                    const std::function<bool(std::string_view)>& on_output, const std::atomic<bool>& stop) override {
    return exec_.StreamLogs(kernel_id, tail, follow, on_started, on_output, stop);
  }
  Result<ImageInfo> PullImage(const std::string& image) override { return images_.PullNow(image); }
  Result<std::vector<NodeImage>> ListImages() override { return images_.List(); }
  // Capacity, used and free per slot type, merged from the plugins.
  nlohmann::json DescribeResources() const override;
  Drain Draining() const override { return devices_.Draining(); }
  // While draining, CreateKernel is kUnavailable naming the drain; its
  // kernels run on. A drain with a deadline also restarts none, warns each
  // RUNNING kernel with warn_before its `before` ahead of the deadline
  // (WarnKernels), and stops those still there at the deadline, TERMINATED
  // "drained" (StopExpiredKernels). `within`: how long from now until the
  // deadline; unset: none (or the one set before).
  Result<Drain> SetDraining(bool drain, std::optional<std::chrono::milliseconds> within = std::nullopt) override;
  Result<DeviceChange> DrainDevice(const std::string& name, bool drain) override { return devices_.DrainDevice(name, drain); }
  Result<DeviceChange> ClearDevice(const std::string& name) override { return devices_.ClearDevice(name); }
  std::vector<DeviceState> DeviceStates() const override { return devices_.DeviceStates(); }
  const std::vector<WarmPool>& Pools() const override { return warm_.Pools(); }
  std::map<std::string, PoolCount> CountPools() const override { return warm_.Count(); }
  double LastSyncAgeSeconds() const override { return engine_health_.LastSyncAgeSeconds(); }
  bool EngineReachable() const override { return engine_health_.Reachable(); }
  bool EngineKnownDown() const override { return engine_health_.KnownDown(kEngineDownAfter); }
  const Config& config() const override { return config_; }

  // ---- the agent's loops and the daemon

  // The owners, for the agent's loops, the stats and the daemon: each is
  // asked for what it owns (its header says what it promises). References
  // into this agent, valid while it lives.
  struct Owners {
    Converger& converger;        // engine events and relists
    KernelLifetimes& lifetimes;  // timed ends, warnings, idle windows, restarts
    KernelHealth& health;        // health checks, cgroup readings, device health
    KernelEnds& ends;            // the stop queue
    WarmKernels& warm;           // the warm pools
    NodeImages& images;          // registry credentials, image collection
    KernelUsers& users;          // the image-user probes
    DeviceManager& devices;      // device meters and health
    EngineHealth& engine_health;  // the engine's answers
  };
  Owners owners() {
    return {converger_, lifetimes_, health_, ends_, warm_, images_, users_, devices_, engine_health_};
  }
  // Queries of the kernels (KernelStore).
  using RunningKernel = KernelStore::RunningKernel;
  std::vector<RunningKernel> RunningKernels() const { return store_.RunningKernels(); }
  int ActiveKernels() const { return store_.ActiveKernels(); }
  // The types the loops and the stats hand the owners.
  using HealthTarget = KernelHealth::Target;
  using KernelCgroupReading = KernelHealth::CgroupReading;
  using KernelActivity = KernelLifetimes::Activity;
  // How long a successful answer keeps the engine reachable without another.
  static constexpr std::chrono::seconds kEngineAnswerFresh = EngineHealth::kAnswerFresh;

 private:
  const Config config_;
  ContainerEngine& engine_;
  EventHub& hub_;
  Clock& clock_;

  // The owners, each of its own state; what they share is the store.
  KernelStore store_;  // the kernel table and the plugins, under the core lock (store_.mutex)
  KernelExec exec_;  // execs and logs
  const ContainerStopper stopper_;  // the one way a kernel's container is stopped
  SharedCorePool shared_pool_;  // the shared kernels' cores, following the pool
  KernelFiles files_;  // scratch, mount binds and warm claims; thread-safe
  NodeImages images_;  // pulls, lists and collects the engine's images; thread-safe
  KernelUsers users_;  // who kernels run as: decided at create, checked after each start; thread-safe
  DeviceManager devices_;  // drains, health marks, state.json; thread-safe, never called under store_.mutex
  EngineHealth engine_health_;  // whether the engine answers
  KernelEnds ends_;  // restart policies applied to ends, stops, deletes
  KernelCreator creator_;  // creates
  WarmKernels warm_;  // the warm pools' kernels
  Converger converger_;  // relists, events, adoption, drift
  KernelLifetimes lifetimes_;  // lifetimes, warnings, idle windows, restarts
  KernelHealth health_;  // health checks, cgroup readings, device health
};

}  // namespace slotd
