// Agent, continued: the creation and start of a kernel's container (the
// image made ready, the user it runs as, its scratch and mounts, the checks
// after its start), and the undoing of a create that fails.
#include "agent/agent.h"

#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "agent/label_codec.h"
#include "agent/mounts.h"
#include "common/units.h"
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

Result<std::string> Agent::PrepareImage(const CreateRequest& request, PullPolicy policy) {
  Result<std::optional<ImageInfo>> image = puller_.Ensure(request.image, policy);
  Result<ImageInfo> info = !image.ok() ? Result<ImageInfo>(image.status())
                           : *image    ? Result<ImageInfo>(**image)
                                       : engine_.InspectImage(request.image.name);
  if (!info.ok() && info.status().code() == Status::Code::kNotFound)
    info = ImageMissing(request.image.name, info.status());
  const Status ready = info.ok() ? CheckUser(request.image.name, info->user) : info.status();
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

Result<RunAs> Agent::ReadRunAs(const std::string& container_id, const std::string& image, const std::string& user,
                               bool own_mounts) {
  // No user is the runtime's default, root, whatever the files say. (A
  // number is not enough: a passwd line may be named by it.)
  if (user.empty()) return ResolveUser(user, "", "");
  Result<ContainerInfo> container = engine_.Inspect(container_id);
  if (!container.ok()) return container.status().WithPrefix("deciding the user it runs as");
  // A kernel's own mounts may cover /etc: its files are then not its image's.
  const std::string image_id = own_mounts ? "" : container->image_id;
  if (!image_id.empty())
    if (std::optional<RunAs> known = resolved_users_.Find(image_id, user)) return *known;
  // Longer files than this are no user database an image means.
  constexpr size_t kMaxUserFile = 4u << 20;
  std::string files[2];
  const char* const paths[2] = {"/etc/passwd", "/etc/group"};
  for (int i = 0; i < 2; ++i) {
    Result<std::string> text = engine_.ReadFile(container_id, paths[i], kMaxUserFile);
    if (text.ok()) {
      files[i] = std::move(*text);
    } else if (text.status().code() != Status::Code::kNotFound) {
      return text.status().WithPrefix("deciding the user it runs as");
    }
  }
  Result<RunAs> run_as = ResolveUser(user, files[0], files[1]);
  if (run_as.ok() && !image_id.empty()) resolved_users_.Remember(image_id, user, *run_as);
  return run_as;
}

Result<RunAs> Agent::ResolveRunAs(const std::string& container_id, const std::string& image, const std::string& user,
                                  bool own_mounts) {
  Result<RunAs> run_as = ReadRunAs(container_id, image, user, own_mounts);
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
  warm_claims_.Remove(kernel_id);
}

Status Agent::AbandonReservation(const std::string& kernel_id, const Status& why) {
  RemoveKernelFiles(kernel_id);
  MutexLock lock(mutex_);
  if (Status s = table_.Abandon(kernel_id); !s.ok()) return s;
  return why;
}

ContainerSpec Agent::SpecFor(const CreateRequest& request, const Kernel& kernel) {
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
  spec.stop_timeout_s = static_cast<int>(StopTimeoutOf(request.stop).count());
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
  return spec;
}

Result<Agent::CreateOutcome> Agent::CreateContainer(const CreateRequest& request, const Kernel& kernel,
                                                    const std::string& image_user,
                                                    const std::vector<ResolvedMount>& mounts) {
  ContainerSpec spec = SpecFor(request, kernel);
  // Undo everything taken above; used on every failure path below.
  auto abandon = [&](const Status& why, const std::string& container_id) -> Status {
    spdlog::warn("kernel {}: the create failed, and everything it held is freed: {}", request.kernel_id,
                 why.message());
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
  if (config_.container.scratch_type == ScratchType::kTmpfs) {
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
      s = ImageMissing(request.image.name, s);
    else if (s.code() == Status::Code::kConflict)
      s = Status::Conflict("a container named " + spec.name + " already exists (" + s.message() +
                           "); it may be an older kernel with this id that the agent has not adopted yet — retry "
                           "in a few seconds or use another kernel_id");
    return abandon(s, "");
  }
  {
    MutexLock lock(mutex_);
    table_.SetContainer(request.kernel_id, *created);
    if (kernel.allocation.shared_cpu_millis > 0) {
      table_.Change(request.kernel_id)->applied_cpuset = spec.cpuset_cpus;
      cpusets_to_check_.insert(request.kernel_id);
    }
    table_.Announce("kernel_created", kernel);
  }
  if (!owner) {
    Result<RunAs> run_as = ResolveRunAs(*created, request.image.name, image_user, !mounts.empty());
    if (!run_as.ok()) return abandon(run_as.status(), *created);
    if (config_.container.scratch_type != ScratchType::kTmpfs) {
      if (Status s = scratch_.GiveTo(request.kernel_id, {run_as->uid, run_as->gid}); !s.ok())
        return abandon(s, *created);
    }
  }
  if (Status s = engine_.Start(*created); !s.ok()) return abandon(s.WithPrefix("starting the container"), *created);
  if (Status s = VerifyStarted(*created, mounts); !s.ok()) return abandon(s, *created);

  MutexLock lock(mutex_);
  const Status started =
      kernel.warm_pool.empty() ? table_.Started(request.kernel_id) : table_.Warmed(request.kernel_id);
  if (!started.ok()) return started;
  return CreateOutcome{*table_.Find(request.kernel_id), true};
}

}  // namespace slotd
