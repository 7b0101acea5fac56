// The user a kernel's processes run as, decided the way the container
// runtime decides it (runc's user lookup), so that allow-root cannot be
// passed by writing root another way: "00", "+0" and "0000:0" are uid 0,
// and a name is whatever the image's own /etc/passwd makes it ("toor" with
// uid 0 is root).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/mutex.h"
#include "common/status.h"

namespace slotd {

// A user and group, by number.
struct RunAs {
  int64_t uid = 0;
  int64_t gid = 0;

  bool operator==(const RunAs&) const = default;
};

// `text` as a number the way the runtime reads one (an optional sign, then
// decimal digits, no more than an int64 holds); nullopt when it is not one.
std::optional<int64_t> NumericId(std::string_view text);

// The user `user` ("name", "uid", "name:group", "uid:gid"; "": the
// runtime's default, root) runs as, given the image's /etc/passwd and
// /etc/group texts (empty: the image has none). As the runtime does: the
// first passwd line whose name is the user part, or whose uid is its number,
// gives the uid and the default gid; a number that no line names is that
// uid; a group part is a gid or a name of /etc/group. kInvalidArgument
// naming `user` when a name is in neither file or a number is negative
// (the runtime would refuse to start it).
Result<RunAs> ResolveUser(const std::string& user, std::string_view passwd, std::string_view group);

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

// The uids (real, effective, saved, filesystem) on the "Uid:" line of a
// /proc/<pid>/status text; nullopt when there is none.
std::optional<std::array<int64_t, 4>> StatusUids(std::string_view status);

}  // namespace slotd
