#include "agent/converger.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "common/units.h"
#include "model/label_codec.h"

namespace slotd {

namespace {

// The end of a container as an inspect shows it (nullptr: not inspected),
// `noticed` added to its words; a kill (137) after `oom_kills` reported
// kills for lack of memory was that.
KernelEnd EndOf(const ContainerInfo* inspected, int oom_kills, int64_t now_ms, const std::string& noticed) {
  KernelEnd end;
  if (inspected) end.exit_code = inspected->exit_code;
  end.out_of_memory = oom_kills > 0 && end.exit_code == 137;
  end.ended_at_ms = inspected && inspected->finished_ms > 0 ? inspected->finished_ms : now_ms;
  end.why = end.out_of_memory ? "out of memory"
                              : "exited with code " + (end.exit_code ? std::to_string(*end.exit_code) : "?");
  end.why += noticed;
  return end;
}

// A cpuset list in the one form FormatCoreList writes ("0-3,8"); as it is
// when it is not a list.
std::string CanonicalCores(const std::string& cpuset) {
  Result<std::vector<int>> cores = ParseCoreList(cpuset);
  return cores.ok() && !cpuset.empty() ? FormatCoreList(*cores) : cpuset;
}

// What differs between a kernel's allocation and its container as inspected,
// in words; empty when nothing does.
std::string DriftOf(const Kernel& kernel, const ContainerInfo& info) {
  std::vector<std::string> drift;
  if (info.state == "paused") drift.push_back("paused outside slotd (docker unpause it)");
  const std::string cpuset = FormatCoreList(kernel.allocation.cores);
  // The cgroup where it was read: Podman's inspect keeps the cpuset a
  // container was created with after `podman update`.
  std::string actual = info.cpuset_cpus;
  if (auto cores = ParseCoreList(kernel.cgroup_cpuset); !kernel.cgroup_cpuset.empty() && cores.ok())
    actual = FormatCoreList(*cores);
  if (!kernel.allocation.cores.empty() && actual != cpuset)
    drift.push_back("its cpuset was changed outside slotd to \"" + actual + "\" (allocated: " + cpuset + ")");
  // A shared kernel runs on the shared pool as the agent last gave it (or is
  // giving it now). Judged from the engine's inspect alone: the cgroup's
  // reading may be older than the pool's last move. An adopted kernel's is
  // learnt by the first relist.
  const std::string applied = CanonicalCores(kernel.applied_cpuset);
  const std::string seen = CanonicalCores(info.cpuset_cpus);
  if (kernel.allocation.cores.empty() && kernel.allocation.shared_cpu_millis > 0 && !applied.empty() &&
      seen != applied && seen != CanonicalCores(kernel.pending_cpuset))
    drift.push_back("its cpuset was changed outside slotd to \"" + seen + "\" (the shared pool: " + applied + ")");
  if (kernel.allocation.mem_bytes > 0 && static_cast<uint64_t>(info.memory_bytes) != kernel.allocation.mem_bytes)
    drift.push_back("its memory limit was changed outside slotd to " + std::to_string(info.memory_bytes) +
                    " bytes (allocated: " + std::to_string(kernel.allocation.mem_bytes) + ")");
  std::string text;
  for (const auto& d : drift) text += (text.empty() ? "" : "; ") + d;
  return text;
}

}  // namespace

Converger::Converger(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
                     SharedCorePool& shared_pool, KernelFiles& files, KernelUsers& users, WarmKernels& warm,
                     KernelEnds& ends, EngineHealth& engine_health)
    : config_(config),
      engine_(engine),
      clock_(clock),
      store_(store),
      shared_pool_(shared_pool),
      files_(files),
      users_(users),
      warm_(warm),
      ends_(ends),
      engine_health_(engine_health) {}

void Converger::Resume(const std::string& kernel_id, const std::string& how) {
  Status claimed = store_.table.Resume(kernel_id, how);
  const Kernel* kernel = store_.table.Find(kernel_id);
  // Its cores did not follow the pool while it held no quota.
  if (claimed.ok() && kernel && kernel->allocation.shared_cpu_millis > 0) shared_pool_.Check(kernel_id);
  if (claimed.ok() || !kernel || kernel->state() != KernelState::kError) return;
  spdlog::error("kernel {}: {}; stopping it", kernel_id, kernel->reason);
  intruders_.emplace_back(kernel_id, kernel->container_id);
}

reconcile::EventStep Converger::EventStepFor(const Kernel* kernel, const EngineEvent& event) const {
  if (!kernel) return reconcile::DecideOnEvent(event, nullptr);
  const reconcile::Known known = store_.table.KnownOf(*kernel);
  return reconcile::DecideOnEvent(event, &known);
}

reconcile::Step Converger::StepFor(const ContainerInfo& info, uint64_t list_seq) const {
  auto kid = info.labels.find(label::kKernelId);
  if (kid == info.labels.end()) return reconcile::DecideOnContainer(info, nullptr, std::nullopt, list_seq);
  const std::optional<uint64_t> forgotten_at = store_.table.ForgottenAt(kid->second);
  const Kernel* kernel = store_.table.Find(kid->second);
  if (!kernel) return reconcile::DecideOnContainer(info, nullptr, forgotten_at, list_seq);
  const reconcile::Known known = store_.table.KnownOf(*kernel);
  return reconcile::DecideOnContainer(info, &known, forgotten_at, list_seq);
}

void Converger::ConfirmDeath(const std::string& kernel_id, const EngineEvent& event) {
  // A die that a restart has already overtaken (the event reader lagged) must
  // not free a kernel whose container runs again: ask the engine, unlocked.
  Result<ContainerInfo> info = engine_.Inspect(event.id);
  // A state that may hold processes (Podman's "stopping") is no death yet.
  if (info.ok() && reconcile::IsRunningState(info->state)) return;
  if (!info.ok()) {  // gone already: what the event says
    ContainerInfo from_event;
    if (auto it = event.attributes.find("exitCode"); it != event.attributes.end())
      from_event.exit_code = std::atoi(it->second.c_str());
    from_event.finished_ms = event.time_nano / 1'000'000;
    info = std::move(from_event);
  }
  MutexLock lock(store_.mutex);
  const Kernel* k = store_.table.Find(kernel_id);
  if (EventStepFor(k, event) != reconcile::EventStep::kCheckDeath) return;  // changed meanwhile
  ends_.Ended(store_, kernel_id, EndOf(&*info, k->oom_kills, clock_.UnixMillis(), ""));
}

void Converger::CheckDrift(const std::string& kernel_id, const std::string& container_id) {
  uint64_t moves_before = 0;
  {
    MutexLock lock(store_.mutex);
    if (const Kernel* k = store_.table.Find(kernel_id)) moves_before = k->cpuset_moves;
  }
  auto info = engine_.Inspect(container_id);
  if (!info.ok()) return;  // gone: its destroy event or the next relist tells
  MutexLock lock(store_.mutex);
  const Kernel* seen = store_.table.Find(kernel_id);
  if (!seen || !reconcile::MayCheckDrift(store_.table.KnownOf(*seen), container_id)) return;  // changed meanwhile
  if (seen->cpuset_moves != moves_before) return;  // its cores moved meanwhile: the move's update event checks again
  std::string condition = DriftOf(*seen, *info);
  if (condition == seen->condition) return;
  Kernel* k = store_.table.Change(kernel_id);
  k->condition = std::move(condition);
  if (k->condition.empty()) {
    spdlog::info("kernel {}: its container matches its allocation again", kernel_id);
  } else {
    spdlog::warn("kernel {}: {}", kernel_id, k->condition);
  }
  store_.table.Announce(EventType::kKernelCondition, *k);
}

void Converger::StopIntruders() {
  std::vector<std::pair<std::string, std::string>> intruders;
  {
    MutexLock lock(store_.mutex);
    intruders.swap(intruders_);
  }
  for (const auto& [kernel_id, container_id] : intruders) ends_.StopIntruder(kernel_id, container_id);
}

bool Converger::OnEngineEvent(const EngineEvent& event) {
  const bool relist = ApplyEngineEvent(event);
  StopIntruders();
  return relist;
}

bool Converger::ApplyEngineEvent(const EngineEvent& event) {
  const std::optional<std::string> kernel_id = reconcile::KernelIdOfEvent(event, config_.agent.id);
  if (!kernel_id) return false;
  MutexLock lock(store_.mutex);
  switch (EventStepFor(store_.table.Find(*kernel_id), event)) {
    case reconcile::EventStep::kNothing:
      return false;
    case reconcile::EventStep::kRelist:
      return true;
    case reconcile::EventStep::kNoteOom: {
      Kernel* k = store_.table.Change(*kernel_id);
      ++k->oom_kills;
      spdlog::warn("kernel {}: a process was killed for lack of memory", *kernel_id);
      store_.table.Announce(EventType::kKernelCondition, *k);
      return false;
    }
    case reconcile::EventStep::kResume:
      Resume(*kernel_id, "started outside slotd");
      lock.Unlock();
      shared_pool_.Converge();  // a shared kernel's cores onto the pool as it is now
      return false;
    case reconcile::EventStep::kForget:
      spdlog::warn("kernel {}: its container was removed outside slotd; freeing its resources", *kernel_id);
      (void)store_.table.Forget(*kernel_id, "container removed outside slotd");
      return false;
    case reconcile::EventStep::kCheckDeath:
      lock.Unlock();
      ConfirmDeath(*kernel_id, event);
      return false;
    case reconcile::EventStep::kCheckDrift:
      lock.Unlock();
      CheckDrift(*kernel_id, event.id);
      return false;
  }
  return false;
}

void Converger::FinishStarts(const std::vector<std::string>& kernel_ids) {
  for (const std::string& kernel_id : kernel_ids) {
    std::string container_id;
    std::optional<RunAs> run_as;
    {
      MutexLock lock(store_.mutex);
      const Kernel* k = store_.table.Find(kernel_id);
      if (!k || k->state() != KernelState::kPreparing) continue;
      container_id = k->container_id;
      run_as = k->run_as;
    }
    // A container made before the user was decided as numbers (label
    // kRunAs) would run as whatever its files name now: not started.
    Status started = Status::Ok();
    if (!run_as && !config_.container.allow_root)
      started = Status::PermissionDenied("it records no user decided as numbers (made by an older slotd), and "
                                         "[container] allow-root is false; create the kernel again");
    if (started.ok()) started = engine_.Start(container_id);
    if (started.ok()) started = users_.VerifyRestarted(kernel_id, container_id, run_as);
    MutexLock lock(store_.mutex);
    const Kernel* k = store_.table.Find(kernel_id);
    if (!k || k->container_id != container_id || k->state() != KernelState::kPreparing) continue;
    if (started.ok()) {
      spdlog::info("kernel {}: started its container, created before the agent stopped", kernel_id);
      (void)(k->warm_pool.empty() ? store_.table.Started(kernel_id) : store_.table.Warmed(kernel_id));
    } else {
      spdlog::error("kernel {}: its container, created before the agent stopped, could not be started: {}",
                    kernel_id, started.message());
      (void)store_.table.Terminated(kernel_id, std::nullopt, "never started: " + started.message(), std::nullopt);
    }
  }
}

Status Converger::AdoptRefused(Kernel kernel, const ContainerInfo& info, const Status& claimed, bool at_start) {
  const std::string kernel_id = kernel.id();
  if (claimed.code() == Status::Code::kResourceExhausted) {
    // A newer kernel holds it (AdoptionOrder): this older container was
    // started again behind the agent's back. Stop it; never refuse.
    kernel.reason = "container found running on resources it does not hold: " + claimed.message();
    spdlog::error("kernel {}: {}; stopping it", kernel_id, kernel.reason);
    intruders_.emplace_back(kernel_id, info.id);
    return store_.table.Adopt(std::move(kernel), KernelState::kError);
  }
  Status why = Status::FailedPrecondition(
      "kernel " + kernel_id + " (container " + info.name + ") cannot be restored: " + claimed.message() +
      ". Its container still holds what its ai.backend.allocations label records; either give this agent those "
      "resources back in its config, or remove the container (docker rm -f " + info.name +
      "), then start the agent again");
  if (at_start) return why;
  kernel.reason = why.message();
  spdlog::error("{}", why.message());
  return store_.table.Adopt(std::move(kernel), KernelState::kError);
}

Status Converger::Adopt(reconcile::Step step, const ContainerInfo& info, const ContainerInfo* inspected, bool at_start,
                    std::vector<std::string>& never_started) {
  auto restored = KernelFromContainer(info);
  if (!restored.ok()) {
    spdlog::error("cannot adopt container {}: {}", info.name, restored.status().message());
    return at_start ? restored.status() : Status::Ok();
  }
  Kernel kernel = std::move(*restored);
  const std::string kernel_id = kernel.id();
  if (info.labels.at(label::kKernelId) != kernel_id) {
    spdlog::error("cannot adopt container {}: its labels disagree on the kernel id", info.name);
    return Status::Ok();
  }
  KernelState running_as = KernelState::kRunning;
  if (!kernel.warm_pool.empty()) {  // made for a warm pool: given to a create since, or still warm
    Result<KernelState> warm = warm_.StateOf(kernel);
    if (!warm.ok()) {
      spdlog::error("cannot adopt container {}: {}", info.name, warm.status().message());
      return at_start ? warm.status() : Status::Ok();
    }
    running_as = *warm;
    // Never given, and its pool is gone or changed (the config was): nobody's
    // kernel, and no pool's; removed (RemoveUnkeptWarm), never adopted.
    if (running_as == KernelState::kWarm && !warm_.Keeps(store_, kernel, info)) return Status::Ok();
  }
  Status outcome = Status::Ok();
  if (step == reconcile::Step::kAdoptCreated) {
    // Created but never started: the agent stopped between the two calls of
    // a create. Finish the create (FinishStarts), holding its resources.
    outcome = store_.table.Adopt(kernel, KernelState::kPreparing);
    if (outcome.ok()) {
      never_started.push_back(kernel_id);
    } else {
      kernel.reason = "never started: the agent stopped between creating and starting its container, and its "
                      "resources are now held elsewhere (" + outcome.message() + "); delete it";
      outcome = store_.table.Adopt(kernel, KernelState::kTerminated);
    }
  } else if (step == reconcile::Step::kAdoptRunning) {
    outcome = store_.table.Adopt(kernel, running_as);
    if (!outcome.ok()) outcome = AdoptRefused(std::move(kernel), info, outcome, at_start);
  } else {
    // Ended while the agent was away: as its restart policy says.
    const KernelEnd end = EndOf(inspected, 0, clock_.UnixMillis(), "");
    const ExitOutcome decided = DecideOnExit(ResolveRestart(kernel.request.restart, config_.container),
                                             kernel.restarts, end, kernel.deadline, clock_.UnixMillis());
    kernel.exit_code = end.exit_code;
    kernel.reason = decided.reason;
    if (inspected && inspected->finished_ms > 0) kernel.terminated_at = inspected->finished_ms / 1000;
    if (decided.restart) {
      kernel.next_restart_at_ms = decided.restart_at_ms;
      outcome = store_.table.Adopt(kernel, KernelState::kBackoff);
      if (!outcome.ok()) {
        kernel.next_restart_at_ms.reset();
        kernel.reason += "; not restarted: " + outcome.message();
        outcome = store_.table.Adopt(kernel, KernelState::kTerminated);
      }
    } else {
      outcome = store_.table.Adopt(kernel, KernelState::kTerminated);
    }
  }
  if (!outcome.ok()) return outcome;
  spdlog::info("adopted kernel {} ({})", kernel_id, KernelStateName(store_.table.Find(kernel_id)->state()));
  return Status::Ok();
}

void Converger::ReportUnknownState(const ContainerInfo& info) {
  const std::string key = info.id + " " + info.state.substr(0, 64);
  if (unknown_states_reported_.count(key)) return;
  if (unknown_states_reported_.size() >= kMaxUnknownStatesReported) unknown_states_reported_.clear();
  unknown_states_reported_.insert(key);
  spdlog::warn("container {} is in state \"{}\", which this agent does not know; its kernel keeps what it holds "
               "until the engine says the container ended",
               info.name, info.state.substr(0, 64));
}

std::map<std::string, ContainerInfo> Converger::InspectEnded(const std::vector<ContainerInfo>& mine, uint64_t list_seq) {
  std::vector<std::string> to_inspect;
  {
    MutexLock lock(store_.mutex);
    for (const auto& info : mine)
      if (reconcile::NeedsExitCode(StepFor(info, list_seq))) to_inspect.push_back(info.id);
  }
  std::map<std::string, ContainerInfo> inspected;
  for (const auto& id : to_inspect)
    if (auto info = engine_.Inspect(id); info.ok()) inspected[id] = std::move(*info);
  return inspected;
}

Status Converger::ApplyList(const std::vector<ContainerInfo>& mine, const std::map<std::string, ContainerInfo>& inspected,
                        uint64_t list_seq, bool at_start, Applied& applied) {
  std::set<std::string> present;
  for (const auto& info : mine) {
    present.insert(info.id);
    const reconcile::Step step = StepFor(info, list_seq);
    if (!reconcile::IsKnownState(info.state)) ReportUnknownState(info);
    auto ended = inspected.find(info.id);
    const ContainerInfo* end = ended == inspected.end() ? nullptr : &ended->second;
    const auto kid = info.labels.find(label::kKernelId);
    const std::string kernel_id = kid == info.labels.end() ? "" : kid->second;
    switch (step) {
      case reconcile::Step::kNothing:
      case reconcile::Step::kSkipForgotten:
        break;
      case reconcile::Step::kUnlabelled:
        spdlog::warn("container {} carries owner label {} but no {}; leaving it alone", info.name, config_.agent.id,
                     label::kKernelId);
        break;
      case reconcile::Step::kResume:
        Resume(kernel_id, "found running on relist");
        break;
      case reconcile::Step::kMarkExited:
        ends_.Ended(store_, kernel_id, EndOf(end, store_.table.Find(kernel_id)->oom_kills, clock_.UnixMillis(), " (noticed on relist)"));
        break;
      case reconcile::Step::kAdoptCreated:
      case reconcile::Step::kAdoptRunning:
      case reconcile::Step::kAdoptExited:
        if (Status s = Adopt(step, info, end, at_start, applied.never_started); !s.ok()) return s;
        break;
    }
    // Paused containers, and kernels whose condition may have cleared, are inspected.
    const Kernel* k = kernel_id.empty() ? nullptr : store_.table.Find(kernel_id);
    if (k && k->container_id == info.id && (info.state == "paused" || !k->condition.empty()))
      applied.to_check.emplace_back(kernel_id, info.id);
  }
  std::map<std::string, reconcile::Known> known;
  for (const auto& [id, kernel] : store_.table.All()) known.emplace(id, store_.table.KnownOf(kernel));
  for (const auto& id : reconcile::Vanished(known, present, list_seq)) {
    spdlog::warn("kernel {}: its container vanished; freeing its resources", id);
    (void)store_.table.Forget(id, "container vanished");
  }
  store_.table.DropForgottenUpTo(list_seq);
  return Status::Ok();
}

Status Converger::Converge(bool at_start, std::optional<std::vector<ContainerInfo>> given) {
  uint64_t list_seq;
  {
    MutexLock lock(store_.mutex);
    list_seq = store_.table.Seq();
  }
  Result<std::vector<ContainerInfo>> listed =
      given ? Result<std::vector<ContainerInfo>>(std::move(*given)) : engine_.List({std::string(label::kOwner) + "=" + config_.agent.id});
  if (!listed.ok()) {
    engine_health_.RecordAnswer(false);
    return listed.status().WithPrefix(at_start ? "listing this agent's containers at start"
                                               : "listing this agent's containers");
  }
  std::vector<ContainerInfo> mine;
  std::set<std::string> listed_kernels;  // every owned container's kernel id, adopted or not
  for (auto& info : *listed) {
    auto owner = info.labels.find(label::kOwner);
    if (owner == info.labels.end() || owner->second != config_.agent.id) continue;  // never ours to touch
    if (auto kid = info.labels.find(label::kKernelId); kid != info.labels.end()) listed_kernels.insert(kid->second);
    mine.push_back(std::move(info));
  }
  mine = reconcile::AdoptionOrder(std::move(mine));
  // Decide which containers need their exit code, ask the engine without the
  // lock, then decide again on what is true now and apply.
  const std::map<std::string, ContainerInfo> inspected = InspectEnded(mine, list_seq);
  Applied applied;
  {
    MutexLock lock(store_.mutex);
    if (Status s = ApplyList(mine, inspected, list_seq, at_start, applied); !s.ok()) return s;
  }
  // Shared kernels onto the pool as it is now, before a kernel created before
  // the agent stopped starts (an adopted one's cores are learnt by an inspect).
  shared_pool_.Converge();
  if (at_start)
    if (Status s = shared_pool_.CheckAdopted(); !s.ok()) return s;
  FinishStarts(applied.never_started);
  StopIntruders();
  // At start, the agent serves only once no intruder runs on its kernels' resources.
  if (at_start) ends_.WaitForStops();
  if (Status s = warm_.RemoveUnkept(at_start); !s.ok()) return s;
  for (const auto& [kernel_id, container_id] : applied.to_check) CheckDrift(kernel_id, container_id);
  // Scratch of no kernel (its container vanished, or the agent died while
  // deleting it) goes; that of any container listed as ours stays.
  auto kept = [&]() EXCLUDES(store_.mutex) {
    std::set<std::string> keep = listed_kernels;
    MutexLock lock(store_.mutex);
    for (const auto& [id, kernel] : store_.table.All()) keep.insert(id);
    return keep;
  };
  files_.Collect(kept);
  engine_health_.RecordSync();
  return Status::Ok();
}

}  // namespace slotd
