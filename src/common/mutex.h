// Mutex and MutexLock: std::mutex and its scoped lock, annotated for clang's
// thread-safety analysis (-Wthread-safety, on in every clang build), so that
// a member declared GUARDED_BY(mutex_) cannot be touched without the lock
// and a function declared REQUIRES(mutex_) cannot be called without it.
// (libstdc++'s std::mutex carries no annotations.) Under g++ the
// annotations compile to nothing.
#pragma once

#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define SLOTD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SLOTD_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) SLOTD_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY SLOTD_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) SLOTD_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) SLOTD_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) SLOTD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) SLOTD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) SLOTD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) SLOTD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) SLOTD_THREAD_ANNOTATION(assert_capability(x))
// The declared order of two mutexes: this one is never taken while holding
// the ones named (checked with -Wthread-safety-beta).
#define ACQUIRED_BEFORE(...) SLOTD_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) SLOTD_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))

namespace slotd {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mutex_.lock(); }
  void Unlock() RELEASE() { mutex_.unlock(); }
  // Tells the analysis that this mutex is held where it cannot see it: the
  // caller holds it under another name (the same object reached through
  // another reference, checked by address). Checks nothing at run time.
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

  // Waits on `cv` until done() holds, with this mutex held by the caller:
  // it is let go while waiting and held again when Wait returns.
  template <typename Done>
  void Wait(std::condition_variable& cv, Done done) REQUIRES(this) {
    std::unique_lock<std::mutex> lock(mutex_, std::adopt_lock);
    cv.wait(lock, done);
    lock.release();
  }

 private:
  friend class MutexLock;
  std::mutex mutex_;
};

// Holds a Mutex for its scope (or until Unlock).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : lock_(mutex.mutex_) {}
  ~MutexLock() RELEASE() = default;

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Lets the mutex go before the scope ends, and takes it again.
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }

  // The standard lock underneath, for std::condition_variable and
  // Clock::WaitUntil, which release and re-take it while they wait (the
  // mutex is held again when they return, as the analysis assumes).
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace slotd
