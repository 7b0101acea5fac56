#include "agent/mounts.h"

#include <filesystem>
#include <string>
#include <system_error>

#include "agent/scratch.h"
#include "common/paths.h"

namespace slotd {
namespace {

namespace fs = std::filesystem;

// The directories of the container no mount may cover or enter.
constexpr const char* kProtectedTargets[] = {"/proc", "/sys", "/dev", kScratchTarget};

// "/srv/datasets (ro), /srv/shared (rw)", or "none" when nothing is allowed.
std::string Allowed(const std::vector<MountAllow>& allowed) {
  std::string text;
  for (const MountAllow& entry : allowed) text += (text.empty() ? "" : ", ") + entry.path + " (" + entry.mode + ")";
  return text.empty() ? "none ([container] mount-allow is not set)" : text;
}

}  // namespace

Result<std::vector<Mount>> ResolveMounts(const std::vector<RequestedMount>& requested,
                                         const std::vector<MountAllow>& allowed) {
  std::vector<Mount> mounts;
  for (size_t i = 0; i < requested.size(); ++i) {
    const RequestedMount& asked = requested[i];
    const std::string field = "mounts[" + std::to_string(i) + "]";
    if (asked.target == "/")
      return Status::PermissionDenied(field + ".target: a mount may not cover the container's whole filesystem");
    for (const char* protected_dir : kProtectedTargets) {
      if (IsWithin(asked.target, protected_dir))
        return Status::PermissionDenied(field + ".target: " + asked.target + " is over " + protected_dir +
                                        ", which the agent provides; mount somewhere else, e.g. /data");
    }
    std::error_code ec;
    const fs::path resolved = fs::canonical(asked.source, ec);
    if (ec)
      return Status::InvalidArgument(field + ".source: " + asked.source + " cannot be resolved on this node (" +
                                     ec.message() + "); mount a directory that exists");
    const std::string source = resolved.string();
    bool inside = false;
    bool writable = false;
    for (const MountAllow& entry : allowed) {
      std::error_code entry_ec;
      const fs::path dir = fs::canonical(entry.path, entry_ec);
      if (entry_ec || !IsWithin(source, dir.string())) continue;
      inside = true;
      writable = writable || entry.mode == "rw";
    }
    const std::string shown = source == asked.source ? source : asked.source + " (that is, " + source + ")";
    if (!inside)
      return Status::PermissionDenied(field + ".source: " + shown +
                                      " is not in a directory this agent lets kernels mount; allowed: " +
                                      Allowed(allowed));
    if (!asked.read_only && !writable)
      return Status::PermissionDenied(field + ": " + shown + " may be mounted read-only only; set \"readonly\": true "
                                      "(allowed: " + Allowed(allowed) + ")");
    mounts.push_back({Mount::Type::kBind, source, asked.target, asked.read_only, 0});
  }
  return mounts;
}

}  // namespace slotd
