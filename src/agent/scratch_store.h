// Scratch: each kernel's own writable directory, <root>/<kernel-id>, which
// the agent mounts at /home/work. It outlives kernel and agent restarts and
// goes when its kernel does. The root is this agent's alone (the node claims
// refuse an agent whose scratch root meets another agent's paths, and
// LocalProblems one that holds the agent's own files), yet the store removes
// only what it made: each directory it makes has a marker,
// <root>/.slotd-made/<kernel-id>, made before the directory. A directory
// without one (made by hand, or by slotd 0.2.0, which made no markers) is
// never removed by Collect: it gets its marker when it is the directory of a
// kernel the agent has, and is otherwise kept and reported once.
// A scratch of a fixed size is either that directory limited by a project
// quota (hostdir) or an ext4 image, <root>/.slotd-images/<kernel-id>.ext4,
// loop-mounted on it (hostfile); node/scratch_limits.h does both.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "common/mutex.h"
#include "common/status.h"

namespace slotd {

// Where a kernel's scratch is mounted (Backend.AI's home of a kernel).
inline constexpr char kScratchTarget[] = "/home/work";

// How a kernel's scratch is kept on the host ([container] scratch-type).
enum class ScratchKind {
  kHostDir,   // a directory, limited by a project quota when it has a size
  kHostFile,  // an ext4 image of its size, loop-mounted on the directory
};

class ScratchStore {
 public:
  // The directory kernels' scratch directories go in; made when first needed.
  ScratchStore(std::string root, ScratchKind kind);

  // The user a scratch directory belongs to: the user its kernel runs as.
  struct Owner {
    int64_t uid = 0;
    int64_t gid = 0;
  };
  // Makes `kernel_id`'s directory, or keeps the one there, and returns its
  // path; mode 0700, never writable by other users, and belonging to
  // `owner`. `limit_bytes` is its
  // size: a hostdir scratch gets that project quota (none when 0); a
  // hostfile scratch gets an image of that size (which must not be 0), or
  // its image mounted again when it is there but not mounted (after a
  // reboot). kUnavailable naming the path and the error when it cannot (an
  // agent that is not root cannot give it away), kFailedPrecondition when
  // the filesystem cannot limit it.
  Result<std::string> Prepare(const std::string& kernel_id, Owner owner, uint64_t limit_bytes) EXCLUDES(mutex_);

  // Unmounts `kernel_id`'s image, if any, and removes its directory with
  // everything in it, the image and the marker; absent is fine.
  Status Remove(const std::string& kernel_id) EXCLUDES(mutex_);

  // Removes every directory under the root that this store made (it has a
  // marker) and that belongs to none of the kernels `known_ids` returns,
  // with its image; mounts again the image of a known kernel that is not
  // mounted (after a reboot);
  // marks the unmarked directories of known kernels; reports, once each, the
  // unmarked entries of no kernel, and keeps them. `known_ids` is called with
  // this store's lock held, so a Prepare cannot slip between what it returns
  // and the removal.
  void Collect(const std::function<std::set<std::string>()>& known_ids) EXCLUDES(mutex_);

 private:
  // The marker of `kernel_id`'s directory.
  std::string MarkerOf(const std::string& kernel_id) const;
  // Makes that marker (and the markers' directory); kUnavailable naming it.
  Status Mark(const std::string& kernel_id) const;
  // The image of `kernel_id`'s hostfile scratch.
  std::string ImageOf(const std::string& kernel_id) const;
  // Gives `path`, the new directory of `kernel_id`, its size (Prepare's `limit_bytes`).
  Status Limit(const std::string& kernel_id, const std::string& path, uint64_t limit_bytes) const REQUIRES(mutex_);
  // Remove's work, also Collect's.
  Status RemoveLocked(const std::string& kernel_id) REQUIRES(mutex_);

  const std::string root_;
  const ScratchKind kind_;
  Mutex mutex_;  // orders Prepare against Collect
  std::set<std::string> reported_ GUARDED_BY(mutex_);  // unmarked entries already reported as kept
};

}  // namespace slotd
