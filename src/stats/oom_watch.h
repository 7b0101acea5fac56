// OomWatch: tells, as it happens, that a watched container's memory cgroup
// ran out of memory. It is the word an engine that sends none needs (Podman
// sets no OOMKilled and sends no oom event), and it has to come at once:
// Podman removes a container's cgroup before it reports the container's end,
// so when the process killed was the kernel's main one, a sweep of the
// cgroup after the kill finds nothing left to read.
//
// v1: an eventfd registered for the cgroup's memory.oom_control through its
// cgroup.event_control; the kernel signals it when the cgroup runs out of
// memory (just before the OOM killer picks a process) and once more when the
// cgroup is removed, which is told apart by the cgroup being gone: read
// through the memory.oom_control kept open since the watch began, so that a
// cgroup made again at the same path (a restarted container) is not taken
// for it.
// v2: inotify on the cgroup's memory.events, which the kernel marks modified
// when a counter of it changes; a higher oom_kill is the news.
// One thread waits on every watch (epoll) and calls `notify`.
//
// Thread-safety: Watch, and the destruction of what it returns, may be called
// from any thread. `notify` is called from the watch's own thread with no
// lock of the watch held.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"
#include "common/unique_fd.h"
#include "stats/cgroup.h"

namespace slotd {

class OomWatch {
 public:
  // A kernel's cgroup ran out of memory; `oom_kills` is its count of
  // processes killed for it, as read then, and at least 1 (on v1 the notice
  // comes just before the kill is counted). Told only when that count is
  // higher than the one last told for the watch: a cgroup kept at its limit
  // costs one call per kill, not one per notice.
  using Notify =
      std::function<void(const std::string& kernel_id, const std::string& container_id, uint64_t oom_kills)>;

  // Starts the watching thread. Where the epoll or inotify instance cannot be
  // made, every Watch fails saying why.
  explicit OomWatch(Notify notify);
  // Ends and joins the thread. Every Armed must be gone first.
  ~OomWatch();
  OomWatch(const OomWatch&) = delete;
  OomWatch& operator=(const OomWatch&) = delete;

  // One armed watch, disarmed when destroyed (or moved from and reset).
  class Armed {
   public:
    Armed() = default;
    Armed(Armed&& other) noexcept;
    Armed& operator=(Armed&& other) noexcept;
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;
    ~Armed();

   private:
    friend class OomWatch;
    Armed(OomWatch* watch, uint64_t id) : watch_(watch), id_(id) {}
    OomWatch* watch_ = nullptr;
    uint64_t id_ = 0;
  };

  // Watches `memory` (the memory controller's directory of the container's
  // cgroup, from CgroupReader::Locate) for kernel `kernel_id` in container
  // `container_id`, until the Armed returned is destroyed. Errors:
  // kInvalidArgument when `memory` names no directory; kNotFound when the
  // cgroup is gone; kUnavailable when the host does not let it be watched
  // (no cgroup.event_control, no permission, out of descriptors), naming the
  // file and the reason.
  Result<Armed> Watch(const std::string& kernel_id, const std::string& container_id, const CgroupDir& memory);

 private:
  struct Entry {
    std::string kernel_id;
    std::string container_id;
    CgroupDir memory;
    UniqueFd event;       // v1: the eventfd the kernel signals
    UniqueFd oom_control;  // v1: the cgroup's memory.oom_control, read for its count
    int inotify_wd = -1;  // v2: the inotify watch of memory.events
    uint64_t reported = 0;  // the count last passed to notify
  };
  // epoll's tags: the stop eventfd, the inotify instance, then one per entry.
  static constexpr uint64_t kStopTag = 0, kInotifyTag = 1, kFirstEntryTag = 2;

  void Disarm(uint64_t id) EXCLUDES(mutex_);
  void Loop();
  // A v1 entry's eventfd was signalled.
  void OnEventFd(uint64_t id) EXCLUDES(mutex_);
  // The inotify instance has events to read.
  void OnInotify() EXCLUDES(mutex_);
  // Reads entry `id`'s count and notifies when it ran out of memory:
  // `signalled` is the v1 eventfd's count (0 on v2).
  void Check(uint64_t id, uint64_t signalled) EXCLUDES(mutex_);

  const Notify notify_;
  UniqueFd epoll_;
  UniqueFd stop_;     // an eventfd written once by the destructor
  UniqueFd inotify_;  // v2 watches
  std::string unavailable_;  // why watching cannot work here; empty: it can
  Mutex mutex_;
  std::map<uint64_t, Entry> entries_ GUARDED_BY(mutex_);
  std::map<int, uint64_t> by_wd_ GUARDED_BY(mutex_);  // inotify watch -> entry
  uint64_t next_id_ GUARDED_BY(mutex_) = kFirstEntryTag;
  std::thread thread_;
};

}  // namespace slotd
