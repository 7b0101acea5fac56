// Agent, continued: the creation and start of a kernel's container (the
// image made ready, the user it runs as, its scratch and mounts, the checks
// after its start), and the undoing of a create that fails.
#include "agent/agent.h"

#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "model/label_codec.h"
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

Result<RunAs> Agent::PrepareImage(const CreateRequest& request, PullPolicy policy) {
  Result<std::optional<ImageInfo>> image = puller_.Ensure(request.image, policy);
  Result<ImageInfo> info = !image.ok() ? Result<ImageInfo>(image.status())
                           : *image    ? Result<ImageInfo>(**image)
                                       : engine_.InspectImage(request.image.name);
  if (!info.ok() && info.status().code() == Status::Code::kNotFound)
    info = ImageMissing(request.image.name, info.status());
  Result<RunAs> run_as = info.ok() ? DecideRunAs(request, *info) : Result<RunAs>(info.status());
  if (!run_as.ok()) return AbandonReservation(request.kernel_id, run_as.status());
  image_gc_.RecordUse(request.image, clock_.UnixSeconds());
  MutexLock lock(mutex_);
  if (const Kernel* k = table_.Find(request.kernel_id); k && k->state() == KernelState::kPulling)
    if (Status s = table_.Prepared(request.kernel_id); !s.ok()) return s;
  return run_as;
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

Result<RunAs> Agent::DecideRunAs(const CreateRequest& request, const ImageInfo& image) {
  const ContainerConfig& c = config_.container;
  const std::string& name = request.image.name;
  if (c.kernel_uid) {
    const RunAs run_as{*c.kernel_uid, c.kernel_gid.value_or(*c.kernel_uid)};
    if (c.allow_root || (run_as.uid != 0 && run_as.gid != 0)) return run_as;
    return Status::PermissionDenied(std::string("[container] kernel-uid = ") + std::to_string(run_as.uid) +
                                    ", kernel-gid = " + std::to_string(run_as.gid) + " runs kernels as root " +
                                    (run_as.uid == 0 ? "" : "'s group") + ", and allow-root is false" + kRootAdvice);
  }
  Result<RunAs> run_as = ReadImageUser(request.kernel_id, name, image, image.user);
  if (!run_as.ok()) return run_as.status().WithPrefix("image " + name);
  if (c.allow_root) return run_as;
  const std::string how = NumericId(image.user.substr(0, image.user.find(':'))) ? "" : " in the image's /etc/passwd";
  if (run_as->uid == 0) return RunsAsRoot(name, image.user, how);
  if (run_as->gid == 0)
    return Status::PermissionDenied(
        "image " + name + " runs in root's group (its user \"" + image.user + "\" has gid 0" +
        (image.user.find(':') == std::string::npos ? how : std::string()) +
        "; a kernel in group 0 can write what root's group may, such as a group-writable /etc/passwd) and "
        "[container] allow-root is false; give the image's USER a group other than 0 (USER uid:gid), set "
        "[container] kernel-uid and kernel-gid, or allow-root = true");
  return run_as;
}

Result<RunAs> Agent::ReadImageUser(const std::string& kernel_id, const std::string& image, const ImageInfo& info,
                                   const std::string& user) {
  // No user is the runtime's default, root, whatever the files say. (A
  // number is not enough: a passwd line may be named by it.)
  if (user.empty()) return ResolveUser(user, "", "");
  if (!info.id.empty())
    if (std::optional<RunAs> known = resolved_users_.Find(info.id, user)) return *known;
  // The image's own files, read from a container of it that is created for
  // this, never started, and removed (Restore removes one an agent stopped
  // before it could: label kUserProbe).
  ContainerSpec probe;
  probe.name = UserProbeName(config_.agent.id, kernel_id);
  probe.image = image;
  probe.command = {"/nonexistent"};
  // Never started, so its user is no one's; a number, because an engine
  // (Podman) resolves a name it is given before it reads a file.
  probe.user = "0:0";
  probe.network_mode = "none";
  probe.labels = {{label::kUserProbe, config_.agent.id}};
  Result<std::string> created = engine_.Create(probe);
  if (!created.ok()) return created.status().WithPrefix("deciding the user it runs as");
  // Longer files than this are no user database an image means.
  constexpr size_t kMaxUserFile = 4u << 20;
  std::string files[2];
  const char* const paths[2] = {"/etc/passwd", "/etc/group"};
  Status read = Status::Ok();
  for (int i = 0; i < 2 && read.ok(); ++i) {
    Result<std::string> text = engine_.ReadFile(*created, paths[i], kMaxUserFile);
    if (text.ok()) {
      files[i] = std::move(*text);
    } else if (text.status().code() != Status::Code::kNotFound) {
      read = text.status().WithPrefix("deciding the user it runs as");
    }
  }
  if (Status removed = engine_.Remove(*created, /*force=*/true); !removed.ok() && removed.code() != Status::Code::kNotFound)
    spdlog::error("kernel {}: could not remove the container {} made to read its image's users: {}", kernel_id,
                  probe.name, removed.message());
  if (!read.ok()) return read;
  Result<RunAs> run_as = ResolveUser(user, files[0], files[1]);
  if (run_as.ok() && !info.id.empty()) resolved_users_.Remember(info.id, user, *run_as);
  return run_as;
}

void Agent::RemoveUserProbes() {
  Result<std::vector<ContainerInfo>> probes = engine_.List({std::string(label::kUserProbe) + "=" + config_.agent.id});
  if (!probes.ok()) {
    spdlog::warn("could not list the containers made to read images' users: {}", probes.status().message());
    return;
  }
  for (const ContainerInfo& probe : *probes) {
    Status removed = engine_.Remove(probe.id, /*force=*/true);
    if (!removed.ok() && removed.code() != Status::Code::kNotFound)
      spdlog::error("could not remove {}, made to read an image's users: {}", probe.name, removed.message());
    else
      spdlog::info("removed {}, made to read an image's users before the agent stopped", probe.name);
  }
}

Status Agent::VerifyIds(const std::string& kernel_id, int pid, const std::optional<RunAs>& run_as) const {
  if (pid <= 0) return Status::Ok();  // it ended meanwhile: nothing runs as anyone
  std::ifstream file("/proc/" + std::to_string(pid) + "/status");
  std::stringstream status;
  status << file.rdbuf();
  const std::optional<ProcessIds> ids = StatusIds(status.str());
  if (!ids) return Status::Ok();  // it ended meanwhile
  const std::string problem = IdsProblem(*ids, run_as, config_.container.allow_root);
  if (problem.empty()) return Status::Ok();
  return Status::PermissionDenied("kernel " + kernel_id + ": its first process (pid " + std::to_string(pid) + ") " +
                                  problem + (config_.container.allow_root ? "" : ", and [container] allow-root is false") +
                                  "; the kernel is not kept" + kRootAdvice);
}

Status Agent::VerifyStarted(const std::string& kernel_id, const std::string& container_id,
                            const std::vector<ResolvedMount>& mounts, const std::optional<RunAs>& run_as) {
  if (mounts.empty() && config_.container.allow_root) return Status::Ok();  // nothing to check
  Result<ContainerInfo> info = engine_.Inspect(container_id);
  if (!info.ok()) return info.status().WithPrefix("checking the started container");
  if (Status s = VerifyMounted(info->pid, mounts); !s.ok()) return s;
  if (config_.container.allow_root) return Status::Ok();
  return VerifyIds(kernel_id, info->pid, run_as);
}

Status Agent::VerifyRestarted(const std::string& kernel_id, const std::string& container_id,
                              const std::optional<RunAs>& run_as) {
  if (config_.container.allow_root) return Status::Ok();  // as VerifyStarted
  Result<ContainerInfo> info = engine_.Inspect(container_id);
  Status verified = info.ok() ? VerifyIds(kernel_id, info->pid, run_as)
                              : info.status().WithPrefix("checking the user of its started container");
  if (verified.ok()) return verified;
  spdlog::error("{}", verified.message());
  if (Status killed = engine_.Kill(container_id); !killed.ok() && killed.code() != Status::Code::kNotFound)
    spdlog::error("kernel {}: could not kill its container {}: {}", kernel_id, container_id, killed.message());
  return verified;
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

Result<Agent::CreateOutcome> Agent::CreateContainer(const CreateRequest& request, const Kernel& reserved,
                                                    const RunAs& run_as, const std::vector<ResolvedMount>& mounts) {
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
    RemoveKernelFiles(request.kernel_id);
    MutexLock lock(mutex_);
    if (Status s = table_.Forget(request.kernel_id, "could not start: " + why.message()); !s.ok()) return s;
    return why;
  };

  const uint64_t scratch_bytes = request.resources.scratch_bytes.value_or(config_.container.scratch_size);
  if (config_.container.scratch_type == ScratchType::kTmpfs) {
    spec.mounts.push_back(
        {Mount::Type::kTmpfs, "", kScratchTarget, false, scratch_bytes ? scratch_bytes : request.resources.mem_bytes});
  } else {
    if (Status room = CheckScratchRoom(); !room.ok()) return abandon(room, "");
    Result<std::string> scratch =
        scratch_.Prepare(request.kernel_id, ScratchStore::Owner{run_as.uid, run_as.gid}, scratch_bytes);
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
    table_.Change(request.kernel_id)->run_as = run_as;
    if (kernel.allocation.shared_cpu_millis > 0) {
      table_.Change(request.kernel_id)->applied_cpuset = spec.cpuset_cpus;
      cpusets_to_check_.insert(request.kernel_id);
    }
    table_.Announce(EventType::kKernelCreated, kernel);
  }
  // Its spec's pool may be older than the pool now: never started on cores an exclusive kernel took meanwhile.
  if (kernel.allocation.shared_cpu_millis > 0) ConvergeCpusets();
  if (Status s = engine_.Start(*created); !s.ok()) return abandon(s.WithPrefix("starting the container"), *created);
  if (Status s = VerifyStarted(request.kernel_id, *created, mounts, run_as); !s.ok()) return abandon(s, *created);

  MutexLock lock(mutex_);
  const Status started =
      kernel.warm_pool.empty() ? table_.Started(request.kernel_id) : table_.Warmed(request.kernel_id);
  if (!started.ok()) return started;
  return CreateOutcome{*table_.Find(request.kernel_id), true};
}

}  // namespace slotd
