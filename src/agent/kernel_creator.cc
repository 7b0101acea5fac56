#include "agent/kernel_creator.h"

#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "common/units.h"
#include "model/label_codec.h"
#include "node/scratch_limits.h"
#include "resources/device_kinds.h"

namespace slotd {

namespace {

// The refusal of a kernel whose image the engine does not have.
Status ImageMissing(const std::string& image, const Status& engine_said) {
  return Status::NotFound("image " + image + " not found on this node's engine (" + engine_said.message() +
                          "); build, load or pull it first (slotctl pull), or let the agent pull it ([container] "
                          "auto-pull)");
}

}  // namespace

KernelCreator::KernelCreator(const Config& config, ContainerEngine& engine, const Clock& clock, KernelStore& store,
                             const ContainerStopper& stopper, SharedCorePool& shared_pool, KernelFiles& files,
                             NodeImages& images, KernelUsers& users, DeviceManager& devices)
    : config_(config),
      engine_(engine),
      clock_(clock),
      store_(store),
      stopper_(stopper),
      shared_pool_(shared_pool),
      files_(files),
      images_(images),
      users_(users),
      devices_(devices) {}

std::optional<int> KernelCreator::ChooseNumaNode(const ResourceRequest& request) const {
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

std::string KernelCreator::SlotTypes() const {
  std::string slots = "cpu, mem";
  for (const auto& plugin : store_.plugins)
    for (const std::string& slot : plugin->DeviceSlots()) slots += ", " + slot;
  return slots;
}

Result<KernelCreator::Admitted> KernelCreator::Admit(const CreateRequest& request) const {
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
  if ((request.resources.scratch_bytes || config_.container.scratch_size) && !files_.scratch_quota().ok())
    return Status::FailedPrecondition("resources.scratch: this agent cannot limit a kernel's scratch ([container] "
                                      "scratch-type is hostdir): " + files_.scratch_quota().message() +
                                      "; leave resources.scratch out, or ask the node's operator for scratch-type "
                                      "hostfile or tmpfs");
  return Admitted{request.pull.value_or(agent_policy), std::move(*mounts)};
}

std::optional<int64_t> KernelCreator::DeadlineOf(const CreateRequest& request, int64_t from) const {
  std::optional<std::chrono::milliseconds> lifetime = request.max_lifetime;
  if (!lifetime && config_.container.max_lifetime.count() > 0) lifetime = config_.container.max_lifetime;
  if (!lifetime) return std::nullopt;
  return from + (lifetime->count() + 999) / 1000;
}

Result<KernelCreator::CreateOutcome> KernelCreator::Create(const CreateRequest& request, const std::string& warm_pool) {
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
    if (auto it = pending_.find(request.kernel_id);
        it != pending_.end() && it->second->request == request) {
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
    pending_[request.kernel_id] = pending;
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
    pending_.erase(request.kernel_id);
    create_done_.notify_all();
  }
  // A failed create freed what it held. (A shared kernel's container was
  // brought to the pool before it started, and moved by every change since.)
  if (!outcome.ok()) shared_pool_.Converge();
  return outcome;
}

Result<RunAs> KernelCreator::PrepareImage(const CreateRequest& request, PullPolicy policy) {
  Result<std::optional<ImageInfo>> image = images_.Ensure(request.image, policy);
  Result<ImageInfo> info = !image.ok() ? Result<ImageInfo>(image.status())
                           : *image    ? Result<ImageInfo>(**image)
                                       : engine_.InspectImage(request.image.name);
  if (!info.ok() && info.status().code() == Status::Code::kNotFound)
    info = ImageMissing(request.image.name, info.status());
  Result<RunAs> run_as = info.ok() ? users_.Decide(request, *info) : Result<RunAs>(info.status());
  if (!run_as.ok()) return AbandonReservation(request.kernel_id, run_as.status());
  images_.RecordUse(request.image);
  MutexLock lock(store_.mutex);
  if (const Kernel* k = store_.table.Find(request.kernel_id); k && k->state() == KernelState::kPulling)
    if (Status s = store_.table.Prepared(request.kernel_id); !s.ok()) return s;
  return run_as;
}

Status KernelCreator::VerifyStarted(const std::string& kernel_id, const std::string& container_id,
                            const std::vector<ResolvedMount>& mounts, const std::optional<RunAs>& run_as) {
  if (mounts.empty() && config_.container.allow_root) return Status::Ok();  // nothing to check
  Result<ContainerInfo> info = engine_.Inspect(container_id);
  if (!info.ok()) return info.status().WithPrefix("checking the started container");
  if (Status s = VerifyMounted(info->pid, mounts); !s.ok()) return s;
  if (config_.container.allow_root) return Status::Ok();
  return users_.VerifyIds(kernel_id, info->pid, run_as);
}

Status KernelCreator::AbandonReservation(const std::string& kernel_id, const Status& why) {
  files_.Remove(kernel_id);
  MutexLock lock(store_.mutex);
  if (Status s = store_.table.Abandon(kernel_id); !s.ok()) return s;
  return why;
}

ContainerSpec KernelCreator::SpecFor(const CreateRequest& request, const Kernel& kernel) {
  ContainerSpec spec;
  spec.name = ContainerName(config_.agent.id, request.kernel_id);
  spec.image = request.image.name;
  spec.command = request.command;
  spec.labels = KernelLabels(kernel);
  spec.network_mode = config_.container.network;
  spec.pids_limit = config_.container.pids_limit;
  spec.log_max_bytes = config_.container.log_max_size;
  spec.shm_bytes = request.resources.ShmBytes();
  spec.ulimits = config_.container.ulimits;
  spec.no_new_privileges = !config_.container.allow_root;  // no set-uid way to root
  spec.init = config_.container.init;
  spec.stop_signal = request.stop.signal;
  spec.stop_timeout_s = static_cast<int>(stopper_.TimeoutOf(request.stop).count());
  for (const auto& [name, value] : request.env) spec.env.push_back(name + "=" + value);
  spec.env.push_back("SLOTD_KERNEL_ID=" + request.kernel_id);
  spec.env.push_back("SLOTD_AGENT_ID=" + config_.agent.id);
  {
    MutexLock lock(store_.mutex);
    for (const auto& plugin : store_.plugins) plugin->Apply(kernel.allocation, spec);
  }
  for (const auto& variable : DeviceVariablesSelectingNone()) {
    const std::string prefix = variable.first + "=";
    const bool set = std::any_of(spec.env.begin(), spec.env.end(),
                                 [&](const std::string& entry) { return entry.rfind(prefix, 0) == 0; });
    if (!set) spec.env.push_back(prefix + variable.second);
  }
  return spec;
}

Result<KernelCreator::CreateOutcome> KernelCreator::CreateContainer(const CreateRequest& request,
                                                                    const Kernel& reserved, const RunAs& run_as,
                                                                    const std::vector<ResolvedMount>& mounts) {
  Kernel kernel = reserved;
  kernel.run_as = run_as;
  ContainerSpec spec = SpecFor(request, kernel);
  spec.user = run_as.Text();  // numbers: a name would be looked up again in the kernel's files at each start
  // Undo everything taken above; used on every failure path below.
  auto abandon = [&](const Status& why, const std::string& container_id) -> Status {
    spdlog::warn("kernel {}: the create failed, and everything it held is freed: {}", request.kernel_id,
                 why.message());
    if (container_id.empty()) return AbandonReservation(request.kernel_id, why);  // nothing was announced yet
    Status removed = engine_.Remove(container_id, /*force=*/true);
    if (!removed.ok() && removed.code() != Status::Code::kNotFound)
      spdlog::error("kernel {}: could not remove its half-created container {}: {}", request.kernel_id, container_id,
                    removed.message());
    files_.Remove(request.kernel_id);
    MutexLock lock(store_.mutex);
    if (Status s = store_.table.Forget(request.kernel_id, "could not start: " + why.message()); !s.ok()) return s;
    return why;
  };

  const uint64_t scratch_bytes = request.resources.scratch_bytes.value_or(config_.container.scratch_size);
  if (config_.container.scratch_type == ScratchType::kTmpfs) {
    spec.mounts.push_back(
        {Mount::Type::kTmpfs, "", kScratchTarget, false, scratch_bytes ? scratch_bytes : request.resources.mem_bytes});
  } else {
    if (Status room = files_.CheckScratchRoom(); !room.ok()) return abandon(room, "");
    Result<std::string> scratch =
        files_.scratch().Prepare(request.kernel_id, ScratchStore::Owner{run_as.uid, run_as.gid}, scratch_bytes);
    if (!scratch.ok()) return abandon(scratch.status(), "");
    spec.mounts.push_back({Mount::Type::kBind, *scratch, kScratchTarget, false, 0});
  }
  Result<std::vector<Mount>> staged = files_.mounts().Bind(request.kernel_id, mounts);
  if (!staged.ok()) return abandon(staged.status(), "");
  spec.mounts.insert(spec.mounts.end(), staged->begin(), staged->end());

  auto created = engine_.Create(spec);
  if (!created.ok()) {
    Status s = created.status();
    if (s.code() == Status::Code::kNotFound)
      s = ImageMissing(request.image.name, s);
    else if (s.code() == Status::Code::kConflict)
      s = Status::Conflict("a container named " + spec.name + " already exists (" + s.message() +
                           "); it may be an older kernel with this id that the agent has not adopted yet — retry "
                           "in a few seconds or use another kernel_id");
    return abandon(s, "");
  }
  {
    MutexLock lock(store_.mutex);
    store_.table.SetContainer(request.kernel_id, *created);
    store_.table.Change(request.kernel_id)->run_as = run_as;
    if (kernel.allocation.shared_cpu_millis > 0) {
      store_.table.Change(request.kernel_id)->applied_cpuset = spec.cpuset_cpus;
      shared_pool_.Check(request.kernel_id);
    }
    store_.table.Announce(EventType::kKernelCreated, kernel);
  }
  // Its spec's pool may be older than the pool now: never started on cores an exclusive kernel took meanwhile.
  if (kernel.allocation.shared_cpu_millis > 0) shared_pool_.Converge();
  if (Status s = engine_.Start(*created); !s.ok()) return abandon(s.WithPrefix("starting the container"), *created);
  if (Status s = VerifyStarted(request.kernel_id, *created, mounts, run_as); !s.ok()) return abandon(s, *created);

  MutexLock lock(store_.mutex);
  const Status started =
      kernel.warm_pool.empty() ? store_.table.Started(request.kernel_id) : store_.table.Warmed(request.kernel_id);
  if (!started.ok()) return started;
  return CreateOutcome{*store_.table.Find(request.kernel_id), true};
}

}  // namespace slotd
