#include "common/elastic_pool.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "common/thread_name.h"

namespace slotd {

ElasticPool::ElasticPool(std::string thread_name, int max_threads, std::chrono::milliseconds idle_for,
                         ThreadMaker make_thread)
    : thread_name_(std::move(thread_name)),
      max_threads_(max_threads),
      idle_for_(idle_for),
      make_thread_(make_thread ? std::move(make_thread) : [](Task body) { return std::thread(std::move(body)); }) {}

ElasticPool::~ElasticPool() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(mutex_);
    stopping_ = true;
    work_came_.notify_all();
    threads.swap(threads_);
  }
  for (std::thread& thread : threads) thread.join();
}

Status ElasticPool::Run(Task task) {
  MutexLock lock(mutex_);
  if (stopping_) return Status::Unavailable("the pool is ending");
  if (waiting_ > static_cast<int>(handed_.size())) {
    handed_.push_back(std::move(task));
    work_came_.notify_one();
    return Status::Ok();
  }
  if (live_ >= max_threads_)
    return Status::ResourceExhausted(std::to_string(max_threads_) + " tasks run already");
  JoinEnded();
  try {
    threads_.push_back(make_thread_([this, first = std::move(task)]() mutable { Work(std::move(first)); }));
  } catch (const std::system_error& e) {
    return Status::Unavailable(e.what());
  }
  ++live_;
  return Status::Ok();
}

int ElasticPool::Threads() const {
  MutexLock lock(mutex_);
  return live_;
}

void ElasticPool::Work(Task first) {
  NameThisThread(thread_name_);
  Task task = std::move(first);
  MutexLock lock(mutex_);
  for (;;) {
    lock.Unlock();
    task();
    task = nullptr;  // what it holds goes before the thread waits
    lock.Lock();
    ++waiting_;
    const bool came = work_came_.wait_for(lock.native(), idle_for_, [this]() REQUIRES(mutex_) {
      return !handed_.empty() || stopping_;
    });
    --waiting_;
    if (!came || handed_.empty()) break;  // idle for idle_for, or the pool ends
    task = std::move(handed_.front());
    handed_.pop_front();
  }
  --live_;
  ended_.push_back(std::this_thread::get_id());  // its last touch of the pool: joined by the next Run or the destructor
}

void ElasticPool::JoinEnded() {
  for (const std::thread::id& id : ended_) {
    auto it = std::find_if(threads_.begin(), threads_.end(), [&](const std::thread& t) { return t.get_id() == id; });
    if (it == threads_.end()) continue;
    it->join();  // it has ended or is returning: it never takes the lock again
    threads_.erase(it);
  }
  ended_.clear();
}

}  // namespace slotd
