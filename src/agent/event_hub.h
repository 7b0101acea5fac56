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
#include <set>

#include <nlohmann/json.hpp>

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
    std::deque<nlohmann::json> queue_;  // guarded by hub_.mutex_
  };

  // Starts receiving every event published from now on.
  std::unique_ptr<Subscription> Subscribe();
  // Delivers `event` to every current subscriber.
  void Publish(const nlohmann::json& event);

 private:
  static constexpr size_t kMaxQueued = 1000;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::set<Subscription*> subscribers_;  // guarded by mutex_
};

}  // namespace slotd
