// Agent: the core. Owns the kernel table and, through the resource plugins,
// every allocation. The API asks it, it decides, the engine acts; what the
// engine reports (events, relists) flows back in through OnEngineEvent and
// Relist.
//
// Thread-safety: every public method may be called from any thread. store_.mutex
// guards the kernel table and the plugins; engine calls are made without it.
// The plugins' device meters (and the devices no meter measures) are
// collected once, at construction; the meters are thread-safe objects used
// without store_.mutex.
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

#include "agent/device_manager.h"
#include "agent/event_hub.h"
#include "agent/health_prober.h"
#include "agent/image_gc.h"
#include "agent/image_puller.h"
#include "agent/kernel_service.h"
#include "model/image_user.h"
#include "model/kernel.h"
#include "agent/container_stopper.h"
#include "agent/kernel_exec.h"
#include "agent/kernel_store.h"
#include "agent/kernel_users.h"
#include "agent/node_images.h"
#include "agent/shared_core_pool.h"
#include "agent/kernel_table.h"
#include "agent/mount_stage.h"
#include "agent/mounts.h"
#include "model/reconcile.h"
#include "agent/scratch.h"
#include "agent/warm_pool.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "config/config.h"
#include "engine/container_engine.h"
#include "resources/plugin.h"
#include "resources/device_meter.h"

namespace slotd {

class Agent : public KernelService {
 public:
  // `engine`, `hub` and `clock` must outlive the agent. `clock` measures how
  // old the last relist and the last engine answer are.
  Agent(Config config, ContainerEngine& engine, std::vector<std::unique_ptr<ResourcePlugin>> plugins,
        EventHub& hub, Clock& clock = Clock::Real());

  // Applies what <var-base-path>/state.json records (the agent's drain, the
  // devices' drains and health marks), reports a device layout that changed since (a device_layout
  // event), starts the plugins' health monitors, then rebuilds the kernel
  // table from the owned containers' labels, as Relist does, and flags the
  // kernels on unhealthy or missing devices (ApplyDeviceHealth). Fails (and the agent must not serve) when the engine cannot be
  // listed, a container's labels cannot be read, or a running kernel holds
  // what this agent's config no longer gives it; the message names the
  // kernel and what to do. A running container on resources that a newer
  // kernel holds (started again behind the agent's back) is no reason to
  // refuse: it is stopped, TERMINATED "stopped by slotd: ...". A warm
  // pool's kernel never given whose [[pool]] entry is gone or changed is
  // removed, not adopted (its removal failing refuses the start).
  // `listed`: the engine's containers, every owner's or this agent's, as
  // listed just before (the admission's list, so that a start lists once);
  // unset: Restore lists them.
  Status Restore(std::optional<std::vector<ContainerInfo>> listed = std::nullopt);

  // Allocates, creates and starts a kernel. All-or-nothing: on any failure
  // nothing stays allocated and no container is left behind. A repeat of the
  // same request returns the existing kernel; a different request with the
  // same id is kConflict, and so is any request naming the id of a warm
  // pool's kernel not yet given (no create's, so nobody's to repeat); no
  // room is kResourceExhausted; an unknown slot type is kInvalidArgument;
  // an unknown image is kNotFound naming it. A request that a warm pool
  // serves (MatchesPool) is given one of its WARM kernels when one is ready
  // (GiveWarm), and created as any other when none is.
  Result<CreateOutcome> CreateKernel(const CreateRequest& request) override;

  // Removes the containers made to read images' users that an earlier run
  // of this agent left behind (KernelUsers::RemoveProbes).
  void RemoveUserProbes() { users_.RemoveProbes(); }

  // One round of keeping the warm pools ([[pool]]) full: removes the pools'
  // kernels that ended before any create was given them, and WARM kernels
  // no pool wants (its entry gone or changed, or more than its count, or
  // any while the agent drains: none can be given), then creates what each
  // pool lacks, one after another until `stop` is asked for. Nothing is
  // made while the agent drains. Nothing is reserved for a pool before its
  // image is on the node (pulled first where [container] auto-pull allows).
  // Failures are logged and kept (PoolCount::trouble); a pool whose kernel
  // could not be made is tried again 10 s later, twice as long after each
  // failure in a row, at most 5 minutes.
  void FillPools(const std::stop_token& stop) EXCLUDES(store_.mutex);
  // The pools, as [[pool]] gives them.
  const std::vector<WarmPool>& Pools() const override { return pools_; }
  // Per pool: how many WARM kernels it has now, how many are being made,
  // and why its latest kernel could not be made, while that holds.
  std::map<std::string, PoolCount> CountPools() const override EXCLUDES(store_.mutex);

