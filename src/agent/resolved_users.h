// ResolvedUsers: the image users the agent already read from images' own
// files, so that each image id's files are copied out of the engine once.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "common/mutex.h"
#include "model/image_user.h"

namespace slotd {

// The users already resolved through an image's files, by image id
// ("sha256:...") and user: the files of one image id never change, so each
// pair needs the engine's copy of them once. Thread-safe; holds at most
// kMaxEntries pairs and forgets them all when a new one would pass that.
class ResolvedUsers {
 public:
  static constexpr size_t kMaxEntries = 1024;

  // What `user` of image `image_id` was resolved to, if it was.
  std::optional<RunAs> Find(const std::string& image_id, const std::string& user) const;
  // Keeps `run_as` as what `user` of image `image_id` resolves to.
  void Remember(const std::string& image_id, const std::string& user, RunAs run_as);

 private:
  mutable Mutex mutex_;
  std::map<std::pair<std::string, std::string>, RunAs> entries_ GUARDED_BY(mutex_);
};

}  // namespace slotd
