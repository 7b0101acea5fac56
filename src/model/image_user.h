// The user a kernel's processes run as, decided the way the container
// runtime decides it (runc's user lookup), so that allow-root cannot be
// passed by writing root another way: "00", "+0" and "0000:0" are uid 0,
// and a name is whatever the image's own /etc/passwd makes it ("toor" with
// uid 0 is root).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace slotd {

// A user and group, by number.
struct RunAs {
  int64_t uid = 0;
  int64_t gid = 0;

  bool operator==(const RunAs&) const = default;
  // "uid:gid": how the engine is given it (a container's User, never a
  // name, which the runtime would look up again in the kernel's own files at
  // every start and exec) and how label kRunAs records it.
  std::string Text() const { return std::to_string(uid) + ":" + std::to_string(gid); }
};

// A RunAs::Text() read back: two decimal numbers from 0 to 2^31-1 joined by
// ':', nothing else; nullopt otherwise.
std::optional<RunAs> ParseRunAs(std::string_view text);

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

// Who a process runs as, as /proc/<pid>/status says.
struct ProcessIds {
  std::array<int64_t, 4> uids{};  // real, effective, saved, filesystem ("Uid:")
  std::array<int64_t, 4> gids{};  // the same for groups ("Gid:")
  std::vector<int64_t> groups;    // its supplementary groups ("Groups:")
};

// The ids of a /proc/<pid>/status text; nullopt when its Uid: or Gid: line
// is missing or malformed (a Groups: line that is missing is no groups).
std::optional<ProcessIds> StatusIds(std::string_view status);

// What is wrong with a kernel's process running as `ids`, when the agent
// decided at create that the kernel runs as `decided` (unset: a kernel made
// before the decision was recorded) and root is allowed or not; empty when
// nothing is. Without allow-root, uid 0 and group 0 (as its group or one of
// its groups) are wrong; with a decision, any uid or gid other than it is.
std::string IdsProblem(const ProcessIds& ids, const std::optional<RunAs>& decided, bool allow_root);

}  // namespace slotd
