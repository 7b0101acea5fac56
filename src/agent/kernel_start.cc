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

Status Agent::VerifyStarted(const std::string& kernel_id, const std::string& container_id,
                            const std::vector<ResolvedMount>& mounts, const std::optional<RunAs>& run_as) {
  if (mounts.empty() && config_.container.allow_root) return Status::Ok();  // nothing to check
  Result<ContainerInfo> info = engine_.Inspect(container_id);
  if (!info.ok()) return info.status().WithPrefix("checking the started container");
  if (Status s = VerifyMounted(info->pid, mounts); !s.ok()) return s;
  if (config_.container.allow_root) return Status::Ok();
  return users_.VerifyIds(kernel_id, info->pid, run_as);
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
  MutexLock lock(store_.mutex);
  if (Status s = store_.table.Abandon(kernel_id); !s.ok()) return s;
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
    MutexLock lock(store_.mutex);
    if (Status s = store_.table.Forget(request.kernel_id, "could not start: " + why.message()); !s.ok()) return s;
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
