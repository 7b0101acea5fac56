// EventHub: fans the agent's kernel events out to /v1/events subscribers.
// Thread-safe. A slow subscriber loses its oldest events past a bound rather
// than holding the agent back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <map>

#include <nlohmann/json.hpp>

#include "common/mutex.h"

namespace slotd {

class EventHub {
 public:
  // One subscriber's queue; obtained from Subscribe, released by destruction.
  class Subscription {
   public:
    ~Subscription();
    // Waits up to `timeout` for the next event; nullopt on timeout.
    std::optional<nlohmann::json> Next(std::chrono::milliseconds timeout);

   private:
    friend class EventHub;
    explicit Subscription(EventHub& hub) : hub_(hub) {}
    EventHub& hub_;
  };

  // Starts receiving every event published from now on.
  std::unique_ptr<Subscription> Subscribe();
  // Delivers `event` to every current subscriber.
  void Publish(const nlohmann::json& event);

 private:
  static constexpr size_t kMaxQueued = 1000;
  Mutex mutex_;
  std::condition_variable cv_;
  std::map<const Subscription*, std::deque<nlohmann::json>> queues_ GUARDED_BY(mutex_);  // one per subscriber
};

}  // namespace slotd
