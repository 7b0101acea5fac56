#include "stats/oom_watch.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/thread_name.h"

namespace slotd {
namespace {

// epoll_ctl ADD of `fd` for reading, tagged `tag`; 0 or errno.
int AddToEpoll(int epoll, int fd, uint64_t tag) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = tag;
  return epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event) == 0 ? 0 : errno;
}

// Writes all of `text` to the file at `path`; 0 or errno.
int WriteFile(const std::string& path, const std::string& text) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return errno;
  ssize_t n;
  do n = write(fd.get(), text.data(), text.size());
  while (n < 0 && errno == EINTR);
  if (n < 0) return errno;
  return static_cast<size_t>(n) == text.size() ? 0 : EIO;
}

}  // namespace

OomWatch::OomWatch(Notify notify) : notify_(std::move(notify)) {
  epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  stop_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  inotify_ = UniqueFd(inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (!epoll_.valid() || !stop_.valid() || !inotify_.valid()) {
    unavailable_ = "cannot make the epoll, eventfd or inotify instance the watch needs: " + ErrnoText(errno);
  } else if (int error = AddToEpoll(epoll_.get(), stop_.get(), kStopTag);
             error || (error = AddToEpoll(epoll_.get(), inotify_.get(), kInotifyTag))) {
    unavailable_ = "cannot wait on the watch's descriptors: " + ErrnoText(error);
  }
  if (!unavailable_.empty()) {
    spdlog::warn("out-of-memory watch: {}; a kernel whose main process is killed for lack of memory on an engine "
                 "that does not say so is seen as exited with code 137",
                 unavailable_);
    return;
  }
  thread_ = std::thread(&OomWatch::Loop, this);
}

OomWatch::~OomWatch() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    if (write(stop_.get(), &one, sizeof(one)) != sizeof(one)) spdlog::error("out-of-memory watch: cannot stop");
    thread_.join();
  }
}

OomWatch::Armed::Armed(Armed&& other) noexcept
    : watch_(std::exchange(other.watch_, nullptr)), id_(std::exchange(other.id_, 0)) {}

OomWatch::Armed& OomWatch::Armed::operator=(Armed&& other) noexcept {
  if (this != &other) {
    if (watch_) watch_->Disarm(id_);
    watch_ = std::exchange(other.watch_, nullptr);
    id_ = std::exchange(other.id_, 0);
  }
  return *this;
}

OomWatch::Armed::~Armed() {
  if (watch_) watch_->Disarm(id_);
}

Result<OomWatch::Armed> OomWatch::Watch(const std::string& kernel_id, const std::string& container_id,
                                        const CgroupDir& memory) {
  if (memory.path.empty()) return Status::InvalidArgument("no memory cgroup to watch for kernel " + kernel_id);
  if (!unavailable_.empty()) return Status::Unavailable(unavailable_);
  Entry entry{kernel_id, container_id, memory, UniqueFd(), UniqueFd(), -1, 0};
  MutexLock lock(mutex_);
  const uint64_t id = next_id_++;
  if (memory.unified) {
    const std::string events = memory.path + "/memory.events";
    const int wd = inotify_add_watch(inotify_.get(), events.c_str(), IN_MODIFY);
    if (wd < 0) {
      const int error = errno;
      if (error == ENOENT) return Status::NotFound(events + " is gone: the container's cgroup was removed");
      return Status::Unavailable("cannot watch " + events + ": " + ErrnoText(error));
    }
    if (by_wd_.contains(wd)) return Status::FailedPrecondition(events + " is watched already");
    entry.inotify_wd = wd;
    by_wd_[wd] = id;
  } else {
    const std::string control = memory.path + "/memory.oom_control";
    UniqueFd oom_control(open(control.c_str(), O_RDONLY | O_CLOEXEC));
    if (!oom_control.valid()) {
      const int error = errno;
      if (error == ENOENT) return Status::NotFound(control + " is gone: the container's cgroup was removed");
      return Status::Unavailable("cannot open " + control + ": " + ErrnoText(error));
    }
    entry.event = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!entry.event.valid()) return Status::Unavailable("cannot make an eventfd: " + ErrnoText(errno));
    const std::string registration = std::to_string(entry.event.get()) + " " + std::to_string(oom_control.get());
    if (int error = WriteFile(memory.path + "/cgroup.event_control", registration))
      return Status::Unavailable("cannot register for out-of-memory notices in " + memory.path +
                                 "/cgroup.event_control: " + ErrnoText(error));
    if (int error = AddToEpoll(epoll_.get(), entry.event.get(), id))
      return Status::Unavailable("cannot wait on an eventfd: " + ErrnoText(error));
    entry.oom_control = std::move(oom_control);
  }
  entries_.emplace(id, std::move(entry));
  return Armed(this, id);
}

