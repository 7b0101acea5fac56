#include "agent/image_user.h"

#include <charconv>
#include <vector>

namespace slotd {
namespace {

// The largest id the runtime accepts.
constexpr int64_t kMaxId = 2147483647;

// The ':'-separated fields of `line`.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t begin = 0;
  while (true) {
    const size_t end = line.find(':', begin);
    fields.push_back(line.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) return fields;
    begin = end + 1;
  }
}

// Calls `each` with the fields of every non-empty line of `text` that has at
// least `min_fields`, until it returns true; whether one did.
template <typename Each>
bool AnyLine(std::string_view text, size_t min_fields, Each each) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.empty()) continue;
    const std::vector<std::string_view> fields = Fields(line);
    if (fields.size() >= min_fields && each(fields)) return true;
  }
  return false;
}

Status Unknown(const std::string& user, const std::string& what, std::string_view name, const char* file) {
  return Status::InvalidArgument("the image's user \"" + user + "\" names the " + what + " \"" + std::string(name) +
                                 "\", which the image's " + file +
                                 " does not have, so the container could not start; give the image a user it "
                                 "has, or set [container] kernel-uid");
}

}  // namespace

std::optional<int64_t> NumericId(std::string_view text) {
  if (!text.empty() && text.front() == '+') {
    text.remove_prefix(1);
    if (!text.empty() && text.front() == '-') return std::nullopt;
  }
  if (text.empty()) return std::nullopt;
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Result<RunAs> ResolveUser(const std::string& user, std::string_view passwd, std::string_view group) {
  const size_t colon = user.find(':');
  const std::string_view user_part = std::string_view(user).substr(0, colon);
  const std::optional<std::string_view> group_part =
      colon == std::string::npos ? std::nullopt : std::optional(std::string_view(user).substr(colon + 1));
  RunAs run_as;
  if (!user_part.empty()) {
    const std::optional<int64_t> number = NumericId(user_part);
    const bool found = AnyLine(passwd, 4, [&](const std::vector<std::string_view>& f) {
      const std::optional<int64_t> uid = NumericId(f[2]);
      const std::optional<int64_t> gid = NumericId(f[3]);
      if (!uid || !gid) return false;
      if (f[0] != user_part && !(number && *uid == *number)) return false;
      run_as = {*uid, *gid};
      return true;
    });
    if (!found) {
      if (!number) return Unknown(user, "user", user_part, "/etc/passwd");
      run_as.uid = *number;
    }
  }
  if (group_part && !group_part->empty()) {
    const std::optional<int64_t> number = NumericId(*group_part);
    const bool found = AnyLine(group, 3, [&](const std::vector<std::string_view>& f) {
      const std::optional<int64_t> gid = NumericId(f[2]);
      if (!gid || (f[0] != *group_part && !(number && *gid == *number))) return false;
      run_as.gid = *gid;
      return true;
    });
    if (!found) {
      if (!number) return Unknown(user, "group", *group_part, "/etc/group");
      run_as.gid = *number;
    }
  }
  if (run_as.uid < 0 || run_as.uid > kMaxId || run_as.gid < 0 || run_as.gid > kMaxId)
    return Status::InvalidArgument("the image's user \"" + user + "\" is uid " + std::to_string(run_as.uid) + ", gid " +
                                   std::to_string(run_as.gid) + ": out of the range 0 to " + std::to_string(kMaxId) +
                                   ", so the container could not start; give the image another user");
  return run_as;
}

std::optional<std::array<int64_t, 4>> StatusUids(std::string_view status) {
  size_t at = 0;
  if (status.rfind("Uid:", 0) != 0) {
    at = status.find("\nUid:");
    if (at == std::string_view::npos) return std::nullopt;
    at += 1;
  }
  const size_t end = status.find('\n', at);
  std::string_view line = status.substr(at + 4, end == std::string_view::npos ? std::string_view::npos : end - at - 4);
  std::array<int64_t, 4> values{};
  for (int64_t& value : values) {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), value);
    if (error != std::errc()) return std::nullopt;
    line.remove_prefix(end - line.data());
  }
  return values;
}

std::optional<RunAs> ResolvedUsers::Find(const std::string& image_id, const std::string& user) const {
  MutexLock lock(mutex_);
  const auto found = entries_.find({image_id, user});
  if (found == entries_.end()) return std::nullopt;
  return found->second;
}

void ResolvedUsers::Remember(const std::string& image_id, const std::string& user, RunAs run_as) {
  MutexLock lock(mutex_);
  if (entries_.size() >= kMaxEntries) entries_.clear();
  entries_[{image_id, user}] = run_as;
}

}  // namespace slotd
