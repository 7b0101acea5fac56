// A request's mounts, checked against the operator's [container]
// mount-allow before anything is allocated. A source is resolved on the
// host first (symbolic links, "..") and must then lie in an allowed
// directory, itself resolved; what the container gets is the resolved path.
#pragma once

#include <vector>

#include "agent/kernel.h"
#include "common/status.h"
#include "config/config.h"
#include "engine/container_engine.h"

namespace slotd {

// The bind mounts for `requested`, in order. Refusals name the mount
// ("mounts[1].source: ...") and say what is allowed:
//  - kPermissionDenied (403): a source outside every `allowed` directory, a
//    read-write mount of a directory allowed read-only, a target over /proc,
//    /sys, /dev, / or the kernel's scratch (/home/work);
//  - kInvalidArgument (400): a source that does not exist on the node.
Result<std::vector<Mount>> ResolveMounts(const std::vector<RequestedMount>& requested,
                                         const std::vector<MountAllow>& allowed);

}  // namespace slotd
