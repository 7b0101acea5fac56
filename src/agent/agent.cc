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
      plugins_(std::move(plugins)),
      scratch_(ScratchRoot(config_),
               config_.container.scratch_type == ScratchType::kHostFile ? ScratchKind::kHostFile : ScratchKind::kHostDir),
      scratch_quota_(config_.container.scratch_type == ScratchType::kHostDir
                         ? ProjectQuotaEnforced(ScratchRoot(config_))
                         : Status::Ok()),
      mount_stage_(config_.agent.ipc_base_path + "/mounts"),
      puller_(engine, hub, clock, config_.agent.id,
              ImagePuller::Limits{config_.container.pull_timeout, config_.container.pull_stall_timeout},
              RegistryCredentials()),
      image_gc_(engine, hub, clock, config_.agent.id,
                ImageCollector::Marks{static_cast<int>(config_.container.image_gc_high),
                                      static_cast<int>(config_.container.image_gc_low)},
                config_.node.claims_dir + "/image-gc.lock"),
      table_(config_.agent.id, plugins_, hub_, clock_),
      devices_(config_.agent.id,
               config_.agent.var_base_path.empty() ? "" : config_.agent.var_base_path + "/state.json", plugins_,
               mutex_, hub_, clock_),
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
  for (const auto& plugin : plugins_) {
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
  for (const auto& plugin : plugins_)
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
  const bool draining = devices_.Draining().draining;  // asked first: its lock is never taken inside mutex_
  {
    MutexLock lock(mutex_);
    // A warm pool's kernel not yet given (WARM, being made, or ended unused)
    // is no create's: a client that names its id repeats nothing, and is
    // never answered with it.
    if (const Kernel* warm = table_.Find(request.kernel_id); warm && !warm->warm_pool.empty() && warm_pool.empty())
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
    if (const Kernel* existing = table_.Find(request.kernel_id)) {
      if (existing->request == request) return CreateOutcome{*existing, false};
      return Status::Conflict("kernel " + request.kernel_id +
                              " already exists with a different request; delete it first or use another kernel_id");
    }
    if (draining)
      return Status::Unavailable("agent " + config_.agent.id + " is draining: it takes no new kernels (its kernels "
                                 "run on); create the kernel on another agent, or undrain this one (slotctl undrain)");
    for (const auto& [slot, count] : request.resources.devices) {
      bool provided = std::any_of(plugins_.begin(), plugins_.end(), [&, slot = slot](const auto& plugin) {
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
    if (Status s = table_.Reserve(kernel, /*pulling=*/policy != PullPolicy::kNone); !s.ok()) return s;
    kernel = *table_.Find(request.kernel_id);
    pending = std::make_shared<PendingCreate>();
    pending->request = request;
    pending_creates_[request.kernel_id] = pending;
  }
  // Exclusive cores leave the shared pool before their kernel starts on them.
  if (!kernel.allocation.cores.empty()) ConvergeCpusets();
  Result<RunAs> run_as = PrepareImage(request, policy);
  Result<CreateOutcome> outcome = run_as.ok() ? CreateContainer(request, kernel, *run_as, admitted->mounts)
                                              : Result<CreateOutcome>(run_as.status());
  {
    MutexLock lock(mutex_);
    pending->outcome = outcome;
    pending->done = true;
    pending_creates_.erase(request.kernel_id);
    create_done_.notify_all();
  }
  // A failed create freed what it held. (A shared kernel's container was
  // brought to the pool before it started, and moved by every change since.)
  if (!outcome.ok()) ConvergeCpusets();
  return outcome;
}

std::vector<Kernel> Agent::ListKernels() const {
  MutexLock lock(mutex_);
  std::vector<Kernel> out;
  out.reserve(table_.All().size());
  for (const auto& [id, kernel] : table_.All()) out.push_back(kernel);
  return out;
}

std::vector<std::shared_ptr<const std::string>> Agent::ListKernelRecords(bool with_warm) const {
  MutexLock lock(mutex_);
  std::vector<std::shared_ptr<const std::string>> out;
  out.reserve(table_.All().size());
  for (const auto& [id, kernel] : table_.All())
    if (with_warm || kernel.warm_pool.empty()) out.push_back(table_.Record(kernel));
  return out;
}

Result<std::shared_ptr<const std::string>> Agent::KernelRecord(const std::string& kernel_id) const {
  MutexLock lock(mutex_);
  const Kernel* kernel = table_.Find(kernel_id);
  if (!kernel) return Status::NotFound("no kernel " + kernel_id + " on agent " + config_.agent.id);
  return table_.Record(*kernel);
}

Result<Kernel> Agent::GetKernel(const std::string& kernel_id) const {
  MutexLock lock(mutex_);
  const Kernel* kernel = table_.Find(kernel_id);
  if (!kernel) return Status::NotFound("no kernel " + kernel_id + " on agent " + config_.agent.id);
  return *kernel;
}

Status Agent::LoadRegistryCredentials() {
  Result<RegistryCredentials> credentials = RegistryCredentials::Load(config_.container.registry_auth_file);
  if (!credentials.ok()) return credentials.status();
  puller_.SetCredentials(std::move(*credentials));
  return Status::Ok();
}

Result<ImageInfo> Agent::PullImage(const std::string& image) {
  if (Status pulled = puller_.Pull(ParseImageRef(image)); !pulled.ok()) return pulled;
  return engine_.InspectImage(image);
}

Result<std::vector<Agent::NodeImage>> Agent::ListImages() {
  Result<std::vector<ImageInfo>> images = engine_.ListImages();
  if (!images.ok()) return images.status();
  Result<std::vector<ContainerInfo>> containers = engine_.List({});  // every owner's: what uses each image
  if (!containers.ok()) return containers.status();
  std::vector<NodeImage> out;
  for (ImageInfo& info : *images) {
    NodeImage image{std::move(info), 0, {}};
    for (const ContainerInfo& c : *containers) {
      if (c.image_id != image.info.id) continue;
      image.last_used = std::max(image.last_used, c.created_unix);
      auto owner = c.labels.find(label::kOwner);
      auto kernel_id = c.labels.find(label::kKernelId);
      if (owner != c.labels.end() && owner->second == config_.agent.id && kernel_id != c.labels.end())
        image.kernel_ids.push_back(kernel_id->second);
    }
    std::sort(image.kernel_ids.begin(), image.kernel_ids.end());
    out.push_back(std::move(image));
  }
  std::stable_sort(out.begin(), out.end(), [](const NodeImage& a, const NodeImage& b) {
    return std::max(a.last_used, a.info.created_unix) > std::max(b.last_used, b.info.created_unix);
  });
  return out;
}

std::chrono::seconds Agent::StopTimeoutOf(const StopContract& contract) const {
  const auto cap = std::chrono::duration_cast<std::chrono::seconds>(config_.container.stop_timeout);
  return std::min(contract.timeout.value_or(cap), cap);
}

Agent::StopOutcome Agent::StopContainer(const std::string& container_id, const StopContract& contract) {
  // One budget for the whole stop, counted from here: what the pre_stop
  // command spends is taken from the stop signal's wait.
  const std::chrono::seconds timeout = StopTimeoutOf(contract);
  std::chrono::seconds signal_wait = timeout;
  if (!contract.pre_stop.empty() && timeout.count() > 0) {
    const Clock::TimePoint began = clock_.Now();
    Result<ExecResult> ran = engine_.Exec(container_id, contract.pre_stop, timeout, nullptr, nullptr);
    if (!ran.ok()) {
      spdlog::info("container {}: its pre_stop command did not run to its end: {}", container_id,
                   ran.status().message());
    } else if (ran->exit_code != 0) {
      spdlog::info("container {}: its pre_stop command exited with code {}", container_id, ran->exit_code);
    }
    // The whole seconds left, rounded down, so that SIGKILL comes no later
    // than `timeout` after the start; none left: at once.
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - began);
    signal_wait = std::chrono::duration_cast<std::chrono::seconds>(
        std::max(std::chrono::milliseconds(0), std::chrono::milliseconds(timeout) - spent));
  }
  StopOutcome outcome{engine_.Stop(container_id, signal_wait), std::nullopt, std::nullopt};
  if (outcome.stopped.ok()) {
    if (auto info = engine_.Inspect(container_id); info.ok()) {
      outcome.exit_code = info->exit_code;
      if (info->finished_ms > 0) outcome.ended_at = info->finished_ms / 1000;
    }
  }
  return outcome;
}

Result<Kernel> Agent::DeleteKernel(const std::string& kernel_id) {
  std::string container_id;
  StopContract contract;
  {
    MutexLock lock(mutex_);
    // A restart under way finishes first: a delete wins over it, not the other way round.
    mutex_.Wait(restart_done_, [&]() REQUIRES(mutex_) { return !table_.Restarting(kernel_id); });
    const Kernel* k = table_.Find(kernel_id);
    if (!k) return Status::NotFound("no kernel " + kernel_id + " on agent " + config_.agent.id);
    if (Status s = table_.Stopping(kernel_id); !s.ok()) return s;
    container_id = k->container_id;
    contract = k->request.stop;
  }
  auto [stopped, exit_code, ended_at] = StopContainer(container_id, contract);
  Status removed = stopped.ok() || stopped.code() == Status::Code::kNotFound ? engine_.Remove(container_id, true)
                                                                              : stopped;
  MutexLock lock(mutex_);
  if (!table_.Find(kernel_id)) return Status::NotFound("kernel " + kernel_id + " was removed meanwhile");
  if (!removed.ok() && removed.code() != Status::Code::kNotFound) {
    if (Status s = table_.StopFailed(kernel_id); !s.ok()) return s;
    return removed.WithPrefix("removing kernel " + kernel_id + " (kept with its resources)");
  }
  Result<Kernel> final_record = table_.Deleted(kernel_id, exit_code);
  lock.Unlock();
  if (final_record.ok()) {
    RemoveKernelFiles(kernel_id);
    ConvergeCpusets();  // the shared pool grew by its cores
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
    MutexLock lock(mutex_);
    const Kernel* k = table_.Find(kernel_id);
    if (!k) return Status::NotFound("no kernel " + kernel_id + " on agent " + config_.agent.id);
    if (table_.OwnedByACall(*k)) return table_.Busy(*k);
    if (k->deadline && *k->deadline <= clock_.UnixSeconds())
      return Status::FailedPrecondition("kernel " + kernel_id +
                                        "'s lifetime has run out, so it cannot be restarted; create a new kernel");
    if (Status s = table_.BeginRestart(kernel_id); !s.ok())
      return Status::ResourceExhausted("kernel " + kernel_id + " cannot be restarted: " + s.message());
    container_id = k->container_id;
    contract = k->request.stop;
    run_as = k->run_as;
  }
  Status s = engine_.Restart(container_id, StopTimeoutOf(contract));
  const Status verified = s.ok() ? VerifyRestarted(kernel_id, container_id, run_as) : Status::Ok();
  MutexLock lock(mutex_);
  if (!table_.Find(kernel_id)) return Status::NotFound("kernel " + kernel_id + " was removed while restarting");
  Status finished = table_.FinishRestart(kernel_id, s.ok());
  restart_done_.notify_all();
  if (!finished.ok()) return finished;
  if (!s.ok()) return s.WithPrefix("restarting kernel " + kernel_id);
  if (!verified.ok()) {
    Ended(kernel_id, KernelEnd{std::nullopt, false, clock_.UnixMillis(), verified.message(), true, true});
    return verified;
  }
  return *table_.Find(kernel_id);
}

std::vector<Agent::RunningKernel> Agent::RunningKernels() const {
  MutexLock lock(mutex_);
  std::vector<RunningKernel> running;
  for (const auto& [id, kernel] : table_.All())
    if (kernel.state() == KernelState::kRunning && !kernel.container_id.empty())
      running.push_back({id, kernel.container_id, kernel.allocation.devices, kernel.allocation.shared_cpu_millis});
  return running;
}

json Agent::DescribeResources() const {
  MutexLock lock(mutex_);
  json out = json::object();
  for (const auto& plugin : plugins_) out.update(plugin->Describe());
  return out;
}

int Agent::ActiveKernels() const {
  MutexLock lock(mutex_);
  return std::count_if(table_.All().begin(), table_.All().end(), [](const auto& entry) {
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
