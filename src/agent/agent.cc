#include "agent/agent.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/units.h"
#include "config/local_checks.h"
#include "agent/mounts.h"
#include "node/scratch_limits.h"
#include "resources/device_kinds.h"

namespace slotd {

using nlohmann::json;


Agent::Agent(Config config, ContainerEngine& engine, std::vector<std::unique_ptr<ResourcePlugin>> plugins,
             EventHub& hub, Clock& clock)
    : config_(std::move(config)),
      engine_(engine),
      hub_(hub),
      clock_(clock),
      store_(config_.agent.id, std::move(plugins), hub_, clock_),
      exec_(store_, engine_, clock_),
      stopper_(engine_, clock_, config_.container.stop_timeout),
      shared_pool_(store_, engine_, config_.resource.allowed_cores),
      scratch_(ScratchRoot(config_),
               config_.container.scratch_type == ScratchType::kHostFile ? ScratchKind::kHostFile : ScratchKind::kHostDir),
      scratch_quota_(config_.container.scratch_type == ScratchType::kHostDir
                         ? ProjectQuotaEnforced(ScratchRoot(config_))
                         : Status::Ok()),
      mount_stage_(config_.agent.ipc_base_path + "/mounts"),
      images_(config_, engine, hub, clock),
      users_(config_.agent.id, config_.container, engine),
      devices_(config_.agent.id,
               config_.agent.var_base_path.empty() ? "" : config_.agent.var_base_path + "/state.json", store_.plugins,
               store_.mutex, hub_, clock_),
      warm_claims_(config_.agent.var_base_path.empty() ? "" : config_.agent.var_base_path + "/warm-claims") {
  Result<std::vector<WarmPool>> pools = WarmPoolsOf(config_);
  if (pools.ok()) pools_ = std::move(*pools);
  pools_status_ = pools.status();
}

std::vector<std::string> Agent::OwnerFilter() const {
  return {std::string(label::kOwner) + "=" + config_.agent.id};
}

std::optional<int> Agent::ChooseNumaNode(const ResourceRequest& request) const {
  std::vector<std::pair<int, std::map<int, int>>> needs;  // wanted units, free units per node
  std::set<int> nodes;
  for (const auto& plugin : store_.plugins) {
    int wanted = plugin->Wanted(request);
    if (wanted == 0) continue;
    needs.emplace_back(wanted, plugin->FreeByNumaNode());
    for (const auto& [node, free] : needs.back().second) nodes.insert(node);
  }
  for (int node : nodes) {
    bool fits = std::all_of(needs.begin(), needs.end(), [&](const auto& need) {
      auto it = need.second.find(node);
      return it != need.second.end() && it->second >= need.first;
    });
    if (fits) return node;
  }
  return std::nullopt;
}

std::string Agent::SlotTypes() const {
  std::string slots = "cpu, mem";
  for (const auto& plugin : store_.plugins)
    for (const std::string& slot : plugin->DeviceSlots()) slots += ", " + slot;
  return slots;
}

Result<Agent::Admitted> Agent::Admit(const CreateRequest& request) const {
  for (const auto& [name, value] : request.env) {
    if (DeviceVariablesSelectingNone().count(name))
      return Status::InvalidArgument("env." + name +
                                     ": selects devices, so the agent sets it from the kernel's allocation; it may "
                                     "not be overridden. Ask for devices in resources instead");
  }
  Result<std::vector<ResolvedMount>> mounts =
      ResolveMounts(request.mounts, config_.container.mount_allow, AgentOwnPaths(config_));
  if (!mounts.ok()) return mounts.status();
  const PullPolicy agent_policy = config_.container.auto_pull;
  if (request.pull && *request.pull < agent_policy)
    return Status::PermissionDenied(std::string("pull: \"") + PullPolicyName(*request.pull) +
                                    "\" is looser than this agent's [container] auto-pull = \"" +
                                    PullPolicyName(agent_policy) +
                                    "\"; a request may only ask for a stricter policy: leave pull out or ask for "
                                    "\"digest\"");
  const std::chrono::milliseconds lifetime_cap = config_.container.max_lifetime;
  if (request.max_lifetime && lifetime_cap.count() > 0 && *request.max_lifetime > lifetime_cap)
    return Status::InvalidArgument("max_lifetime: " + FormatDuration(*request.max_lifetime) +
                                   " is longer than this agent allows ([container] max-lifetime = \"" +
                                   FormatDuration(lifetime_cap) + "\"); ask for at most that");
  const std::chrono::milliseconds stop_cap = config_.container.stop_timeout;
  if (request.stop.timeout && *request.stop.timeout > stop_cap)
    return Status::InvalidArgument("stop_timeout: " + FormatDuration(*request.stop.timeout) +
                                   " is longer than this agent allows ([container] stop-timeout = \"" +
                                   FormatDuration(stop_cap) + "\"); ask for at most that");
  const int64_t restart_cap = config_.container.restart_max;
  if (request.restart.max && restart_cap > 0 && *request.restart.max > restart_cap)
    return Status::InvalidArgument("restart.max: " + std::to_string(*request.restart.max) +
                                   " is more restarts than this agent allows ([container] restart-max = " +
                                   std::to_string(restart_cap) + "); ask for at most that");
  if ((request.resources.scratch_bytes || config_.container.scratch_size) && !scratch_quota_.ok())
    return Status::FailedPrecondition("resources.scratch: this agent cannot limit a kernel's scratch ([container] "
                                      "scratch-type is hostdir): " + scratch_quota_.message() +
                                      "; leave resources.scratch out, or ask the node's operator for scratch-type "
                                      "hostfile or tmpfs");
  return Admitted{request.pull.value_or(agent_policy), std::move(*mounts)};
}

std::optional<int64_t> Agent::DeadlineOf(const CreateRequest& request, int64_t from) const {
  std::optional<std::chrono::milliseconds> lifetime = request.max_lifetime;
  if (!lifetime && config_.container.max_lifetime.count() > 0) lifetime = config_.container.max_lifetime;
  if (!lifetime) return std::nullopt;
  return from + (lifetime->count() + 999) / 1000;
}

Result<Agent::CreateOutcome> Agent::CreateKernel(const CreateRequest& request) {
  if (std::optional<CreateOutcome> given = GiveWarm(request)) return *given;
  return CreateKernelFor(request, "");
}

Result<Agent::CreateOutcome> Agent::CreateKernelFor(const CreateRequest& request, const std::string& warm_pool) {
  Result<Admitted> admitted = Admit(request);
  if (!admitted.ok()) return admitted.status();
  const PullPolicy policy = admitted->policy;
  Kernel kernel;
  std::shared_ptr<PendingCreate> pending;
  const bool draining = devices_.Draining().draining;  // asked first: its lock is never taken inside store_.mutex
  {
    MutexLock lock(store_.mutex);
    // A warm pool's kernel not yet given (WARM, being made, or ended unused)
    // is no create's: a client that names its id repeats nothing, and is
    // never answered with it.
    if (const Kernel* warm = store_.table.Find(request.kernel_id); warm && !warm->warm_pool.empty() && warm_pool.empty())
      return Status::Conflict("kernel " + request.kernel_id + " is kept by warm pool \"" + warm->warm_pool +
                              "\" for the creates it serves, not created by any request; leave kernel_id out "
                              "to be given a warm kernel, or name another kernel_id");
    // The same request while the first is still under way: wait for its outcome and share it.
    if (auto it = pending_creates_.find(request.kernel_id);
        it != pending_creates_.end() && it->second->request == request) {
      std::shared_ptr<PendingCreate> first = it->second;
      create_done_.wait(lock.native(), [&] { return first->done; });
      if (!first->outcome.ok()) return first->outcome.status();
      return CreateOutcome{first->outcome->kernel, false};
    }
    if (const Kernel* existing = store_.table.Find(request.kernel_id)) {
      if (existing->request == request) return CreateOutcome{*existing, false};
      return Status::Conflict("kernel " + request.kernel_id +
                              " already exists with a different request; delete it first or use another kernel_id");
    }
    if (draining)
      return Status::Unavailable("agent " + config_.agent.id + " is draining: it takes no new kernels (its kernels "
                                 "run on); create the kernel on another agent, or undrain this one (slotctl undrain)");
    for (const auto& [slot, count] : request.resources.devices) {
      bool provided = std::any_of(store_.plugins.begin(), store_.plugins.end(), [&, slot = slot](const auto& plugin) {
        const std::vector<std::string> slots = plugin->DeviceSlots();
        return std::find(slots.begin(), slots.end(), slot) != slots.end();
      });
      if (!provided)
        return Status::InvalidArgument("resources." + slot + ": this agent has no such device plugin (its slots: " +
                                       SlotTypes() + ")");
    }
    kernel.request = request;
    kernel.agent_id = config_.agent.id;
    kernel.created_at = clock_.UnixSeconds();
    kernel.warm_pool = warm_pool;
    if (warm_pool.empty()) kernel.deadline = DeadlineOf(request, kernel.created_at);  // a warm kernel's: when given
    kernel.allocation.numa_node = ChooseNumaNode(request.resources);
    // Reserves the id and the resources.
    if (Status s = store_.table.Reserve(kernel, /*pulling=*/policy != PullPolicy::kNone); !s.ok()) return s;
    kernel = *store_.table.Find(request.kernel_id);
    pending = std::make_shared<PendingCreate>();
    pending->request = request;
    pending_creates_[request.kernel_id] = pending;
  }
  // Exclusive cores leave the shared pool before their kernel starts on them.
  if (!kernel.allocation.cores.empty()) shared_pool_.Converge();
  Result<RunAs> run_as = PrepareImage(request, policy);
  Result<CreateOutcome> outcome = run_as.ok() ? CreateContainer(request, kernel, *run_as, admitted->mounts)
                                              : Result<CreateOutcome>(run_as.status());
  {
    MutexLock lock(store_.mutex);
    pending->outcome = outcome;
    pending->done = true;
    pending_creates_.erase(request.kernel_id);
    create_done_.notify_all();
  }
  // A failed create freed what it held. (A shared kernel's container was
  // brought to the pool before it started, and moved by every change since.)
  if (!outcome.ok()) shared_pool_.Converge();
  return outcome;
}

std::vector<Kernel> Agent::ListKernels() const {
  MutexLock lock(store_.mutex);
  std::vector<Kernel> out;
  out.reserve(store_.table.All().size());
  for (const auto& [id, kernel] : store_.table.All()) out.push_back(kernel);
  return out;
}

std::vector<std::shared_ptr<const std::string>> Agent::ListKernelRecords(bool with_warm) const {
  MutexLock lock(store_.mutex);
  std::vector<std::shared_ptr<const std::string>> out;
  out.reserve(store_.table.All().size());
  for (const auto& [id, kernel] : store_.table.All())
    if (with_warm || kernel.warm_pool.empty()) out.push_back(store_.table.Record(kernel));
  return out;
}

Result<std::shared_ptr<const std::string>> Agent::KernelRecord(const std::string& kernel_id) const {
  MutexLock lock(store_.mutex);
  const Kernel* kernel = store_.table.Find(kernel_id);
  if (!kernel) return store_.Unknown(kernel_id);
  return store_.table.Record(*kernel);
}

Result<Kernel> Agent::GetKernel(const std::string& kernel_id) const { return store_.Get(kernel_id); }


Result<Kernel> Agent::DeleteKernel(const std::string& kernel_id) {
  std::string container_id;
  StopContract contract;
  {
    MutexLock lock(store_.mutex);
    // A restart under way finishes first: a delete wins over it, not the other way round.
    store_.mutex.Wait(restart_done_, [&]() REQUIRES(store_.mutex) { return !store_.table.Restarting(kernel_id); });
    const Kernel* k = store_.table.Find(kernel_id);
    if (!k) return store_.Unknown(kernel_id);
    if (Status s = store_.table.Stopping(kernel_id); !s.ok()) return s;
    container_id = k->container_id;
    contract = k->request.stop;
  }
  auto [stopped, exit_code, ended_at] = stopper_.Stop(container_id, contract);
  Status removed = stopped.ok() || stopped.code() == Status::Code::kNotFound ? engine_.Remove(container_id, true)
                                                                              : stopped;
  MutexLock lock(store_.mutex);
  if (!store_.table.Find(kernel_id)) return Status::NotFound("kernel " + kernel_id + " was removed meanwhile");
  if (!removed.ok() && removed.code() != Status::Code::kNotFound) {
    if (Status s = store_.table.StopFailed(kernel_id); !s.ok()) return s;
    return removed.WithPrefix("removing kernel " + kernel_id + " (kept with its resources)");
  }
  Result<Kernel> final_record = store_.table.Deleted(kernel_id, exit_code);
  lock.Unlock();
  if (final_record.ok()) {
    RemoveKernelFiles(kernel_id);
    shared_pool_.Converge();  // the shared pool grew by its cores
  }
  return final_record;
}

Result<Agent::Drain> Agent::SetDraining(bool drain, std::optional<std::chrono::milliseconds> within) {
  std::optional<int64_t> deadline;
  if (within) deadline = clock_.UnixSeconds() + (within->count() + 999) / 1000;
  Result<Drain> now = devices_.SetDraining(drain, deadline);
  if (now.ok()) drain_deadline_ = now->deadline.value_or(0);
  return now;
}

Result<Kernel> Agent::RestartKernel(const std::string& kernel_id) {
  std::string container_id;
  StopContract contract;
  std::optional<RunAs> run_as;
  {
    MutexLock lock(store_.mutex);
    const Kernel* k = store_.table.Find(kernel_id);
    if (!k) return store_.Unknown(kernel_id);
    if (store_.table.OwnedByACall(*k)) return store_.table.Busy(*k);
    if (k->deadline && *k->deadline <= clock_.UnixSeconds())
      return Status::FailedPrecondition("kernel " + kernel_id +
                                        "'s lifetime has run out, so it cannot be restarted; create a new kernel");
    if (Status s = store_.table.BeginRestart(kernel_id); !s.ok())
      return Status::ResourceExhausted("kernel " + kernel_id + " cannot be restarted: " + s.message());
    container_id = k->container_id;
    contract = k->request.stop;
    run_as = k->run_as;
  }
  Status s = engine_.Restart(container_id, stopper_.TimeoutOf(contract));
  const Status verified = s.ok() ? users_.VerifyRestarted(kernel_id, container_id, run_as) : Status::Ok();
  MutexLock lock(store_.mutex);
  if (!store_.table.Find(kernel_id)) return Status::NotFound("kernel " + kernel_id + " was removed while restarting");
  Status finished = store_.table.FinishRestart(kernel_id, s.ok());
  restart_done_.notify_all();
  if (!finished.ok()) return finished;
  if (!s.ok()) return s.WithPrefix("restarting kernel " + kernel_id);
  if (!verified.ok()) {
    Ended(kernel_id, KernelEnd{std::nullopt, false, clock_.UnixMillis(), verified.message(), true, true});
    return verified;
  }
  return *store_.table.Find(kernel_id);
}

std::vector<Agent::RunningKernel> Agent::RunningKernels() const {
  MutexLock lock(store_.mutex);
  std::vector<RunningKernel> running;
  for (const auto& [id, kernel] : store_.table.All())
    if (kernel.state() == KernelState::kRunning && !kernel.container_id.empty())
      running.push_back({id, kernel.container_id, kernel.allocation.devices, kernel.allocation.shared_cpu_millis});
  return running;
}

json Agent::DescribeResources() const {
  MutexLock lock(store_.mutex);
  json out = json::object();
  for (const auto& plugin : store_.plugins) out.update(plugin->Describe());
  return out;
}

int Agent::ActiveKernels() const {
  MutexLock lock(store_.mutex);
  return std::count_if(store_.table.All().begin(), store_.table.All().end(), [](const auto& entry) {
    const Kernel& kernel = entry.second;
    return kernel.warm_pool.empty() && kernel.state() != KernelState::kTerminated &&
           kernel.state() != KernelState::kError;
  });
}

double Agent::LastSyncAgeSeconds() const {
  int64_t last = last_sync_ns_;
  if (last < 0) return -1.0;
  return std::chrono::duration<double>(clock_.Now().time_since_epoch() - Clock::Duration(last)).count();
}

bool Agent::EngineReachable() const {
  const int64_t last = last_answer_ns_;
  return engine_answered_ && last >= 0 &&
         clock_.Now().time_since_epoch() - Clock::Duration(last) < kEngineAnswerFresh;
}

bool Agent::EngineKnownDown() const {
  const int64_t last = last_answer_ns_;
  return !EngineReachable() && last >= 0 &&
         clock_.Now().time_since_epoch() - Clock::Duration(last) >= kEngineDownAfter;
}

void Agent::RecordEngineAnswer(bool answered) {
  if (answered) last_answer_ns_ = clock_.Now().time_since_epoch().count();
  engine_answered_ = answered;
}

}  // namespace slotd
