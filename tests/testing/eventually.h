// Eventually: waits in real time for something another thread will do.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace slotd {

// Polls `ready` every millisecond until it holds (true) or `limit` passes (false).
inline bool Eventually(const std::function<bool()>& ready,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace slotd