  std::vector<Kernel> ListKernels() const override;
  Result<Kernel> GetKernel(const std::string& kernel_id) const override;
  // Each kernel's record as the API shows it (Kernel::ToJson, as text), in
  // id order; a warm pool's kernels (made, WARM, or ended unused) only
  // `with_warm`. A record is made once per change of its kernel, so the
  // agent's lock is held for little more than a pointer copy per kernel.
  std::vector<std::shared_ptr<const std::string>> ListKernelRecords(bool with_warm) const override;
  // One kernel's record, as in ListKernelRecords; kNotFound as GetKernel.
  Result<std::shared_ptr<const std::string>> KernelRecord(const std::string& kernel_id) const override;

  // The node's images (NodeImages).
  Status LoadRegistryCredentials() { return images_.LoadCredentials(); }
  Result<ImageInfo> PullImage(const std::string& image) override { return images_.PullNow(image); }
  Result<std::vector<NodeImage>> ListImages() override { return images_.List(); }
  Result<std::vector<std::string>> CollectImages() { return images_.Collect(); }

  // Stops and removes the container, then frees the kernel's resources and
  // forgets it; returns the final record. If the engine fails, the kernel and
  // its resources are kept and the error is returned.
  Result<Kernel> DeleteKernel(const std::string& kernel_id) override;

  // Restarts the container keeping its allocation (re-taking it if the kernel
  // had terminated; kResourceExhausted if it was given away meanwhile).
  Result<Kernel> RestartKernel(const std::string& kernel_id) override;
  // Stops every RUNNING or BACKOFF kernel whose deadline (unix seconds) is
  // not after `now`, or every one once the drain's deadline is not after
  // `now`: its container is stopped as its stop contract says and it becomes
  // TERMINATED with reason "lifetime exceeded" (or "drained") (its resources freed, an event emitted); a
  // kernel that a call holds waits for the next round, and one whose
  // container cannot be stopped stays as it was for the next.
  void StopExpiredKernels(int64_t now) EXCLUDES(store_.mutex);
  // Sends each RUNNING kernel with a warn_before whose lifetime, idle window
  // or drain's deadline ends within it (that end minus `before` not after
  // `now`, unix seconds) its warning signal, once: its container is renamed
  // to record it first (so no agent restart sends it again), then signalled
  // (kernel_warned). A kernel without warn_before is sent nothing. A kernel
  // that a call holds, or whose rename fails, waits for the next round.
  void WarnKernels(int64_t now) EXCLUDES(store_.mutex);
  // Starts again every BACKOFF kernel whose next_restart_at_ms is not after
  // `now_ms` and that nothing else acts on: renames its container to record
  // one more restart (ContainerName), then starts it: RUNNING
  // (kernel_restarted). A start that fails is an end like any other
  // (BACKOFF again, or TERMINATED at the limit). Returns when the next
  // BACKOFF kernel is due (unix milliseconds), if one is.
  std::optional<int64_t> RestartDueKernels(int64_t now_ms) EXCLUDES(store_.mutex);

  // Execs and logs (KernelExec).
  Result<ExecResult> Exec(const std::string& kernel_id, const std::vector<std::string>& command,
                          std::chrono::seconds timeout, const std::atomic<bool>* stop = nullptr,
                          std::string* exec_id = nullptr) override {
    return exec_.Exec(kernel_id, command, timeout, stop, exec_id);
  }
  Result<ExecSession> ExecInteractive(const std::string& kernel_id, const std::vector<std::string>& command, int rows,
                                      int cols) override {
    return exec_.ExecInteractive(kernel_id, command, rows, cols);
  }
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

  // Capacity, used and free per slot type, merged from the plugins.
  nlohmann::json DescribeResources() const override;

  // How many kernels of the agent's users have not ended (neither
  // TERMINATED nor ERROR); a warm pool's kernels, made or WARM, are not
  // theirs until given (CountPools counts them).
  int ActiveKernels() const EXCLUDES(store_.mutex);

