// StopQueue: the stops of kernels' containers that no caller waits for
// (lifetime, idle and drain ends, failed health checks, unhealthy devices,
// intruders), run on at most `max_workers` threads. A worker is started
// only when a stop is queued and none is free, so an agent that stops
// nothing holds no thread for it; one started stays for the next stops. A
// stop queued while every worker is busy waits in the queue; the caller
// that queues it never waits. (boost::asio::thread_pool starts all its
// threads at once, which an idle agent would carry for nothing.)
//
// Thread-safety: every method may be called from any thread, but never
// from a stop it runs.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace slotd {

class StopQueue {
 public:
  // `max_workers` (at least 1): how many stops run at once.
  explicit StopQueue(int max_workers);
  // Drops the stops still queued and waits for those under way (each is
  // bounded by its kernel's stop timeout).
  ~StopQueue();
  StopQueue(const StopQueue&) = delete;
  StopQueue& operator=(const StopQueue&) = delete;

  // Queues `stop` and returns at once.
  void Push(std::function<void()> stop) EXCLUDES(mutex_);
  // Returns once nothing is queued and no stop is under way.
  void WaitIdle() EXCLUDES(mutex_);

 private:
  void Work() EXCLUDES(mutex_);

  const int max_workers_;
  Mutex mutex_;
  std::condition_variable work_cv_;  // with mutex_: a stop queued, or the end
  std::condition_variable idle_cv_;  // with mutex_: the queue ran empty with no stop under way
  std::deque<std::function<void()>> queue_ GUARDED_BY(mutex_);
  int idle_workers_ GUARDED_BY(mutex_) = 0;
  int running_ GUARDED_BY(mutex_) = 0;  // stops under way
  bool ending_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_ GUARDED_BY(mutex_);
};

}  // namespace slotd
