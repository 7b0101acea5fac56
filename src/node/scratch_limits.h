// Per-kernel scratch limits on this node, and what the node can do of them:
// a project quota on the scratch root's filesystem limits a `hostdir`
// scratch; a loop-mounted ext4 image is a `hostfile` scratch of a fixed
// size; a `tmpfs` scratch has its size as a mount option (nothing here).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "config/config.h"

namespace slotd {

// Ok when the filesystem of `dir` (or of its nearest existing parent)
// enforces project quotas; otherwise kFailedPrecondition saying why (the
// kernel has no quota support, the filesystem keeps no project quotas, or
// keeps them without enforcing), for `slotd check` and for errors.
Status ProjectQuotaEnforced(const std::string& dir);

// Limits the directory `dir` (opened as `dir_fd`) and everything made in it
// from now on to `bytes`: the directory's project id becomes its inode
// number (unique on its filesystem while it exists, so agents sharing the
// filesystem need no coordination), inherited by what is made in it, and
// that project gets `bytes` as its hard block limit. kFailedPrecondition
// naming `dir` when the filesystem cannot.
Status LimitByProjectQuota(int dir_fd, const std::string& dir, uint64_t bytes);

// Ok when this node can make and loop-mount ext4 images: /dev/loop-control,
// mkfs.ext4 in PATH, and an agent allowed to mount (CAP_SYS_ADMIN);
// otherwise kFailedPrecondition saying which is missing.
Status LoopImagesPossible();

// Makes `image`, which must not exist, a sparse file of `bytes` (mode 0600)
// holding an empty ext4 filesystem. kUnavailable naming `image` and the
// cause (mkfs.ext4's last lines) when it cannot; the file is then removed.
Status MakeScratchImage(const std::string& image, uint64_t bytes);

// Mounts the ext4 `image` at `dir` (nosuid, nodev) through a free loop
// device that goes when it is unmounted, and removes its lost+found.
// kUnavailable naming both when it cannot.
Status MountScratchImage(const std::string& image, const std::string& dir);

// True when `dir` is a mount point (its device differs from its parent's).
bool IsMountPoint(const std::string& dir);

// The bytes free for unprivileged use on the filesystem of `dir` (or of
// its nearest existing parent);
// kUnavailable naming `dir` when it cannot be read.
Result<uint64_t> FreeBytes(const std::string& dir);

// What stops an agent of `config` from keeping its kernels' scratch as
// configured on this node, one line each naming the key and what to do: a
// hostfile scratch without scratch-size, or where loop images are not
// possible; a hostdir scratch with a scratch-size on a scratch root that
// enforces no project quotas. The agent checks it at start and `slotd
// check` reports it. Empty when there is none.
std::vector<std::string> ScratchProblems(const Config& config);

// Which per-kernel scratch limits this node can do for `config`'s scratch
// root, one line for `slotd check`: project quota (hostdir), loop-mounted
// images (hostfile), tmpfs, each with why not where it cannot. `slotd
// check` prints it for each config whose kernels' scratch has a size.
std::string ScratchAbilities(const Config& config);

}  // namespace slotd