  // The devices (DeviceManager): drains of the agent and of its devices,
  // health marks, and their record in state.json.
  Result<DeviceChange> DrainDevice(const std::string& name, bool drain) override { return devices_.DrainDevice(name, drain); }
  Result<DeviceChange> ClearDevice(const std::string& name) override { return devices_.ClearDevice(name); }
  // While draining, CreateKernel is kUnavailable naming the drain; its
  // kernels run on. A drain with a deadline (unix seconds) also restarts
  // none, warns each RUNNING kernel with warn_before its `before` ahead of
  // the deadline (WarnKernels; no other kernel is signalled before it), and
  // stops those still there at the deadline, TERMINATED "drained"
  // (StopExpiredKernels).
  Drain Draining() const override { return devices_.Draining(); }
  // `within`: how long from now until the deadline; unset: none (or the one set before).
  Result<Drain> SetDraining(bool drain, std::optional<std::chrono::milliseconds> within = std::nullopt) override;
  std::vector<DeviceState> DeviceStates() const override { return devices_.DeviceStates(); }
  // Brings the kernels in line with their devices' health when it changed
  // (cheap when it did not; DeviceManager::HealthChange reports the devices):
  // the condition of each kernel on an unhealthy device (kernel_condition),
  // and the stop of such kernels where the plugin says so (TERMINATED
  // "device unhealthy").
  void ApplyDeviceHealth() EXCLUDES(store_.mutex);
  // Has `listener` called at each change of a device's health, from the
  // thread that made it (a health monitor's, an API call's): a cue to call
  // ApplyDeviceHealth soon. It must be quick; empty: none.
  void OnDeviceHealthChange(const std::function<void()>& listener) { devices_.OnHealthChange(listener); }

  // A RUNNING kernel as the stats loop measures it: its container and the
  // devices it holds (plugin name -> device ids); no more is copied.
  struct RunningKernel {
    std::string kernel_id;
    std::string container_id;
    std::map<std::string, std::vector<std::string>> devices;
    int shared_cpu_millis = 0;  // its quota from the shared pool; 0: exclusive cores
  };
  // Every RUNNING kernel that has a container, in kernel id order.
  std::vector<RunningKernel> RunningKernels() const EXCLUDES(store_.mutex);
  // A RUNNING kernel with a health check, as the health keeper probes it.
  struct HealthTarget {
    std::string kernel_id;
    std::string container_id;
    uint64_t run = 0;  // Kernel::runs: another value is another start, and another start period
    HealthRule rule;
    ProbeAddress address;  // where an HTTP or TCP check connects ([container] network decides)
  };
  // Every RUNNING kernel with a health check and a container that no call owns.
  std::vector<HealthTarget> HealthTargets() const EXCLUDES(store_.mutex);
  // Records one probe of `kernel_id`'s container `container_id` (unless the
  // kernel moved on meanwhile): its health, the events kernel_ready,
  // kernel_unhealthy and kernel_healthy, and, when it has just become
  // unhealthy, what its on_unhealthy says: its container stopped and its
  // end "unhealthy" (restart: as its restart policy says; stop: TERMINATED).
  // Takes store_.mutex itself; stops without it.
  void RecordHealth(const std::string& kernel_id, const std::string& container_id, const ProbeResult& result,
                    bool in_start_period) EXCLUDES(store_.mutex);

  // How busy a RUNNING kernel was over the last stats interval.
  struct KernelActivity {
    std::string kernel_id;
    std::string container_id;
    double cpu_percent = 0;             // of one core (two busy cores: 200)
    std::optional<double> gpu_percent;  // the busiest device it holds, where a meter measures; unset: none measured
    int64_t at_ms = 0;                  // when measured, unix milliseconds
  };
  // Brings each RUNNING kernel's idle window (idle_since_ms) up to date with
  // `activity`, as its idle rule says (ResolveIdle): below both marks and
  // with no interactive exec open nor any exec in the last two stats
  // intervals, its window starts (kernel_idle) or goes on; otherwise it
  // ends. StopExpiredKernels stops a kernel whose window has lasted its
  // `for` ("idle"); WarnKernels warns it `before` that.
  void NoteActivity(const std::vector<KernelActivity>& activity) EXCLUDES(store_.mutex);
  // What a RUNNING kernel's cgroup says (CgroupSample): how many of its
  // processes were killed for lack of memory, and the cores it may run on.
  struct KernelCgroupReading {
    std::string kernel_id;
    std::string container_id;
    uint64_t oom_kills = 0;
    std::string cpuset_cpus;  // as cpuset.cpus lists them ("0-3,8"); empty: not read
  };
  // For each RUNNING kernel read: raises its oom_kills to its cgroup's count
  // where that is higher (its condition says so, kernel_condition, and its
  // end with code 137 after it is "out of memory"); and when its cpuset
  // differs from the one last read, keeps it (Kernel::cgroup_cpuset) and
  // checks its drift (CheckDrift, which takes it over inspect's). A sweep
  // that finds nothing changed only compares. The
  // engine's oom and update events say the same on Docker; this is what
  // tells them on an engine that sends none (Podman).
  void NoteCgroupReadings(const std::vector<KernelCgroupReading>& readings) EXCLUDES(store_.mutex);
  void InteractiveExecEnded(const std::string& kernel_id) override { exec_.InteractiveExecEnded(kernel_id); }

