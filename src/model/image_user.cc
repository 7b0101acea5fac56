#include "model/image_user.h"

#include <algorithm>
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

std::optional<RunAs> ParseRunAs(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  RunAs run_as;
  int64_t* const ids[2] = {&run_as.uid, &run_as.gid};
  const std::string_view parts[2] = {text.substr(0, colon), text.substr(colon + 1)};
  for (int i = 0; i < 2; ++i) {
    const std::string_view part = parts[i];
    if (part.empty() || part.size() > 10 || part.find_first_not_of("0123456789") != std::string_view::npos)
      return std::nullopt;
    std::from_chars(part.data(), part.data() + part.size(), *ids[i]);
    if (*ids[i] > kMaxId) return std::nullopt;
  }
  return run_as;
}

namespace {

// The text after "`key`:" on the line of `status` that starts with it;
// nullopt when no line does.
std::optional<std::string_view> StatusLine(std::string_view status, std::string_view key) {
  size_t at = 0;
  while (at < status.size()) {
    size_t end = status.find('\n', at);
    if (end == std::string_view::npos) end = status.size();
    const std::string_view line = status.substr(at, end - at);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':')
      return line.substr(key.size() + 1);
    at = end + 1;
  }
  return std::nullopt;
}

// The whitespace-separated numbers of `text`; nullopt when a word is not one.
std::optional<std::vector<int64_t>> Numbers(std::string_view text) {
  std::vector<int64_t> values;
  while (true) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    if (text.empty()) return values;
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc()) return std::nullopt;
    text.remove_prefix(end - text.data());
    if (!text.empty() && text.front() != ' ' && text.front() != '\t') return std::nullopt;
    values.push_back(value);
  }
}

}  // namespace

std::optional<ProcessIds> StatusIds(std::string_view status) {
  ProcessIds ids;
  const std::pair<const char*, std::array<int64_t, 4>*> fours[] = {{"Uid", &ids.uids}, {"Gid", &ids.gids}};
  for (const auto& [key, into] : fours) {
    const std::optional<std::string_view> line = StatusLine(status, key);
    if (!line) return std::nullopt;
    const std::optional<std::vector<int64_t>> values = Numbers(*line);
    if (!values || values->size() != 4) return std::nullopt;
    std::copy(values->begin(), values->end(), into->begin());
  }
  if (const std::optional<std::string_view> line = StatusLine(status, "Groups")) {
    std::optional<std::vector<int64_t>> groups = Numbers(*line);
    if (!groups) return std::nullopt;
    ids.groups = std::move(*groups);
  }
  return ids;
}

std::string IdsProblem(const ProcessIds& ids, const std::optional<RunAs>& decided, bool allow_root) {
  for (const int64_t uid : ids.uids) {
    if (uid == 0 && !allow_root) return "runs as root (uid 0)";
    if (decided && uid != decided->uid)
      return "runs as uid " + std::to_string(uid) + ", not as uid " + std::to_string(decided->uid) +
             " decided when it was created";
  }
  for (const int64_t gid : ids.gids) {
    if (gid == 0 && !allow_root) return "runs in root's group (gid 0)";
    if (decided && gid != decided->gid)
      return "runs as gid " + std::to_string(gid) + ", not as gid " + std::to_string(decided->gid) +
             " decided when it was created";
  }
  for (const int64_t group : ids.groups) {
    if (group == 0 && !allow_root) return "has root's group (gid 0) among its groups";
    if (decided && group != decided->gid)
      return "has group " + std::to_string(group) + " among its groups, which it was not given when it was created";
  }
  return "";
}

}  // namespace slotd
