// ElasticPool: threads made as work comes, up to a bound, and let go when
// idle. A task goes to a thread of the pool that waits for work, else to a
// new one while fewer than `max_threads` live; past that it is refused,
// never queued. A thread that finds no work for `idle_for` ends, so a pool
// at rest holds no thread, and a burst's threads are reused while it lasts.
// Made for tasks that may run long (a stream, an exec): each holds its
// thread until it returns.
//
// Thread-safety: Run from any thread, a task of the pool included; the
// destructor from a thread that is not the pool's.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace slotd {

class ElasticPool {
 public:
  using Task = std::function<void()>;
  // Makes a thread that runs `body`; throws std::system_error when the
  // system makes none (as std::thread's constructor does at a tasks limit).
  using ThreadMaker = std::function<std::thread(Task body)>;

  // Threads are named `thread_name` (15 bytes at most are kept).
  // `make_thread`: empty, std::thread; tests give one that fails.
  ElasticPool(std::string thread_name, int max_threads, std::chrono::milliseconds idle_for,
              ThreadMaker make_thread = {});
  // Waits for every task to return and every thread to end.
  ~ElasticPool();
  ElasticPool(const ElasticPool&) = delete;
  ElasticPool& operator=(const ElasticPool&) = delete;

  // Runs `task` on a thread of the pool. kResourceExhausted when
  // `max_threads` tasks run already; kUnavailable, with the system's
  // reason, when a thread was needed and none could be made. Either way
  // `task` never runs.
  Status Run(Task task) EXCLUDES(mutex_);
  // The pool's threads now, running a task or waiting for one.
  int Threads() const EXCLUDES(mutex_);

 private:
  // A thread's life: `first`, then what Run hands it, until idle_for passes
  // with nothing or the pool ends.
  void Work(Task first) EXCLUDES(mutex_);
  // Joins the threads that have ended.
  void JoinEnded() REQUIRES(mutex_);

  const std::string thread_name_;
  const int max_threads_;
  const std::chrono::milliseconds idle_for_;
  const ThreadMaker make_thread_;

  mutable Mutex mutex_;
  std::condition_variable work_came_;  // with mutex_: handed_ grew, or stopping_
  std::deque<Task> handed_ GUARDED_BY(mutex_);  // tasks for threads that wait; never more than waiting_
  int waiting_ GUARDED_BY(mutex_) = 0;          // threads waiting for work
  int live_ GUARDED_BY(mutex_) = 0;             // threads that have not ended
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_ GUARDED_BY(mutex_);
  std::vector<std::thread::id> ended_ GUARDED_BY(mutex_);  // threads that ended, to join
};

}  // namespace slotd