  // The plugins' device meters, in plugin order; plugins without measures
  // (mock, cpu, ...) have none. The same objects on every call.
  std::vector<std::shared_ptr<DeviceMeter>> DeviceMeters() const { return devices_.Meters(); }
  // The owned devices of plugins that have devices but no meter (mock), by
  // plugin name: the stats list them as not measured.
  const std::map<std::string, std::vector<std::string>>& UnmeteredDevices() const { return devices_.Unmetered(); }

  // Applies one event of the owner-filtered engine stream. Returns true when
  // the event names an owned container the agent does not know, so a relist
  // should run to adopt it.
  bool OnEngineEvent(const EngineEvent& event);

  // Lists the owned containers and converges the kernel table on them, as
  // reconcile::DecideOnContainer says: adopts unknown ones, marks dead ones
  // TERMINATED and frees them, forgets vanished ones, stops intruders, checks
  // paused containers for drift. Frees nothing when the list fails.
  Status Relist();

  // Seconds since the last successful relist (or restore); negative if never.
  double LastSyncAgeSeconds() const override;
  // Whether the engine answered the latest round trip (a probe, relist or
  // restore) and that answer is recent (kEngineAnswerFresh): a hung engine
  // is not reachable, even while its sockets stay open.
  bool EngineReachable() const override;
  // Records a round trip to the engine made outside the agent (the
  // watcher's probe): whether the engine answered it in time.
  void RecordEngineAnswer(bool answered);
  // How long a successful answer keeps the engine reachable without another.
  static constexpr std::chrono::seconds kEngineAnswerFresh{6};
  // Whether the engine is known not to answer: not reachable, and nothing
  // answered for kEngineDownAfter. One probe that a busy node slowed past
  // its deadline is not enough; a hung engine is, within about 6 s. Routes
  // that would wait on the engine refuse at once while it is.
  bool EngineKnownDown() const override;

  const Config& config() const override { return config_; }

