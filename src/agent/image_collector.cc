#include "agent/image_collector.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>

#include <spdlog/spdlog.h>

#include "common/lock_file.h"
#include "model/image_ref.h"

namespace slotd {

Result<double> FilesystemUsedPercent(const std::string& path) {
  struct statvfs fs {};
  if (::statvfs(path.c_str(), &fs) != 0)
    return Status::Unavailable("cannot read the filesystem of " + path + ": " + std::strerror(errno));
  if (fs.f_blocks == 0) return 0.0;
  const double total = static_cast<double>(fs.f_blocks);
  return 100.0 * (total - static_cast<double>(fs.f_bavail)) / total;
}

ImageCollector::ImageCollector(ContainerEngine& engine, EventHub& hub, const Clock& clock, std::string agent_id,
                               Marks marks, std::string lock_path, DiskUsage usage)
    : engine_(engine), hub_(hub), clock_(clock), agent_id_(std::move(agent_id)), marks_(marks), lock_path_(std::move(lock_path)),
      usage_(std::move(usage)) {}

void ImageCollector::RecordUse(const ImageRef& image, int64_t now) {
  MutexLock lock(mutex_);
  int64_t& last = last_use_[image.Canonical()];
  last = std::max(last, now);
}

int64_t ImageCollector::LastUse(const ImageInfo& image) const {
  int64_t last = image.created_unix;
  for (const std::string& tag : image.tags)
    if (auto it = last_use_.find(ParseImageRef(tag).Canonical()); it != last_use_.end()) last = std::max(last, it->second);
  return last;
}

Result<std::vector<std::string>> ImageCollector::CollectOnce() {
  std::vector<std::string> removed;
  if (marks_.high <= 0) return removed;
  Result<EngineInfo> info = engine_.Info();
  if (!info.ok()) return info.status();
  const std::string& root = info->data_root;
  Result<double> used = usage_(root);
  if (!used.ok()) return used.status();
  if (*used < marks_.high) return removed;

  Result<std::unique_ptr<LockFile>> lock = LockFile::Acquire(lock_path_);
  if (!lock.ok()) {
    if (lock.status().code() == Status::Code::kFailedPrecondition) {
      spdlog::debug("image gc: another agent of the node collects now ({})", lock.status().message());
      return removed;
    }
    return lock.status();
  }
  Result<std::vector<ImageInfo>> images = engine_.ListImages();
  if (!images.ok()) return images.status();
  Result<std::vector<ContainerInfo>> containers = engine_.List({});  // every owner's, every state
  if (!containers.ok()) return containers.status();
  std::set<std::string> in_use;
  for (const ContainerInfo& c : *containers) in_use.insert(c.image_id);
  std::vector<std::pair<int64_t, ImageInfo>> candidates;
  {
    MutexLock guard(mutex_);
    for (ImageInfo& image : *images)
      if (!in_use.count(image.id)) candidates.emplace_back(LastUse(image), std::move(image));
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  spdlog::info("image gc: the engine's data root {} is {:.1f}% full (image-gc-high {}%); removing unused images "
               "until below {}%", root, *used, marks_.high, marks_.low);
  for (const auto& [last_use, image] : candidates) {
    Status gone = engine_.RemoveImage(image.id);
    if (!gone.ok()) {
      // A container made from it since the list, or a child image: it stays.
      spdlog::info("image gc: keeping {}: {}", image.id, gone.message());
      continue;
    }
    removed.push_back(image.id);
    spdlog::info("image gc: removed {} ({}, {} bytes, last used {})", image.id,
                 image.tags.empty() ? std::string("untagged") : image.tags.front(), image.size_bytes, last_use);
    hub_.Publish(EventType::kImageRemoved,
                 {{"agent_id", agent_id_},
                  {"image_id", image.id},
                  {"tags", image.tags},
                  {"size", image.size_bytes},
                  {"reason", "image gc"},
                  {"time", clock_.UnixSeconds()}});
    used = usage_(root);
    if (!used.ok()) return used.status();
    if (*used < marks_.low) break;
  }
  return removed;
}

}  // namespace slotd
