// ByteBudget: a number of bytes that many holders share, taken and given
// back piece by piece, so that what all of them hold at once stays bounded
// (the output of every one-shot exec running now, say). Thread-safe.
#pragma once

#include <algorithm>
#include <cstddef>

#include "common/mutex.h"

namespace slotd {

class ByteBudget {
 public:
  explicit ByteBudget(size_t total) : left_(total) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // Takes up to `want` bytes of what is left; returns how many it took (0
  // when none are left). The caller gives them back with Give.
  size_t Take(size_t want) {
    MutexLock lock(mutex_);
    const size_t taken = std::min(want, left_);
    left_ -= taken;
    return taken;
  }
  // Gives back `n` bytes that Take returned.
  void Give(size_t n) {
    MutexLock lock(mutex_);
    left_ += n;
  }

 private:
  Mutex mutex_;
  size_t left_ GUARDED_BY(mutex_);
};

}  // namespace slotd
