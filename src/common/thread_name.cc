#include "common/thread_name.h"

#include <pthread.h>

#include <latch>
#include <memory>
#include <string>

#include <boost/asio/post.hpp>

namespace slotd {

void NameThisThread(std::string_view name) {
  const std::string cut(name.substr(0, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

void NamePoolThreads(boost::asio::thread_pool& pool, size_t threads, std::string_view name) {
  // All named and all waiting: no thread took two tasks, so each was named.
  // Shared, since a task may still be leaving the latch when this returns.
  auto named = std::make_shared<std::latch>(static_cast<std::ptrdiff_t>(threads));
  for (size_t i = 0; i < threads; ++i)
    boost::asio::post(pool, [named, name = std::string(name)] {
      NameThisThread(name);
      named->arrive_and_wait();
    });
  named->wait();
}

}  // namespace slotd
