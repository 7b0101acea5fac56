#include "agent/kernel_files.h"

#include <spdlog/spdlog.h>

#include "common/units.h"
#include "config/local_checks.h"
#include "node/scratch_limits.h"

namespace slotd {

KernelFiles::KernelFiles(const Config& config)
    : config_(config),
      scratch_(ScratchRoot(config),
               config.container.scratch_type == ScratchType::kHostFile ? ScratchKind::kHostFile : ScratchKind::kHostDir),
      scratch_quota_(config.container.scratch_type == ScratchType::kHostDir ? ProjectQuotaEnforced(ScratchRoot(config))
                                                                           : Status::Ok()),
      mount_stage_(config.agent.ipc_base_path + "/mounts"),
      claims_(config.agent.var_base_path.empty() ? "" : config.agent.var_base_path + "/warm-claims") {}

void KernelFiles::Remove(const std::string& kernel_id) {
  if (Status removed = scratch_.Remove(kernel_id); !removed.ok())
    spdlog::error("kernel {}: {}", kernel_id, removed.message());
  if (Status removed = mount_stage_.Remove(kernel_id); !removed.ok())
    spdlog::error("kernel {}: {}", kernel_id, removed.message());
  claims_.Remove(kernel_id);
}

void KernelFiles::Collect(const std::function<std::set<std::string>()>& keep) {
  scratch_.Collect(keep);
  mount_stage_.Collect(keep);
}

Status KernelFiles::CheckScratchRoom() const {
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

}  // namespace slotd
