// Eventually: waits in real time for something another thread will do.
#pragma once

#include <chrono>
#include <cstdlib>
#include <functional>
#include <thread>

namespace slotd {

// `limit` stretched by $SLOTD_TEST_TIME_SCALE (a whole number from 1 to 100,
// default 1): the bound of a wait, never what a test measures, made longer on
// a slow host (scripts/vm-guest sets it in an emulated guest). Anything else
// in the variable counts as 1.
inline std::chrono::milliseconds ScaledLimit(std::chrono::milliseconds limit) {
  static const int scale = [] {
    const char* text = std::getenv("SLOTD_TEST_TIME_SCALE");
    const int n = text == nullptr ? 1 : std::atoi(text);
    return n >= 1 && n <= 100 ? n : 1;
  }();
  return limit * scale;
}

// Polls `ready` every millisecond until it holds (true) or `limit` (scaled:
// ScaledLimit) passes (false).
inline bool Eventually(const std::function<bool()>& ready,
                       std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  const auto give_up = std::chrono::steady_clock::now() + ScaledLimit(limit);
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace slotd