void OomWatch::Disarm(uint64_t id) {
  MutexLock lock(mutex_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  Entry& entry = it->second;
  if (entry.inotify_wd >= 0) {
    inotify_rm_watch(inotify_.get(), entry.inotify_wd);  // fails harmlessly when the file is gone
    by_wd_.erase(entry.inotify_wd);
  }
  // Closing the eventfd ends the kernel's registration (v1).
  if (entry.event.valid()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, entry.event.get(), nullptr);
  entries_.erase(it);
}

void OomWatch::Loop() {
  NameThisThread("oom-watch");
  epoll_event events[32];
  for (;;) {
    const int n = epoll_wait(epoll_.get(), events, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      spdlog::error("out-of-memory watch: epoll_wait: {}; the watch ends", ErrnoText(errno));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kStopTag) return;
      if (tag == kInotifyTag)
        OnInotify();
      else
        OnEventFd(tag);
    }
  }
}

void OomWatch::OnEventFd(uint64_t id) {
  uint64_t signalled = 0;
  {
    MutexLock lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;  // disarmed meanwhile
    if (read(it->second.event.get(), &signalled, sizeof(signalled)) != sizeof(signalled)) return;
  }
  Check(id, signalled);
}

void OomWatch::OnInotify() {
  alignas(inotify_event) char buffer[4096];
  std::vector<uint64_t> modified;
  for (;;) {
    const ssize_t n = read(inotify_.get(), buffer, sizeof(buffer));
    if (n <= 0) break;
    MutexLock lock(mutex_);
    for (ssize_t at = 0; at < n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (!(event->mask & IN_MODIFY)) continue;  // IN_IGNORED: the cgroup went
      if (auto it = by_wd_.find(event->wd); it != by_wd_.end()) modified.push_back(it->second);
    }
  }
  std::sort(modified.begin(), modified.end());
  modified.erase(std::unique(modified.begin(), modified.end()), modified.end());
  for (uint64_t id : modified) Check(id, 0);
}

void OomWatch::Check(uint64_t id, uint64_t signalled) {
  CgroupDir memory;
  Result<uint64_t> kills = Status::NotFound("");
  {
    MutexLock lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    memory = it->second.memory;
    // v1: the file of the cgroup watched, never one made since at its path.
    kills = memory.unified ? ReadOomKills(memory) : ReadOomKillsAt(it->second.oom_control.get());
  }
  if (!memory.unified) {
    // One signal is the cgroup's removal when it is gone; any other is an
    // out-of-memory notice, which comes before the kill is counted.
    const uint64_t notices = kills.ok() ? signalled : signalled - std::min<uint64_t>(signalled, 1);
    if (notices == 0) return;
  } else if (!kills.ok() || *kills == 0) {
    return;  // v2: the cgroup went, or another counter of memory.events moved
  }
  std::string kernel_id, container_id;
  uint64_t count = 0;
  {
    MutexLock lock(mutex_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    Entry& entry = it->second;
    // Only a higher count is news: a cgroup at its limit may be noticed
    // again and again while its victim dies, and a kernel can keep it there.
    count = std::max<uint64_t>(kills.ok() ? *kills : 0, 1);
    if (count <= entry.reported) return;
    entry.reported = count;
    kernel_id = entry.kernel_id;
    container_id = entry.container_id;
  }
  spdlog::info("kernel {}: its memory cgroup ran out of memory ({} process(es) killed so far)", kernel_id, count);
  notify_(kernel_id, container_id, count);
}

}  // namespace slotd
