// ImageCollector: [container] image-gc-high / image-gc-low. When the
// filesystem of the engine's data root is fuller than the high mark, it
// removes the least recently used images that no container of any owner
// uses (stopped ones included), until it is below the low mark. The agents
// of a node share one engine, so at most one collects at a time: a round
// runs only while it holds the lock file image-gc.lock in the node's claims
// directory, and is skipped while another agent holds it.
//
// Thread-safety: every public method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/event_hub.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "engine/container_engine.h"
#include "model/image_ref.h"

namespace slotd {

// The percent of the filesystem holding `path` that is used (statvfs: the
// blocks not free to unprivileged users count as used).
Result<double> FilesystemUsedPercent(const std::string& path);

class ImageCollector {
 public:
  struct Marks {
    int high = 0;  // percent; 0: never collect
    int low = 80;  // percent, below high
  };
  // How full the filesystem at a path is, in percent.
  using DiskUsage = std::function<Result<double>(const std::string& path)>;

  // `engine`, `hub` and `clock` (the time of its events) must outlive the
  // collector; `lock_path` is the node's GC lock file.
  ImageCollector(ContainerEngine& engine, EventHub& hub, const Clock& clock, std::string agent_id, Marks marks,
                 std::string lock_path, DiskUsage usage = FilesystemUsedPercent);

  // Records that a kernel was made from `image` (as its request gave it) at
  // `now` (unix seconds): its last use, which outranks the image's creation
  // time in the least-recently-used order.
  void RecordUse(const ImageRef& image, int64_t now) EXCLUDES(mutex_);

  // One round (see the file comment). Returns the ids of the images it
  // removed, in order; none when the disk is below the high mark, when
  // collection is off, or when another agent holds the lock. Errors of the
  // engine or of the disk reading end the round.
  Result<std::vector<std::string>> CollectOnce() EXCLUDES(mutex_);

 private:
  // The last use of `image`: the newest of its creation and RecordUse of any of its tags.
  int64_t LastUse(const ImageInfo& image) const REQUIRES(mutex_);

  ContainerEngine& engine_;
  EventHub& hub_;
  const Clock& clock_;
  const std::string agent_id_;
  const Marks marks_;
  const std::string lock_path_;
  const DiskUsage usage_;

  mutable Mutex mutex_;
  std::map<std::string, int64_t> last_use_ GUARDED_BY(mutex_);  // by ImageRef::Canonical()
};

}  // namespace slotd
