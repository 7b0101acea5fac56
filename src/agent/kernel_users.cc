#include "agent/kernel_users.h"

#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "model/kernel.h"
#include "model/label_codec.h"

namespace slotd {

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

KernelUsers::KernelUsers(std::string agent_id, const ContainerConfig& config, ContainerEngine& engine)
    : agent_id_(std::move(agent_id)), config_(config), engine_(engine) {}

Result<RunAs> KernelUsers::Decide(const CreateRequest& request, const ImageInfo& image) {
  const ContainerConfig& c = config_;
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

Result<RunAs> KernelUsers::ReadImageUser(const std::string& kernel_id, const std::string& image, const ImageInfo& info,
                                   const std::string& user) {
  // No user is the runtime's default, root, whatever the files say. (A
  // number is not enough: a passwd line may be named by it.)
  if (user.empty()) return ResolveUser(user, "", "");
  if (!info.id.empty())
    if (std::optional<RunAs> known = resolved_.Find(info.id, user)) return *known;
  // The image's own files, read from a container of it that is created for
  // this, never started, and removed (Restore removes one an agent stopped
  // before it could: label kUserProbe).
  ContainerSpec probe;
  probe.name = UserProbeName(agent_id_, kernel_id);
  probe.image = image;
  probe.command = {"/nonexistent"};
  // Never started, so its user is no one's; a number, because an engine
  // (Podman) resolves a name it is given before it reads a file.
  probe.user = "0:0";
  probe.network_mode = "none";
  probe.labels = {{label::kUserProbe, agent_id_}};
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
  if (run_as.ok() && !info.id.empty()) resolved_.Remember(info.id, user, *run_as);
  return run_as;
}

void KernelUsers::RemoveProbes() {
  Result<std::vector<ContainerInfo>> probes = engine_.List({std::string(label::kUserProbe) + "=" + agent_id_});
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

Status KernelUsers::VerifyIds(const std::string& kernel_id, int pid, const std::optional<RunAs>& run_as) const {
  if (pid <= 0) return Status::Ok();  // it ended meanwhile: nothing runs as anyone
  std::ifstream file("/proc/" + std::to_string(pid) + "/status");
  std::stringstream status;
  status << file.rdbuf();
  const std::optional<ProcessIds> ids = StatusIds(status.str());
  if (!ids) return Status::Ok();  // it ended meanwhile
  const std::string problem = IdsProblem(*ids, run_as, config_.allow_root);
  if (problem.empty()) return Status::Ok();
  return Status::PermissionDenied("kernel " + kernel_id + ": its first process (pid " + std::to_string(pid) + ") " +
                                  problem + (config_.allow_root ? "" : ", and [container] allow-root is false") +
                                  "; the kernel is not kept" + kRootAdvice);
}

Status KernelUsers::VerifyRestarted(const std::string& kernel_id, const std::string& container_id,
                              const std::optional<RunAs>& run_as) {
  if (config_.allow_root) return Status::Ok();  // as VerifyStarted
  Result<ContainerInfo> info = engine_.Inspect(container_id);
  Status verified = info.ok() ? VerifyIds(kernel_id, info->pid, run_as)
                              : info.status().WithPrefix("checking the user of its started container");
  if (verified.ok()) return verified;
  spdlog::error("{}", verified.message());
  if (Status killed = engine_.Kill(container_id); !killed.ok() && killed.code() != Status::Code::kNotFound)
    spdlog::error("kernel {}: could not kill its container {}: {}", kernel_id, container_id, killed.message());
  return verified;
}

}  // namespace slotd
