#include "agent/stop_queue.h"

#include <algorithm>

#include "common/thread_name.h"

namespace slotd {

StopQueue::StopQueue(int max_workers) : max_workers_(std::max(1, max_workers)) {}

StopQueue::~StopQueue() {
  std::vector<std::thread> workers;
  std::deque<std::function<void()>> dropped;  // destroyed unlocked: a stop may hold what takes another lock
  {
    MutexLock lock(mutex_);
    ending_ = true;
    dropped.swap(queue_);
    workers.swap(workers_);
  }
  work_cv_.notify_all();
  for (std::thread& worker : workers) worker.join();
}

void StopQueue::Push(std::function<void()> stop) {
  MutexLock lock(mutex_);
  if (ending_) return;
  queue_.push_back(std::move(stop));
  if (idle_workers_ == 0 && static_cast<int>(workers_.size()) < max_workers_) {
    workers_.emplace_back([this] {
      NameThisThread("kernel-stop");
      Work();
    });
  }
  work_cv_.notify_one();
}

void StopQueue::WaitIdle() {
  MutexLock lock(mutex_);
  mutex_.Wait(idle_cv_, [&]() REQUIRES(mutex_) { return queue_.empty() && running_ == 0; });
}

void StopQueue::Work() {
  MutexLock lock(mutex_);
  while (true) {
    ++idle_workers_;
    mutex_.Wait(work_cv_, [&]() REQUIRES(mutex_) { return ending_ || !queue_.empty(); });
    --idle_workers_;
    if (ending_) return;
    std::function<void()> stop = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.Unlock();
    stop();
    lock.Lock();
    --running_;
    if (queue_.empty() && running_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace slotd
