#include "agent/resolved_users.h"

namespace slotd {

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