 private:
  // CreateKernel once no warm kernel serves `request`; `warm_pool`: the pool
  // the kernel is made for (it ends WARM, with no deadline), or empty.
  Result<CreateOutcome> CreateKernelFor(const CreateRequest& request, const std::string& warm_pool);
  // Gives `request` a WARM kernel of the first pool it matches: its record
  // (WarmClaims) written, then the kernel RUNNING as the request with the
  // warm kernel's id. nullopt when no pool serves it or none has a WARM
  // kernel free (the create goes on as any other), or when the record
  // cannot be written (logged).
  std::optional<CreateOutcome> GiveWarm(const CreateRequest& request) EXCLUDES(store_.mutex);
  // What Adopt makes of a running container made for a warm pool: RUNNING
  // as its record says when it was given to a create (`kernel` then takes
  // the record's request, creation and deadline, and leaves its pool),
  // WARM otherwise. Errors: a record that cannot be read.
  Result<KernelState> WarmStateOf(Kernel& kernel) const;
  // When a kernel of `request` created at `from` (unix seconds) reaches the
  // end of its lifetime: its max_lifetime, else [container] max-lifetime,
  // rounded up to whole seconds; unset when neither sets one.
  std::optional<int64_t> DeadlineOf(const CreateRequest& request, int64_t from) const;
  // What CreateKernel decides before it reserves anything: the pull policy
  // and the request's mounts, resolved.
  struct Admitted {
    PullPolicy policy;
    std::vector<ResolvedMount> mounts;
  };
  // The refusal of what `request` may not ask of this agent whatever it
  // holds (device variables, mounts, a looser pull policy, a lifetime past
  // the cap, a scratch size it cannot enforce); otherwise what it admits.
  Result<Admitted> Admit(const CreateRequest& request) const;
  // Brings the image of `kernel`, reserved PULLING by CreateKernel, onto the
  // node as `policy` asks and decides the user it runs as (KernelUsers::Decide);
  // then the kernel is PREPARING. On failure, undoes the reservation.
  Result<RunAs> PrepareImage(const CreateRequest& request, PullPolicy policy);
  // After a start: what the kernel's first process sees at each mount is
  // what was checked (VerifyMounted), and it runs as `run_as` and not as
  // root unless allowed (KernelUsers::VerifyIds). kPermissionDenied saying which.
  Status VerifyStarted(const std::string& kernel_id, const std::string& container_id,
                       const std::vector<ResolvedMount>& mounts, const std::optional<RunAs>& run_as);
  // Removes `kernel_id`'s scratch, its mounts' binds and its record of a
  // warm kernel given to it, logging what fails.
  void RemoveKernelFiles(const std::string& kernel_id);
  // Ok while the scratch root's filesystem has [container] scratch-min-free
  // free; kResourceExhausted ("insufficient scratch space", both sizes and
  // what to do) below it.
  Status CheckScratchRoom() const;
  // Undoes CreateKernel's reservation of a kernel that has no container yet:
  // its scratch, its resources, its entry. Returns `why`.
  Status AbandonReservation(const std::string& kernel_id, const Status& why) EXCLUDES(store_.mutex);
  // The container `kernel` (reserved for `request`) runs in, but for its
  // user, scratch and mounts: image, command, labels, limits, environment,
  // and each plugin's part (cores, memory, devices, ports).
  ContainerSpec SpecFor(const CreateRequest& request, const Kernel& kernel) EXCLUDES(store_.mutex);
  // Builds, creates and starts the container of `kernel`, already reserved
  // (PREPARING) by CreateKernel; on failure, undoes the reservation.
  // `run_as`: the user it runs as (PrepareImage), given to the engine as
  // numbers and recorded in label kRunAs; `mounts`: the request's mounts,
  // resolved (ResolveMounts).
  Result<CreateOutcome> CreateContainer(const CreateRequest& request, const Kernel& kernel, const RunAs& run_as,
                                        const std::vector<ResolvedMount>& mounts);
  // When `kernel`'s idle window ends (unix milliseconds): its idle_since_ms
  // plus its idle rule's `for`; unset while it is not idle.
  std::optional<int64_t> IdleEndMs(const Kernel& kernel) const;
  // A kernel to stop: its id, its container and how it asked to be stopped.
  struct ToStop {
    std::string kernel_id;
    std::string container_id;
    StopContract contract;
  };
  // Stops the containers of `kernels`, each set TERMINATING by the caller:
  // TERMINATED with `reason`, or back to its state before when its
  // container cannot be stopped. Takes store_.mutex itself; stops without it.
  void StopTerminating(const std::vector<ToStop>& kernels, const std::string& reason) EXCLUDES(store_.mutex);
  using StopOutcome = ContainerStopper::Outcome;
  // What the end `end` of RUNNING or BACKOFF kernel `kernel_id`'s container
  // comes to under its restart policy (DecideOnExit): BACKOFF, keeping its
  // resources, or TERMINATED, freeing them.
  void Ended(const std::string& kernel_id, const KernelEnd& end) REQUIRES(store_.mutex);
  // The lowest NUMA node with room for all of `request`'s topology-bound
  // units (cores, devices); nullopt when none has.
  std::optional<int> ChooseNumaNode(const ResourceRequest& request) const REQUIRES(store_.mutex);
  std::string SlotTypes() const REQUIRES(store_.mutex);  // "cpu, mem, mock.device"
  // Re-takes a terminated kernel's allocation because its container runs
  // again (`how`); ERROR with the reason when another kernel holds part of
  // it (or the config no longer allows it), and queued for StopIntruders.
  void Resume(const std::string& kernel_id, const std::string& how) REQUIRES(store_.mutex);
  // reconcile::DecideOnEvent for `kernel` (nullptr: unknown).
  reconcile::EventStep EventStepFor(const Kernel* kernel, const EngineEvent& event) const REQUIRES(store_.mutex);
  // reconcile::DecideOnContainer for a listed container.
  reconcile::Step StepFor(const ContainerInfo& info, uint64_t list_seq) const REQUIRES(store_.mutex);
  // Applies a "die" event (EventStep::kCheckDeath): TERMINATED and freed,
  // unless the engine says the container already runs again or the kernel
  // changed meanwhile. Takes store_.mutex itself; inspects without it.
  void ConfirmDeath(const std::string& kernel_id, const EngineEvent& event) EXCLUDES(store_.mutex);
  // Inspects a RUNNING kernel's container (unlocked) and sets its condition
  // to what differs from its allocation: paused, cpuset, memory limit; emits
  // kernel_condition when that changes. Takes store_.mutex itself.
  void CheckDrift(const std::string& kernel_id, const std::string& container_id) EXCLUDES(store_.mutex);
  // Whether `pool`'s image is on the node, pulled first when [container]
  // auto-pull asks (ImagePuller::Ensure): OK, or why a kernel of it cannot
  // be made, saying what to do. Reserves nothing.
  Status PoolImageReady(const WarmPool& pool);
  // Removes the containers of the warm kernels Adopt queued (unkept_warm_),
  // with their files: nothing of them is held, and nobody was given them.
  // One that cannot be removed refuses the start (`at_start`), naming it and
  // what to do; later it is logged, and the next relist tries again.
  Status RemoveUnkeptWarm(bool at_start) EXCLUDES(store_.mutex);
  // OnEngineEvent without the StopIntruders that follows it.
  bool ApplyEngineEvent(const EngineEvent& event) EXCLUDES(store_.mutex);
  // Stops the containers Resume found running on resources their kernels do
  // not hold (started behind the agent's back onto another kernel's cores,
  // say): TERMINATED "stopped by slotd: ...". Takes store_.mutex itself; stops
  // without it.
  void StopIntruders() EXCLUDES(store_.mutex);
  std::vector<std::string> OwnerFilter() const;
  // Adopts an unknown container (one of the kAdopt* steps). A created one
  // becomes PREPARING with its resources and its kernel id goes into
  // `never_started`; a running one RUNNING, or ERROR queued for
  // StopIntruders when a newer kernel holds its resources. `at_start` turns
  // unreadable labels and resources the config no longer gives into errors.
  // Adopt's running container whose allocation cannot be claimed
  // (`claimed`): ERROR, and stopped (StopIntruders) when a newer kernel holds
  // it; refused at start, else ERROR, when the config no longer gives it.
  Status AdoptRefused(Kernel kernel, const ContainerInfo& info, const Status& claimed, bool at_start)
      REQUIRES(store_.mutex);
  // `inspected`: the container as inspected (its exit code and end), when it was.
  // A warm pool's kernel never given that no pool keeps (PoolKeeps) is not
  // adopted: queued for RemoveUnkeptWarm.
  Status Adopt(reconcile::Step step, const ContainerInfo& info, const ContainerInfo* inspected, bool at_start,
               std::vector<std::string>& never_started) REQUIRES(store_.mutex);
  // Relist and Restore: one list of the engine (`listed`, or asked for
  // now), decided and applied.
  Status Converge(bool at_start, std::optional<std::vector<ContainerInfo>> listed = std::nullopt) EXCLUDES(store_.mutex);
  // The owned containers `mine` of a list asked for at `list_seq` whose step
  // needs their exit code, inspected (unlocked), by container id.
  std::map<std::string, ContainerInfo> InspectEnded(const std::vector<ContainerInfo>& mine, uint64_t list_seq)
      EXCLUDES(store_.mutex);
  // What applying a list leaves for Converge to do without the lock.
  struct Applied {
    std::vector<std::string> never_started;                    // kernels adopted PREPARING, to start
    std::vector<std::pair<std::string, std::string>> to_check;  // (kernel, container) whose drift to check
  };
  // Applies each step of the list `mine` (the ended ones `inspected`) and
  // forgets the kernels whose container is not in it.
  Status ApplyList(const std::vector<ContainerInfo>& mine, const std::map<std::string, ContainerInfo>& inspected,
                   uint64_t list_seq, bool at_start, Applied& applied) REQUIRES(store_.mutex);
  // Logs, once per container and state, a container in a state this agent
  // does not know (reconcile::IsKnownState), which keeps what it holds.
  void ReportUnknownState(const ContainerInfo& info) REQUIRES(store_.mutex);
  // Starts the containers of kernels adopted PREPARING by Adopt: RUNNING
  // when the engine starts them, else TERMINATED "never started: <why>" with
  // no exit code and nothing held. Takes store_.mutex itself; starts without it.
  void FinishStarts(const std::vector<std::string>& kernel_ids) EXCLUDES(store_.mutex);

