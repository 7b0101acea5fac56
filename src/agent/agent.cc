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
#include "common/version.h"
#include "config/local_checks.h"
#include "agent/mounts.h"
#include "node/scratch_limits.h"
#include "resources/device_kinds.h"

namespace slotd {

using nlohmann::json;

namespace {

// The meters of the plugins that have one, in plugin order.
std::vector<std::shared_ptr<DeviceMeter>> MetersOf(const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::vector<std::shared_ptr<DeviceMeter>> meters;
  for (const auto& plugin : plugins) {
    if (std::shared_ptr<DeviceMeter> meter = plugin->Meter()) meters.push_back(std::move(meter));
  }
  return meters;
}

// The owned devices of the plugins that have devices but no meter, by plugin name.
std::map<std::string, std::vector<std::string>> UnmeteredDevicesOf(
    const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::map<std::string, std::vector<std::string>> devices;
  for (const auto& plugin : plugins) {
    if (!plugin->Meter() && !plugin->OwnedDevices().empty()) devices[plugin->Name()] = plugin->OwnedDevices();
  }
  return devices;
}

// The health boards of the plugins that have one, by plugin name.
std::vector<std::pair<std::string, std::shared_ptr<DeviceHealthBoard>>> BoardsOf(
    const std::vector<std::unique_ptr<ResourcePlugin>>& plugins) {
  std::vector<std::pair<std::string, std::shared_ptr<DeviceHealthBoard>>> boards;
  for (const auto& plugin : plugins)
    if (std::shared_ptr<DeviceHealthBoard> board = plugin->Health()) boards.emplace_back(plugin->Name(), board);
  return boards;
}

// The refusal of a kernel whose image the engine does not have.
Status ImageMissing(const std::string& image, const Status& engine_said) {
  return Status::NotFound("image " + image + " not found on this node's engine (" + engine_said.message() +
                          "); build, load or pull it first (slotctl pull), or let the agent pull it ([container] "
                          "auto-pull)");
}

}  // namespace

Agent::Agent(Config config, ContainerEngine& engine, std::vector<std::unique_ptr<ResourcePlugin>> plugins,
             EventHub& hub, Clock& clock)
    : config_(std::move(config)),
      engine_(engine),
      hub_(hub),
      clock_(clock),
      plugins_(std::move(plugins)),
      meters_(MetersOf(plugins_)),
      unmetered_devices_(UnmeteredDevicesOf(plugins_)),
      boards_(BoardsOf(plugins_)),
      record_path_(config_.agent.var_base_path.empty() ? "" : config_.agent.var_base_path + "/state.json"),
      scratch_(ScratchRoot(config_),
               config_.container.scratch_type == "hostfile" ? ScratchKind::kHostFile : ScratchKind::kHostDir),
      scratch_quota_(config_.container.scratch_type == "hostdir" ? ProjectQuotaEnforced(ScratchRoot(config_))
                                                                 : Status::Ok()),
      mount_stage_(config_.agent.ipc_base_path + "/mounts"),
      puller_(engine, hub, clock, config_.agent.id,
              ImagePuller::Limits{config_.container.pull_timeout, config_.container.pull_stall_timeout},
              RegistryCredentials()),
      image_gc_(engine, hub, clock, config_.agent.id,
                ImageCollector::Marks{static_cast<int>(config_.container.image_gc_high),
                                      static_cast<int>(config_.container.image_gc_low)},
                config_.node.claims_dir + "/image-gc.lock"),
      table_(config_.agent.id, plugins_, hub_, clock_) {}

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

Result<Agent::CreateOutcome> Agent::CreateKernel(const CreateRequest& request) {
  for (const auto& [name, value] : request.env) {
    if (DeviceVariablesSelectingNone().count(name))
      return Status::InvalidArgument("env." + name +
                                     ": selects devices, so the agent sets it from the kernel's allocation; it may "
                                     "not be overridden. Ask for devices in resources instead");
  }
  Result<std::vector<ResolvedMount>> mounts =
      ResolveMounts(request.mounts, config_.container.mount_allow, AgentOwnPaths(config_));
  if (!mounts.ok()) return mounts.status();
  const PullPolicy agent_policy = ParsePullPolicy(config_.container.auto_pull).value_or(PullPolicy::kNone);
  if (request.pull && *request.pull < agent_policy)
    return Status::PermissionDenied(std::string("pull: \"") + PullPolicyName(*request.pull) +
                                    "\" is looser than this agent's [container] auto-pull = \"" +
                                    PullPolicyName(agent_policy) +
                                    "\"; a request may only ask for a stricter policy: leave pull out or ask for "
                                    "\"digest\"");
  const PullPolicy policy = request.pull.value_or(agent_policy);
  const std::chrono::milliseconds lifetime_cap = config_.container.max_lifetime;
  if (request.max_lifetime && lifetime_cap.count() > 0 && *request.max_lifetime > lifetime_cap)
    return Status::InvalidArgument("max_lifetime: " + FormatDuration(*request.max_lifetime) +
                                   " is longer than this agent allows ([container] max-lifetime = \"" +
                                   FormatDuration(lifetime_cap) + "\"); ask for at most that");
  if ((request.resources.scratch_bytes || config_.container.scratch_size) && !scratch_quota_.ok())
    return Status::FailedPrecondition("resources.scratch: this agent cannot limit a kernel's scratch ([container] "
                                      "scratch-type is hostdir): " + scratch_quota_.message() +
                                      "; leave resources.scratch out, or ask the node's operator for scratch-type "
                                      "hostfile or tmpfs");
  Kernel kernel;
  std::shared_ptr<PendingCreate> pending;
  {
    MutexLock lock(mutex_);
    // The same request while the first is still under way: wait for its outcome and share it.
    if (auto it = pending_creates_.find(request.kernel_id);
        it != pending_creates_.end() && it->second->canonical == request.Canonical()) {
      std::shared_ptr<PendingCreate> first = it->second;
      create_done_.wait(lock.native(), [&] { return first->done; });
      if (!first->outcome.ok()) return first->outcome.status();
      return CreateOutcome{first->outcome->kernel, false};
    }
    if (const Kernel* existing = table_.Find(request.kernel_id)) {
      if (existing->request.Canonical() == request.Canonical()) return CreateOutcome{*existing, false};
      return Status::Conflict("kernel " + request.kernel_id +
                              " already exists with a different request; delete it first or use another kernel_id");
    }
    if (drain_.draining)
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
    std::optional<std::chrono::milliseconds> lifetime = request.max_lifetime;
    if (!lifetime && lifetime_cap.count() > 0) lifetime = lifetime_cap;
    if (lifetime) kernel.deadline = kernel.created_at + (lifetime->count() + 999) / 1000;
    kernel.allocation.numa_node = ChooseNumaNode(request.resources);
    // Reserves the id and the resources.
    if (Status s = table_.Reserve(kernel, /*pulling=*/policy != PullPolicy::kNone); !s.ok()) return s;
    kernel = *table_.Find(request.kernel_id);
    pending = std::make_shared<PendingCreate>();
    pending->canonical = request.Canonical();
    pending_creates_[request.kernel_id] = pending;
  }
  Result<std::string> image_user = PrepareImage(request, policy);
  Result<CreateOutcome> outcome = image_user.ok() ? CreateContainer(request, kernel, *image_user, *mounts)
                                                  : Result<CreateOutcome>(image_user.status());
  MutexLock lock(mutex_);
  pending->outcome = outcome;
  pending->done = true;
  pending_creates_.erase(request.kernel_id);
  create_done_.notify_all();
  return outcome;
}

Result<std::string> Agent::PrepareImage(const CreateRequest& request, PullPolicy policy) {
  Result<std::optional<ImageInfo>> image = puller_.Ensure(request.image, policy);
  Result<ImageInfo> info = !image.ok() ? Result<ImageInfo>(image.status())
                           : *image    ? Result<ImageInfo>(**image)
                                       : engine_.InspectImage(request.image);
  if (!info.ok() && info.status().code() == Status::Code::kNotFound)
    info = ImageMissing(request.image, info.status());
  const Status ready = info.ok() ? CheckUser(request.image, info->user) : info.status();
  if (!ready.ok()) return AbandonReservation(request.kernel_id, ready);
  image_gc_.RecordUse(request.image, clock_.UnixSeconds());
  MutexLock lock(mutex_);
  if (const Kernel* k = table_.Find(request.kernel_id); k && k->state() == KernelState::kPulling)
    if (Status s = table_.Prepared(request.kernel_id); !s.ok()) return s;
  return info->user;
}

namespace {

constexpr char kRootAdvice[] =
    "; set [container] kernel-uid (and kernel-gid) to run kernels as a user, or allow-root = true to let them run as "
    "root";

// The refusal of `image`, whose user `user` is uid 0 (`how`: where that comes from).
Status RunsAsRoot(const std::string& image, const std::string& user, const std::string& how) {
  return Status::PermissionDenied("image " + image + " runs as root (" +
                                  (user.empty() ? std::string("it names no user")
                                                : "its user \"" + user + "\" is uid 0" + how) +
                                  ") and [container] allow-root is false" + kRootAdvice);
}

}  // namespace

Status Agent::CheckScratchRoom() const {
  const uint64_t floor = config_.container.scratch_min_free;
  if (floor == 0) return Status::Ok();
  const std::string root = ScratchRoot(config_);
  Result<uint64_t> free = FreeBytes(root);
  if (!free.ok()) return free.status();
  if (*free >= floor) return Status::Ok();
  return Status::ResourceExhausted("insufficient scratch space: the filesystem of the scratch root " + root + " has " +
                                   DescribeSize(*free) + " free, less than [container] scratch-min-free (" +
                                   FormatSize(floor) + "); new kernels wait until space is freed there (delete "
                                   "kernels, or remove other files) or the floor is lowered");
}

Status Agent::CheckUser(const std::string& image, const std::string& user) {
  const ContainerConfig& c = config_.container;
  if (c.allow_root) return Status::Ok();
  if (c.kernel_uid) {
    if (*c.kernel_uid != 0) return Status::Ok();
    return Status::PermissionDenied(std::string("[container] kernel-uid = 0 runs kernels as root, and allow-root is false") +
                                    kRootAdvice);
  }
  // Without the image's files: a name is decided once its container exists (ResolveRunAs).
  Result<RunAs> bare = ResolveUser(user, "", "");
  if (bare.ok() && bare->uid == 0) return RunsAsRoot(image, user, "");
  return Status::Ok();
}

Result<RunAs> Agent::ResolveRunAs(const std::string& container_id, const std::string& image, const std::string& user) {
  // Longer files than this are no user database an image means.
  constexpr size_t kMaxUserFile = 4u << 20;
  std::string files[2];
  const char* const paths[2] = {"/etc/passwd", "/etc/group"};
  for (int i = 0; i < 2; ++i) {
    Result<std::string> text = engine_.ReadFile(container_id, paths[i], kMaxUserFile);
    if (text.ok()) {
      files[i] = std::move(*text);
    } else if (text.status().code() != Status::Code::kNotFound) {
      return text.status().WithPrefix("deciding the user image " + image + " runs as");
    }
  }
  Result<RunAs> run_as = ResolveUser(user, files[0], files[1]);
  if (!run_as.ok()) return run_as.status().WithPrefix("image " + image);
  if (run_as->uid == 0 && !config_.container.allow_root)
    return RunsAsRoot(image, user, NumericId(user.substr(0, user.find(':'))) ? "" : " in the image's /etc/passwd");
  return run_as;
}

Status Agent::VerifyStarted(const std::string& container_id, const std::vector<ResolvedMount>& mounts) {
  if (mounts.empty() && config_.container.allow_root) return Status::Ok();  // nothing to check
  Result<ContainerInfo> info = engine_.Inspect(container_id);
  if (!info.ok()) return info.status().WithPrefix("checking the started container");
  if (Status s = VerifyMounted(info->pid, mounts); !s.ok()) return s;
  if (config_.container.allow_root || info->pid <= 0) return Status::Ok();
  std::ifstream file("/proc/" + std::to_string(info->pid) + "/status");
  std::stringstream status;
  status << file.rdbuf();
  const std::optional<std::array<int64_t, 4>> uids = StatusUids(status.str());
  if (!uids) return Status::Ok();  // it ended meanwhile: nothing runs as anyone
  for (const int64_t uid : *uids) {
    if (uid == 0)
      return Status::PermissionDenied("the kernel's first process (pid " + std::to_string(info->pid) +
                                      ") runs as root, and [container] allow-root is false; the kernel is not kept" +
                                      kRootAdvice);
  }
  return Status::Ok();
}

void Agent::RemoveKernelFiles(const std::string& kernel_id) {
  if (Status removed = scratch_.Remove(kernel_id); !removed.ok())
    spdlog::error("kernel {}: {}", kernel_id, removed.message());
  if (Status removed = mount_stage_.Remove(kernel_id); !removed.ok())
    spdlog::error("kernel {}: {}", kernel_id, removed.message());
}

Status Agent::AbandonReservation(const std::string& kernel_id, const Status& why) {
  RemoveKernelFiles(kernel_id);
  MutexLock lock(mutex_);
  if (Status s = table_.Abandon(kernel_id); !s.ok()) return s;
  return why;
}

Result<Agent::CreateOutcome> Agent::CreateContainer(const CreateRequest& request, const Kernel& kernel,
                                                    const std::string& image_user,
                                                    const std::vector<ResolvedMount>& mounts) {

  ContainerSpec spec;
  spec.name = ContainerName(config_.agent.id, request.kernel_id);
  spec.image = request.image;
  spec.command = request.command;
  spec.labels = KernelLabels(kernel);
  spec.network_mode = config_.container.network;
  spec.pids_limit = config_.container.pids_limit;
  spec.log_max_bytes = config_.container.log_max_size;
  spec.shm_bytes = request.resources.ShmBytes();
  spec.ulimits = config_.container.ulimits;
  spec.no_new_privileges = !config_.container.allow_root;  // no set-uid way to root
  for (const auto& [name, value] : request.env) spec.env.push_back(name + "=" + value);
  spec.env.push_back("SLOTD_KERNEL_ID=" + request.kernel_id);
  spec.env.push_back("SLOTD_AGENT_ID=" + config_.agent.id);
  {
    MutexLock lock(mutex_);
    for (const auto& plugin : plugins_) plugin->Apply(kernel.allocation, spec);
  }
  for (const auto& variable : DeviceVariablesSelectingNone()) {
    const std::string prefix = variable.first + "=";
    const bool set = std::any_of(spec.env.begin(), spec.env.end(),
                                 [&](const std::string& entry) { return entry.rfind(prefix, 0) == 0; });
    if (!set) spec.env.push_back(prefix + variable.second);
  }

  // Undo everything taken above; used on every failure path below.
  auto abandon = [&](const Status& why, const std::string& container_id) -> Status {
    if (container_id.empty()) return AbandonReservation(request.kernel_id, why);  // nothing was announced yet
    Status removed = engine_.Remove(container_id, /*force=*/true);
    if (!removed.ok() && removed.code() != Status::Code::kNotFound)
      spdlog::error("kernel {}: could not remove its half-created container {}: {}", request.kernel_id, container_id,
                    removed.message());
    RemoveKernelFiles(request.kernel_id);
    MutexLock lock(mutex_);
    if (Status s = table_.Forget(request.kernel_id, "could not start: " + why.message()); !s.ok()) return s;
    return why;
  };

  std::optional<ScratchStore::Owner> owner;
  if (config_.container.kernel_uid) {
    owner = ScratchStore::Owner{*config_.container.kernel_uid,
                                config_.container.kernel_gid.value_or(*config_.container.kernel_uid)};
    spec.user = std::to_string(owner->uid) + ":" + std::to_string(owner->gid);
  }
  const uint64_t scratch_bytes = request.resources.scratch_bytes.value_or(config_.container.scratch_size);
  if (config_.container.scratch_type == "tmpfs") {
    spec.mounts.push_back(
        {Mount::Type::kTmpfs, "", kScratchTarget, false, scratch_bytes ? scratch_bytes : request.resources.mem_bytes});
  } else {
    if (Status room = CheckScratchRoom(); !room.ok()) return abandon(room, "");
    Result<std::string> scratch = scratch_.Prepare(request.kernel_id, owner, scratch_bytes);
    if (!scratch.ok()) return abandon(scratch.status(), "");
    spec.mounts.push_back({Mount::Type::kBind, *scratch, kScratchTarget, false, 0});
  }
  Result<std::vector<Mount>> staged = mount_stage_.Bind(request.kernel_id, mounts);
  if (!staged.ok()) return abandon(staged.status(), "");
  spec.mounts.insert(spec.mounts.end(), staged->begin(), staged->end());

  auto created = engine_.Create(spec);
  if (!created.ok()) {
    Status s = created.status();
    if (s.code() == Status::Code::kNotFound)
      s = ImageMissing(request.image, s);
    else if (s.code() == Status::Code::kConflict)
      s = Status::Conflict("a container named " + spec.name + " already exists (" + s.message() +
                           "); it may be an older kernel with this id that the agent has not adopted yet — retry "
                           "in a few seconds or use another kernel_id");
    return abandon(s, "");
  }
  {
    MutexLock lock(mutex_);
    table_.SetContainer(request.kernel_id, *created);
    table_.Announce("kernel_created", kernel);
  }
  if (!owner) {
    Result<RunAs> run_as = ResolveRunAs(*created, request.image, image_user);
    if (!run_as.ok()) return abandon(run_as.status(), *created);
    if (config_.container.scratch_type != "tmpfs") {
      if (Status s = scratch_.GiveTo(request.kernel_id, {run_as->uid, run_as->gid}); !s.ok())
        return abandon(s, *created);
    }
  }
  if (Status s = engine_.Start(*created); !s.ok()) return abandon(s.WithPrefix("starting the container"), *created);
  if (Status s = VerifyStarted(*created, mounts); !s.ok()) return abandon(s, *created);

  MutexLock lock(mutex_);
  if (Status s = table_.Started(request.kernel_id); !s.ok()) return s;
  return CreateOutcome{*table_.Find(request.kernel_id), true};
}

std::vector<Kernel> Agent::ListKernels() const {
  MutexLock lock(mutex_);
  std::vector<Kernel> out;
  for (const auto& [id, kernel] : table_.All()) out.push_back(kernel);
  return out;
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
  if (Status pulled = puller_.Pull(image); !pulled.ok()) return pulled;
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

std::chrono::seconds Agent::StopTimeout() const {
  return std::chrono::duration_cast<std::chrono::seconds>(config_.container.stop_timeout);
}

Agent::StopOutcome Agent::StopContainer(const std::string& container_id) {
  StopOutcome outcome{engine_.Stop(container_id, StopTimeout()), std::nullopt, std::nullopt};
  if (outcome.stopped.ok()) {
    if (auto info = engine_.Inspect(container_id); info.ok()) {
      outcome.exit_code = info->exit_code;
      if (info->finished_unix > 0) outcome.ended_at = info->finished_unix;
    }
  }
  return outcome;
}

Result<Kernel> Agent::DeleteKernel(const std::string& kernel_id) {
  std::string container_id;
  {
    MutexLock lock(mutex_);
    const Kernel* k = table_.Find(kernel_id);
    if (!k) return Status::NotFound("no kernel " + kernel_id + " on agent " + config_.agent.id);
    if (Status s = table_.Stopping(kernel_id); !s.ok()) return s;
    container_id = k->container_id;
  }
  auto [stopped, exit_code, ended_at] = StopContainer(container_id);
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
  if (final_record.ok()) RemoveKernelFiles(kernel_id);
  return final_record;
}

void Agent::StopExpiredKernels(int64_t now) {
  std::vector<std::pair<std::string, std::string>> expired;  // (kernel, container)
  {
    MutexLock lock(mutex_);
    for (const auto& [id, kernel] : table_.All()) {
      if (kernel.deadline && *kernel.deadline <= now && kernel.state() == KernelState::kRunning &&
          !table_.OwnedByACall(kernel))
        expired.emplace_back(id, kernel.container_id);
    }
    // Each is ours until stopped, as in DeleteKernel.
    for (const auto& [id, container] : expired) (void)table_.Stopping(id);
  }
  StopTerminating(expired, "lifetime exceeded");
}

void Agent::StopTerminating(const std::vector<std::pair<std::string, std::string>>& kernels,
                            const std::string& reason) {
  for (const auto& [kernel_id, container_id] : kernels) {
    const StopOutcome stop = StopContainer(container_id);
    const Status& stopped = stop.stopped;
    MutexLock lock(mutex_);
    const Kernel* k = table_.Find(kernel_id);
    if (!k || k->container_id != container_id || k->state() != KernelState::kTerminating) continue;
    if (!stopped.ok() && stopped.code() != Status::Code::kNotFound) {
      spdlog::error("kernel {}: to be stopped ({}), but its container {} could not be stopped ({}); retrying",
                    kernel_id, reason, container_id, stopped.message());
      (void)table_.StopFailed(kernel_id);
      continue;
    }
    (void)table_.Terminated(kernel_id, stop.exit_code, reason, stop.ended_at);
  }
}

Result<Kernel> Agent::RestartKernel(const std::string& kernel_id) {
  std::string container_id;
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
  }
  Status s = engine_.Restart(container_id, StopTimeout());
  MutexLock lock(mutex_);
  if (!table_.Find(kernel_id)) return Status::NotFound("kernel " + kernel_id + " was removed while restarting");
  if (Status finished = table_.FinishRestart(kernel_id, s.ok()); !finished.ok()) return finished;
  if (!s.ok()) return s.WithPrefix("restarting kernel " + kernel_id);
  return *table_.Find(kernel_id);
}

Result<std::string> Agent::RunningContainer(const std::string& kernel_id) const {
  auto kernel = GetKernel(kernel_id);
  if (!kernel.ok()) return kernel.status();
  if (kernel->state() != KernelState::kRunning)
    return Status::FailedPrecondition("kernel " + kernel_id + " is " + KernelStateName(kernel->state()) +
                                      ", not RUNNING; exec needs a running kernel");
  return kernel->container_id;
}

Result<ExecResult> Agent::Exec(const std::string& kernel_id, const std::vector<std::string>& command,
                               std::chrono::seconds timeout) {
  Result<std::string> container = RunningContainer(kernel_id);
  if (!container.ok()) return container.status();
  return engine_.Exec(*container, command, timeout);
}

Result<ExecSession> Agent::ExecInteractive(const std::string& kernel_id, const std::vector<std::string>& command,
                                           int rows, int cols) {
  Result<std::string> container = RunningContainer(kernel_id);
  if (!container.ok()) return container.status();
  return engine_.ExecInteractive(*container, command, rows, cols);
}

Result<ExecInfo> Agent::InspectExec(const std::string& kernel_id, const std::string& exec_id) {
  auto kernel = GetKernel(kernel_id);
  if (!kernel.ok()) return kernel.status();
  // An exec id is letters, digits, "-" and "_" (the engine's are hex): never a
  // path of its own, so it cannot reach another engine route.
  const bool well_formed = !exec_id.empty() && exec_id.size() <= 128 &&
                           std::all_of(exec_id.begin(), exec_id.end(), [](char c) {
                             return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
                           });
  if (!well_formed)
    return Status::InvalidArgument("exec id \"" + exec_id.substr(0, 128) +
                                   "\" is not one: exec ids are up to 128 letters, digits, \"-\" and \"_\", as the "
                                   "X-Slotd-Exec-Id header of the upgrade answer gave it");
  const Status unknown = Status::NotFound("kernel " + kernel_id + " has no exec " + exec_id);
  Result<ExecInfo> info = engine_.InspectExec(exec_id);
  if (!info.ok()) return info.status().code() == Status::Code::kNotFound ? unknown : info.status();
  // Another container's exec (another agent's, anyone's) is none of this kernel's.
  if (kernel->container_id.empty() || info->container_id != kernel->container_id) return unknown;
  return info;
}

Status Agent::HangUpExec(const std::string& kernel_id, const std::string& exec_id, std::chrono::milliseconds grace) {
  Result<ExecInfo> info = InspectExec(kernel_id, exec_id);
  if (!info.ok()) return info.status();
  if (!info->running || info->pid <= 0) return Status::Ok();
  const std::string what =
      "ending exec " + exec_id + " of kernel " + kernel_id + " (pid " + std::to_string(info->pid) + ")";
  // A pidfd holds on to the process itself: once the exec is seen running
  // as this pid after the open, no reuse of the number can misdirect a signal.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, info->pid, 0));
  if (pidfd < 0) {
    if (errno == ESRCH) return Status::Ok();
    return Status::Internal(what + ": pidfd_open: " + std::strerror(errno));
  }
  auto send_signal = [&](int sig) {
    return ::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0 || errno == ESRCH;
  };
  Status ended = Status::Ok();
  Result<ExecInfo> again = InspectExec(kernel_id, exec_id);
  if (again.ok() && again->running && again->pid == info->pid) {
    if (!send_signal(SIGHUP)) {
      ended = Status::PermissionDenied(what + ": SIGHUP: " + std::strerror(errno) + "; the agent must run as root");
    } else {
      pollfd exited{pidfd, POLLIN, 0};  // readable once the process has ended
      if (::poll(&exited, 1, static_cast<int>(grace.count())) == 0 && !send_signal(SIGKILL))
        ended = Status::PermissionDenied(what + ": SIGKILL: " + std::strerror(errno));
    }
  }
  ::close(pidfd);
  return ended;
}

Status Agent::ResizeExec(const std::string& kernel_id, const std::string& exec_id, int rows, int cols) {
  Result<ExecInfo> info = InspectExec(kernel_id, exec_id);
  if (!info.ok()) return info.status();
  return engine_.ResizeExec(exec_id, rows, cols);
}

Status Agent::StreamLogs(const std::string& kernel_id, int tail, bool follow, const std::function<void()>& on_started,
                         const std::function<bool(std::string_view)>& on_output, const std::atomic<bool>& stop) {
  auto kernel = GetKernel(kernel_id);
  if (!kernel.ok()) return kernel.status();
  if (kernel->container_id.empty()) return Status::Ok();
  return engine_.StreamLogs(kernel->container_id, tail, follow, on_started, on_output, stop);
}

std::vector<StatsTarget> Agent::StatsTargets() const {
  MutexLock lock(mutex_);
  std::vector<StatsTarget> targets;
  for (const auto& [id, kernel] : table_.All()) {
    if (kernel.state() != KernelState::kRunning || kernel.container_id.empty()) continue;
    targets.push_back({id, kernel.container_id, kernel.allocation.devices});
  }
  return targets;
}

json Agent::DescribeResources() const {
  MutexLock lock(mutex_);
  json out = json::object();
  for (const auto& plugin : plugins_) out.update(plugin->Describe());
  return out;
}

AgentDocument Agent::FleetDocument(const std::string& address) const {
  AgentDocument doc;
  doc.id = config_.agent.id;
  doc.node = config_.agent.node;
  doc.address = address;
  doc.version = kSlotdVersion;
  doc.scaling_group = config_.agent.scaling_group;
  MutexLock lock(mutex_);
  doc.draining = drain_.draining;
  json described = json::object();
  for (const auto& plugin : plugins_) described.update(plugin->Describe());
  doc.SetResources(described);
  doc.kernels = std::count_if(table_.All().begin(), table_.All().end(), [](const auto& entry) {
    return entry.second.state() != KernelState::kTerminated && entry.second.state() != KernelState::kError;
  });
  return doc;
}

void Agent::Resume(const std::string& kernel_id, const std::string& how) {
  Status claimed = table_.Resume(kernel_id, how);
  const Kernel* kernel = table_.Find(kernel_id);
  if (claimed.ok() || !kernel || kernel->state() != KernelState::kError) return;
  spdlog::error("kernel {}: {}; stopping it", kernel_id, kernel->reason);
  intruders_.emplace_back(kernel_id, kernel->container_id);
}

reconcile::EventStep Agent::EventStepFor(const Kernel* kernel, const EngineEvent& event) const {
  if (!kernel) return reconcile::DecideOnEvent(event, nullptr);
  const reconcile::Known known = table_.KnownOf(*kernel);
  return reconcile::DecideOnEvent(event, &known);
}

reconcile::Step Agent::StepFor(const ContainerInfo& info, uint64_t list_seq) const {
  auto kid = info.labels.find(label::kKernelId);
  if (kid == info.labels.end()) return reconcile::DecideOnContainer(info, nullptr, std::nullopt, list_seq);
  const std::optional<uint64_t> forgotten_at = table_.ForgottenAt(kid->second);
  const Kernel* kernel = table_.Find(kid->second);
  if (!kernel) return reconcile::DecideOnContainer(info, nullptr, forgotten_at, list_seq);
  const reconcile::Known known = table_.KnownOf(*kernel);
  return reconcile::DecideOnContainer(info, &known, forgotten_at, list_seq);
}

void Agent::ConfirmDeath(const std::string& kernel_id, const EngineEvent& event) {
  // A die that a restart has already overtaken (the event reader lagged) must
  // not free a kernel whose container runs again: ask the engine, unlocked.
  std::optional<int> code;
  if (auto it = event.attributes.find("exitCode"); it != event.attributes.end()) code = std::atoi(it->second.c_str());
  std::optional<int64_t> ended_at;
  if (event.time_nano > 0) ended_at = event.time_nano / 1'000'000'000;
  if (auto info = engine_.Inspect(event.id); info.ok()) {
    if (info->running) return;
    code = info->exit_code;
    if (info->finished_unix > 0) ended_at = info->finished_unix;
  }
  MutexLock lock(mutex_);
  const Kernel* k = table_.Find(kernel_id);
  if (EventStepFor(k, event) != reconcile::EventStep::kCheckDeath) return;  // changed meanwhile
  // Killed (137) after the engine reported a kill for lack of memory: that was its end.
  std::string reason = k->oom_kills > 0 && code == 137 ? "out of memory"
                                                       : "exited with code " + (code ? std::to_string(*code) : "?");
  (void)table_.Terminated(kernel_id, code, reason, ended_at);
}

// What differs between a kernel's allocation and its container as inspected,
// in words; empty when nothing does.
static std::string DriftOf(const Kernel& kernel, const ContainerInfo& info) {
  std::vector<std::string> drift;
  if (info.state == "paused") drift.push_back("paused outside slotd (docker unpause it)");
  const std::string cpuset = FormatCoreList(kernel.allocation.cores);
  if (!kernel.allocation.cores.empty() && info.cpuset_cpus != cpuset)
    drift.push_back("its cpuset was changed outside slotd to \"" + info.cpuset_cpus + "\" (allocated: " + cpuset + ")");
  if (kernel.allocation.mem_bytes > 0 && static_cast<uint64_t>(info.memory_bytes) != kernel.allocation.mem_bytes)
    drift.push_back("its memory limit was changed outside slotd to " + std::to_string(info.memory_bytes) +
                    " bytes (allocated: " + std::to_string(kernel.allocation.mem_bytes) + ")");
  std::string text;
  for (const auto& d : drift) text += (text.empty() ? "" : "; ") + d;
  return text;
}

void Agent::CheckDrift(const std::string& kernel_id, const std::string& container_id) {
  auto info = engine_.Inspect(container_id);
  if (!info.ok()) return;  // gone: its destroy event or the next relist tells
  MutexLock lock(mutex_);
  Kernel* k = table_.Find(kernel_id);
  if (!k || !reconcile::MayCheckDrift(table_.KnownOf(*k), container_id)) return;  // changed meanwhile
  std::string condition = DriftOf(*k, *info);
  if (condition == k->condition) return;
  k->condition = std::move(condition);
  if (k->condition.empty()) {
    spdlog::info("kernel {}: its container matches its allocation again", kernel_id);
  } else {
    spdlog::warn("kernel {}: {}", kernel_id, k->condition);
  }
  table_.Announce("kernel_condition", *k,
                  {{"condition", k->Conditions().empty() ? json(nullptr) : json(k->Conditions())}});
}

void Agent::StopIntruders() {
  std::vector<std::pair<std::string, std::string>> intruders;
  {
    MutexLock lock(mutex_);
    intruders.swap(intruders_);
  }
  for (const auto& [kernel_id, container_id] : intruders) {
    const StopOutcome stop = StopContainer(container_id);
    MutexLock lock(mutex_);
    const Kernel* k = table_.Find(kernel_id);
    if (!k || k->container_id != container_id || k->state() != KernelState::kError) continue;
    if (!stop.stopped.ok() && stop.stopped.code() != Status::Code::kNotFound) {
      spdlog::error("kernel {}: could not stop its container {}: {}", kernel_id, container_id,
                    stop.stopped.message());
      continue;
    }
    (void)table_.Terminated(kernel_id, std::nullopt, "stopped by slotd: its " + k->reason, stop.ended_at);
  }
}

bool Agent::OnEngineEvent(const EngineEvent& event) {
  const bool relist = ApplyEngineEvent(event);
  StopIntruders();
  return relist;
}

bool Agent::ApplyEngineEvent(const EngineEvent& event) {
  const std::optional<std::string> kernel_id = reconcile::KernelIdOfEvent(event, config_.agent.id);
  if (!kernel_id) return false;
  MutexLock lock(mutex_);
  Kernel* k = table_.Find(*kernel_id);
  switch (EventStepFor(k, event)) {
    case reconcile::EventStep::kNothing:
      return false;
    case reconcile::EventStep::kRelist:
      return true;
    case reconcile::EventStep::kNoteOom:
      ++k->oom_kills;
      spdlog::warn("kernel {}: a process was killed for lack of memory", *kernel_id);
      table_.Announce("kernel_condition", *k, {{"condition", json(k->Conditions())}});
      return false;
    case reconcile::EventStep::kResume:
      Resume(*kernel_id, "started outside slotd");
      return false;
    case reconcile::EventStep::kForget:
      spdlog::warn("kernel {}: its container was removed outside slotd; freeing its resources", *kernel_id);
      (void)table_.Forget(*kernel_id, "container removed outside slotd");
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

void Agent::FinishStarts(const std::vector<std::string>& kernel_ids) {
  for (const std::string& kernel_id : kernel_ids) {
    std::string container_id;
    std::string image;
    {
      MutexLock lock(mutex_);
      const Kernel* k = table_.Find(kernel_id);
      if (!k || k->state() != KernelState::kPreparing) continue;
      container_id = k->container_id;
      image = k->request.image;
    }
    // The agent may have stopped before it decided the user: decide it now.
    Status cleared = Status::Ok();
    if (!config_.container.allow_root && !config_.container.kernel_uid) {
      Result<ImageInfo> info = engine_.InspectImage(image);
      cleared = info.ok() ? ResolveRunAs(container_id, image, info->user).status() : info.status();
    }
    const Status started = cleared.ok() ? engine_.Start(container_id) : cleared;
    MutexLock lock(mutex_);
    const Kernel* k = table_.Find(kernel_id);
    if (!k || k->container_id != container_id || k->state() != KernelState::kPreparing) continue;
    if (started.ok()) {
      spdlog::info("kernel {}: started its container, created before the agent stopped", kernel_id);
      (void)table_.Started(kernel_id);
    } else {
      (void)table_.Terminated(kernel_id, std::nullopt, "never started: " + started.message(), std::nullopt);
    }
  }
}

Status Agent::Adopt(reconcile::Step step, const ContainerInfo& info, const ContainerInfo* inspected, bool at_start,
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
  // Adopted as `state`, or, when its allocation cannot be claimed, as what `refused` says.
  auto adopt = [&](KernelState state, const std::function<Status(const Status&)>& refused) -> Status {
    Status claimed = table_.Adopt(kernel, state);
    return claimed.ok() ? claimed : refused(claimed);
  };
  Status outcome = Status::Ok();
  if (step == reconcile::Step::kAdoptCreated) {
    // Created but never started: the agent stopped between the two calls of
    // a create. Finish the create (FinishStarts), holding its resources.
    outcome = adopt(KernelState::kPreparing, [&](const Status& s) {
      kernel.reason = "never started: the agent stopped between creating and starting its container, and its "
                      "resources are now held elsewhere (" + s.message() + "); delete it";
      return table_.Adopt(kernel, KernelState::kTerminated);
    });
    if (outcome.ok() && table_.Find(kernel_id)->state() == KernelState::kPreparing) never_started.push_back(kernel_id);
  } else if (step == reconcile::Step::kAdoptRunning) {
    outcome = adopt(KernelState::kRunning, [&](const Status& s) {
      if (s.code() == Status::Code::kResourceExhausted) {
        // A newer kernel holds it (AdoptionOrder): this older container was
        // started again behind the agent's back. Stop it; never refuse.
        kernel.reason = "container found running on resources it does not hold: " + s.message();
        spdlog::error("kernel {}: {}; stopping it", kernel_id, kernel.reason);
        intruders_.emplace_back(kernel_id, info.id);
        return table_.Adopt(kernel, KernelState::kError);
      }
      Status why = Status::FailedPrecondition(
          "kernel " + kernel_id + " (container " + info.name + ") cannot be restored: " + s.message() +
          ". Its container still holds what its ai.backend.allocations label records; either give this agent "
          "those resources back in its config, or remove the container (docker rm -f " + info.name +
          "), then start the agent again");
      if (at_start) return why;
      kernel.reason = why.message();
      spdlog::error("{}", why.message());
      return table_.Adopt(kernel, KernelState::kError);
    });
  } else {
    kernel.exit_code = inspected ? std::optional<int>(inspected->exit_code) : std::nullopt;
    kernel.reason = "exited with code " + (inspected ? std::to_string(inspected->exit_code) : "?");
    if (inspected && inspected->finished_unix > 0) kernel.terminated_at = inspected->finished_unix;
    outcome = table_.Adopt(kernel, KernelState::kTerminated);
  }
  if (!outcome.ok()) return outcome;
  spdlog::info("adopted kernel {} ({})", kernel_id, KernelStateName(table_.Find(kernel_id)->state()));
  return Status::Ok();
}

std::map<std::string, ContainerInfo> Agent::InspectEnded(const std::vector<ContainerInfo>& mine, uint64_t list_seq) {
  std::vector<std::string> to_inspect;
  {
    MutexLock lock(mutex_);
    for (const auto& info : mine)
      if (reconcile::NeedsExitCode(StepFor(info, list_seq))) to_inspect.push_back(info.id);
  }
  std::map<std::string, ContainerInfo> inspected;
  for (const auto& id : to_inspect)
    if (auto info = engine_.Inspect(id); info.ok()) inspected[id] = std::move(*info);
  return inspected;
}

Status Agent::ApplyList(const std::vector<ContainerInfo>& mine, const std::map<std::string, ContainerInfo>& inspected,
                        uint64_t list_seq, bool at_start, Applied& applied) {
  std::set<std::string> present;
  for (const auto& info : mine) {
    present.insert(info.id);
    const reconcile::Step step = StepFor(info, list_seq);
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
      case reconcile::Step::kMarkExited: {
        const std::optional<int> code = end ? std::optional<int>(end->exit_code) : std::nullopt;
        const std::optional<int64_t> at = end && end->finished_unix > 0 ? std::optional(end->finished_unix)
                                                                         : std::nullopt;
        (void)table_.Terminated(kernel_id, code,
                                "exited with code " + (code ? std::to_string(*code) : "?") + " (noticed on relist)",
                                at);
        break;
      }
      case reconcile::Step::kAdoptCreated:
      case reconcile::Step::kAdoptRunning:
      case reconcile::Step::kAdoptExited:
        if (Status s = Adopt(step, info, end, at_start, applied.never_started); !s.ok()) return s;
        break;
    }
    // Paused containers, and kernels whose condition may have cleared, are inspected.
    const Kernel* k = kernel_id.empty() ? nullptr : table_.Find(kernel_id);
    if (k && k->container_id == info.id && (info.state == "paused" || !k->condition.empty()))
      applied.to_check.emplace_back(kernel_id, info.id);
  }
  std::map<std::string, reconcile::Known> known;
  for (const auto& [id, kernel] : table_.All()) known.emplace(id, table_.KnownOf(kernel));
  for (const auto& id : reconcile::Vanished(known, present, list_seq)) {
    spdlog::warn("kernel {}: its container vanished; freeing its resources", id);
    (void)table_.Forget(id, "container vanished");
  }
  table_.DropForgottenUpTo(list_seq);
  return Status::Ok();
}

Status Agent::Converge(bool at_start) {
  uint64_t list_seq;
  {
    MutexLock lock(mutex_);
    list_seq = table_.Seq();
  }
  auto listed = engine_.List(OwnerFilter());
  if (!listed.ok()) {
    RecordEngineAnswer(false);
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
    MutexLock lock(mutex_);
    if (Status s = ApplyList(mine, inspected, list_seq, at_start, applied); !s.ok()) return s;
  }
  FinishStarts(applied.never_started);
  StopIntruders();
  for (const auto& [kernel_id, container_id] : applied.to_check) CheckDrift(kernel_id, container_id);
  // Scratch of no kernel (its container vanished, or the agent died while
  // deleting it) goes; that of any container listed as ours stays.
  auto kept = [&]() EXCLUDES(mutex_) {
    std::set<std::string> keep = listed_kernels;
    MutexLock lock(mutex_);
    for (const auto& [id, kernel] : table_.All()) keep.insert(id);
    return keep;
  };
  scratch_.Collect(kept);
  mount_stage_.Collect(kept);
  RecordEngineAnswer(true);
  last_sync_ns_ = clock_.Now().time_since_epoch().count();
  return Status::Ok();
}

Status Agent::Relist() { return Converge(/*at_start=*/false); }

Status Agent::Restore() {
  StartDevices();
  if (Status s = Converge(/*at_start=*/true); !s.ok()) return s;
  ApplyDeviceHealth();
  MutexLock lock(mutex_);
  spdlog::info("restored {} kernel(s) from container labels", table_.All().size());
  return Status::Ok();
}

// ---- Devices: drains, health, and their record.

void Agent::EmitDevice(const char* type, const std::string& plugin, json extra) {
  extra["type"] = type;
  extra["agent_id"] = config_.agent.id;
  extra["plugin"] = plugin;
  extra["time"] = clock_.UnixSeconds();
  hub_.Publish(extra);
}

AgentRecord Agent::CurrentAgentRecord() const {
  AgentRecord record;
  record.draining = drain_.draining;
  record.draining_since = drain_.since;
  for (const auto& plugin : plugins_) {
    if (plugin->OwnedDevices().empty()) continue;
    record.owned[plugin->Name()] = plugin->OwnedDevices();
    if (std::set<std::string> drained = plugin->Drained(); !drained.empty()) record.drained[plugin->Name()] = drained;
  }
  for (const auto& [plugin, board] : boards_)
    if (auto marks = board->Marks(); !marks.empty()) record.marks[plugin] = std::move(marks);
  return record;
}

Status Agent::WriteAgentRecord(const AgentRecord& record) {
  if ((record == record_ && record_on_disk_) || record_path_.empty()) return Status::Ok();
  if (Status s = record.Save(record_path_); !s.ok()) return s;
  record_ = record;
  record_on_disk_ = true;
  return Status::Ok();
}

void Agent::KeepAgentRecord() {
  const Status s = WriteAgentRecord(CurrentAgentRecord());
  if (!s.ok() && !record_behind_)
    spdlog::error("devices: {}; drains and health marks will not survive a restart until it can be written (the agent "
                  "tries again)", s.message());
  if (s.ok() && record_behind_) spdlog::info("devices: {} is up to date again", record_path_);
  record_behind_ = !s.ok();
}

void Agent::StartDevices() {
  Result<AgentRecord> loaded =
      record_path_.empty() ? Result<AgentRecord>(AgentRecord()) : AgentRecord::Load(record_path_);
  if (!loaded.ok() && loaded.status().code() == Status::Code::kInvalidArgument) {
    // Kept for the operator, never overwritten: it may hold drains and marks worth restoring by hand.
    const std::string aside = record_path_ + ".bad-" + std::to_string(clock_.UnixSeconds());
    const bool kept = std::rename(record_path_.c_str(), aside.c_str()) == 0;
    spdlog::error("devices: {}; {}; starting without its drains and health marks (drain the agent or its devices "
                  "again if they should be)",
                  loaded.status().message(),
                  kept ? "kept it aside as " + aside
                       : "cannot keep it aside as " + aside + " (" + std::strerror(errno) + "), so it is left as it is");
  } else if (!loaded.ok()) {
    spdlog::error("devices: {}; starting without its drains and health marks", loaded.status().message());
  }
  const AgentRecord before = loaded.ok() ? *loaded : AgentRecord();
  std::error_code missing;
  const bool on_disk = loaded.ok() && !record_path_.empty() && std::filesystem::exists(record_path_, missing);
  MutexLock lock(mutex_);
  record_ = before;
  record_on_disk_ = on_disk;  // a missing or unreadable record is written anew below
  drain_ = Drain{before.draining, before.draining_since};
  if (drain_.draining) spdlog::warn("agent {} is draining (recorded in {}): it takes no new kernels until undrained",
                                    config_.agent.id, record_path_);
  for (const auto& plugin : plugins_) {
    const std::vector<std::string> owned = plugin->OwnedDevices();
    if (auto drained = before.drained.find(plugin->Name()); drained != before.drained.end())
      for (const std::string& id : drained->second)
        if (!plugin->SetDrained(id, true).ok())
          spdlog::warn("devices: {} device {} was drained, but this agent owns it no more", plugin->Name(), id);
    if (auto marks = before.marks.find(plugin->Name()); marks != before.marks.end() && plugin->Health())
      for (const auto& [id, mark] : marks->second) plugin->Health()->Mark(id, mark.reason, mark.since);
    // The layout: what was owned at the last start against what is owned now.
    auto was = before.owned.find(plugin->Name());
    if (was == before.owned.end()) continue;
    std::vector<std::string> gone, added;
    for (const std::string& id : was->second)
      if (std::find(owned.begin(), owned.end(), id) == owned.end()) gone.push_back(id);
    for (const std::string& id : owned)
      if (std::find(was->second.begin(), was->second.end(), id) == was->second.end()) added.push_back(id);
    if (gone.empty() && added.empty()) continue;
    spdlog::warn("devices: the {} devices changed since the agent last ran: {} gone, {} new", plugin->Name(),
                 gone.size(), added.size());
    EmitDevice("device_layout", plugin->Name(), {{"gone", gone}, {"new", added}});
  }
  for (const auto& plugin : plugins_) plugin->StartHealthMonitor();
  KeepAgentRecord();
}

Agent::Drain Agent::Draining() const {
  MutexLock lock(mutex_);
  return drain_;
}

Result<Agent::Drain> Agent::SetDraining(bool drain) {
  MutexLock lock(mutex_);
  if (drain_.draining == drain) return drain_;
  const Drain next = drain ? Drain{true, clock_.UnixSeconds()} : Drain{};
  AgentRecord record = CurrentAgentRecord();
  record.draining = next.draining;
  record.draining_since = next.since;
  if (Status s = WriteAgentRecord(record); !s.ok())
    return s.WithPrefix(drain ? "the agent is not draining" : "the agent is still draining");
  drain_ = next;
  spdlog::info("agent {} {}", config_.agent.id, drain ? "is draining: it takes no new kernels" : "takes new kernels again");
  json event = {{"type", drain ? "agent_drained" : "agent_undrained"},
                {"agent_id", config_.agent.id},
                {"time", clock_.UnixSeconds()}};
  hub_.Publish(event);
  return drain_;
}

Result<Agent::DeviceChange> Agent::ResolveDevice(const std::string& name) const {
  std::string tried;
  for (const auto& plugin : plugins_) {
    if (plugin->OwnedDevices().empty()) continue;
    Result<std::vector<std::string>> ids = plugin->ResolveDevice(name);
    if (ids.ok()) return DeviceChange{plugin->Name(), *ids};
    tried += (tried.empty() ? "" : "; ") + ids.status().message();
  }
  return Status::NotFound("device " + name + " is not one of this agent's" +
                          (tried.empty() ? std::string(" (it has no devices)") : ": " + tried) +
                          "; name it as resource.<kind>.allowed-devices does (GET /v1/agent lists them)");
}

Result<Agent::DeviceChange> Agent::DrainDevice(const std::string& name, bool drain) {
  MutexLock lock(mutex_);
  Result<DeviceChange> change = ResolveDevice(name);
  if (!change.ok()) return change.status();
  // Recorded first: a drain that cannot be written is not made.
  AgentRecord record = CurrentAgentRecord();
  std::set<std::string>& drained = record.drained[change->plugin];
  for (const std::string& id : change->devices) {
    if (drain) drained.insert(id);
    else drained.erase(id);
  }
  if (drained.empty()) record.drained.erase(change->plugin);
  if (Status s = WriteAgentRecord(record); !s.ok())
    return s.WithPrefix(std::string("devices ") + name + (drain ? " are not drained" : " are still drained"));
  for (const auto& plugin : plugins_) {
    if (plugin->Name() != change->plugin) continue;
    for (const std::string& id : change->devices)
      if (Status s = plugin->SetDrained(id, drain); !s.ok()) return s;
  }
  spdlog::info("devices: {} {} device(s) {}", drain ? "drained" : "undrained", change->plugin, name);
  EmitDevice(drain ? "device_drained" : "device_undrained", change->plugin, {{"devices", change->devices}});
  return change;
}

Result<Agent::DeviceChange> Agent::ClearDevice(const std::string& name) {
  MutexLock lock(mutex_);
  Result<DeviceChange> change = ResolveDevice(name);
  if (!change.ok()) return change.status();
  auto board = std::find_if(boards_.begin(), boards_.end(), [&](const auto& b) { return b.first == change->plugin; });
  DeviceChange cleared{change->plugin, {}};
  const std::map<std::string, DeviceMark> marks =
      board == boards_.end() ? std::map<std::string, DeviceMark>() : board->second->Marks();
  for (const std::string& id : change->devices)
    if (marks.count(id)) cleared.devices.push_back(id);
  if (cleared.devices.empty())
    return Status::FailedPrecondition("device " + name + " has no health mark to clear (a mark is left by a "
                                      "critical Xid); what a poll finds (ECC errors, a lost GPU) clears itself "
                                      "when the device recovers");
  // Recorded first: a clear that cannot be written is not made.
  AgentRecord record = CurrentAgentRecord();
  for (const std::string& id : cleared.devices) record.marks[change->plugin].erase(id);
  if (record.marks[change->plugin].empty()) record.marks.erase(change->plugin);
  if (Status s = WriteAgentRecord(record); !s.ok())
    return s.WithPrefix("the health marks of devices " + name + " stay");
  for (const std::string& id : cleared.devices) board->second->Clear(id, clock_.UnixSeconds());
  spdlog::info("devices: cleared the health marks of {} device(s) {}", change->plugin, name);
  return cleared;
}

std::vector<Agent::DeviceState> Agent::DeviceStates() const {
  MutexLock lock(mutex_);
  std::vector<DeviceState> states;
  for (const auto& plugin : plugins_) {
    std::shared_ptr<DeviceHealthBoard> board = plugin->Health();
    if (!board) continue;
    const std::set<std::string> drained = plugin->Drained();
    const auto health = board->Snapshot();
    for (const std::string& id : plugin->OwnedDevices()) {
      auto state = health.find(id);
      states.push_back({plugin->Name(), id, state == health.end() ? DeviceHealthState{} : state->second,
                        drained.count(id) > 0});
    }
  }
  return states;
}

void Agent::ApplyDeviceHealth() {
  uint64_t version = 0;
  for (const auto& [plugin, board] : boards_) version += board->Version();
  std::vector<std::pair<std::string, std::string>> to_stop;  // (kernel, container)
  {
    MutexLock lock(mutex_);
    if (version == health_version_ && !record_behind_) return;
    health_version_ = version;
    // Devices whose health changed since the last report.
    std::map<std::pair<std::string, std::string>, DeviceHealthState> now;
    std::set<std::string> stopping_plugins;
    for (const auto& plugin : plugins_)
      if (plugin->StopsKernelsOnUnhealthy()) stopping_plugins.insert(plugin->Name());
    for (const auto& [plugin, board] : boards_) {
      for (const auto& [id, state] : board->Snapshot()) {
        const std::pair<std::string, std::string> key{plugin, id};
        if (state.health != DeviceHealth::kHealthy) now[key] = state;
        auto before = health_reported_.find(key);
        const DeviceHealthState was = before == health_reported_.end() ? DeviceHealthState{} : before->second;
        if (was.health == state.health && was.reason == state.reason) continue;
        const bool healthy = state.health == DeviceHealth::kHealthy;
        if (healthy) {
          spdlog::info("devices: {} device {} is healthy again", plugin, id);
        } else {
          spdlog::warn("devices: {} device {} is {}: {}", plugin, id, DeviceHealthName(state.health), state.reason);
        }
        EmitDevice(healthy ? "device_healthy" : "device_unhealthy", plugin,
                   {{"device", id},
                    {"health", DeviceHealthName(state.health)},
                    {"reason", healthy ? json(nullptr) : json(state.reason)},
                    {"since", state.since}});
      }
    }
    health_reported_ = now;
    // The kernels on those devices.
    std::vector<std::string> running;
    for (const auto& [kernel_id, kernel] : table_.All())
      if (kernel.state() == KernelState::kRunning && kernel.holds_resources) running.push_back(kernel_id);
    for (const std::string& kernel_id : running) {
      Kernel& kernel = *table_.Find(kernel_id);
      std::string condition;
      bool stop = false;
      for (const auto& [plugin, ids] : kernel.allocation.devices) {
        for (const std::string& id : ids) {
          auto bad = now.find({plugin, id});
          if (bad == now.end()) continue;
          condition += (condition.empty() ? "" : "; ") + plugin + " device " + id + " is " +
                       DeviceHealthName(bad->second.health) + ": " + bad->second.reason;
          stop = stop || (bad->second.health == DeviceHealth::kUnhealthy && stopping_plugins.count(plugin));
        }
      }
      // Ours until stopped, as in DeleteKernel.
      if (stop && table_.Stopping(kernel_id).ok()) to_stop.emplace_back(kernel_id, kernel.container_id);
      if (condition == kernel.device_condition) continue;
      kernel.device_condition = condition;
      if (!condition.empty()) spdlog::warn("kernel {}: {}", kernel_id, condition);
      table_.Announce("kernel_condition", kernel,
           {{"condition", kernel.Conditions().empty() ? json(nullptr) : json(kernel.Conditions())}});
    }
    KeepAgentRecord();
  }
  for (const auto& [kernel_id, container_id] : to_stop)
    spdlog::warn("kernel {}: stopping it, a device it holds is unhealthy (on-unhealthy = \"stop\")", kernel_id);
  StopTerminating(to_stop, "device unhealthy");
  if (!to_stop.empty()) {
    MutexLock lock(mutex_);
    health_version_ = ~0ull;  // a kernel whose stop failed is looked at again
  }
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

void Agent::RecordEngineAnswer(bool answered) {
  if (answered) last_answer_ns_ = clock_.Now().time_since_epoch().count();
  engine_answered_ = answered;
}

}  // namespace slotd