  const Config config_;
  ContainerEngine& engine_;
  EventHub& hub_;
  Clock& clock_;

  // The kernel table and the plugins, under the core lock (store_.mutex).
  KernelStore store_;
  KernelExec exec_;  // execs and logs
  const ContainerStopper stopper_;  // the one way a kernel's container is stopped
  SharedCorePool shared_pool_;  // the shared kernels' cores, following the pool
  ScratchStore scratch_;  // the kernels' scratch directories (hostdir, hostfile); thread-safe
  // Ok when a hostdir scratch can be given a size (the scratch root enforces
  // project quotas) or the scratch is not hostdir; otherwise why not.
  const Status scratch_quota_;
  MountStage mount_stage_;  // where the engine takes kernels' mounts from; thread-safe
  NodeImages images_;  // pulls, lists and collects the engine's images; thread-safe
  KernelUsers users_;  // who kernels run as: decided at create, checked after each start; thread-safe
  DeviceManager devices_;  // drains, health marks, state.json; thread-safe, never called under store_.mutex
  // A create under way, which repeats of the same request wait for and share.
  struct PendingCreate {
    CreateRequest request;  // the request under way
    bool done = false;
    Result<CreateOutcome> outcome = Status::Internal("the create has not finished");
  };
  std::map<std::string, std::shared_ptr<PendingCreate>> pending_creates_ GUARDED_BY(store_.mutex);  // by kernel id
  std::vector<std::pair<std::string, std::string>> intruders_ GUARDED_BY(store_.mutex);  // (kernel, container) to stop
  // "<container id> <state>" of the unknown states reported; emptied past the bound.
  static constexpr size_t kMaxUnknownStatesReported = 1024;
  std::set<std::string> unknown_states_reported_ GUARDED_BY(store_.mutex);
  // The warm pools ([[pool]]); empty when their entries are refused (Restore
  // then fails naming the entry: pools_status_).
  std::vector<WarmPool> pools_;
  Status pools_status_;
  WarmClaims warm_claims_;  // the records of warm kernels given to creates; thread-safe
  // WARM kernels a call has taken, to give to a create (GiveWarm) or to
  // remove (FillPools): no other call takes them meanwhile.
  std::set<std::string> warm_taken_ GUARDED_BY(store_.mutex);
  // A warm pool's kernel, never given, whose pool the config no longer has
  // (or has in another shape), as Adopt found it, for RemoveUnkeptWarm.
  struct UnkeptWarm {
    std::string kernel_id;
    std::string container_id;
    std::string container_name;
    std::string pool;
  };
  std::vector<UnkeptWarm> unkept_warm_ GUARDED_BY(store_.mutex);
  // Per pool whose latest kernel could not be made: why, and when FillPools
  // tries again, later after each failure in a row, so that a missing image
  // is not retried (and logged) every round. Gone once a kernel is made.
  struct PoolTrouble {
    int failures = 0;         // in a row
    int64_t retry_at_ms = 0;  // unix milliseconds
    std::string reason;       // the latest failure's message
  };
  std::map<std::string, PoolTrouble> pool_trouble_ GUARDED_BY(store_.mutex);
  std::condition_variable create_done_;                    // with store_.mutex: a pending create finished
  std::condition_variable restart_done_;                   // with store_.mutex: a restart under way finished
  // Held from reading a kernel's name marks to renaming its container, so
  // that a restart and a warning never record over each other. Taken
  // before store_.mutex, never inside it.
  Mutex rename_mutex_ ACQUIRED_BEFORE(store_.mutex);

  std::atomic<int64_t> drain_deadline_{0};   // the drain's deadline (unix seconds) as devices_ holds it; 0: none
  std::atomic<int64_t> last_sync_ns_{-1};    // clock_ time of the last good relist or restore
  std::atomic<int64_t> last_answer_ns_{-1};  // clock_ time of the last answered round trip
  std::atomic<bool> engine_answered_{false}; // whether the latest round trip was answered
};

}  // namespace slotd
