// EventHub: fans the agent's kernel events out to /v1/events subscribers.
// Thread-safe. A slow subscriber loses its oldest events past a bound rather
// than holding the agent back.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <map>

#include <nlohmann/json.hpp>

#include "common/mutex.h"
#include "model/event_type.h"

namespace slotd {

// One announced event: its type, and its body as /v1/events sends it (its
// "type" field is EventTypeName(type)).
struct Event {
  EventType type;
  nlohmann::json body;
};

class EventHub {
 public:
  // One subscriber's queue; obtained from Subscribe, released by destruction.
  class Subscription {
   public:
    ~Subscription();
    // Waits up to `timeout` for the next event; nullopt on timeout.
    std::optional<Event> Next(std::chrono::milliseconds timeout);

   private:
    friend class EventHub;
    explicit Subscription(EventHub& hub) : hub_(hub) {}
    EventHub& hub_;
  };

  // A call made for each event published while it is kept, on the
  // publisher's thread with the hub's lock held: it must be quick and must
  // neither publish nor subscribe (wake a loop, say). Obtained from Listen;
  // once destroyed, it is not running and is never called again.
  class Listener {
   public:
    ~Listener();

   private:
    friend class EventHub;
    explicit Listener(EventHub& hub) : hub_(hub) {}
    EventHub& hub_;
  };

  // Starts receiving every event published from now on.
  std::unique_ptr<Subscription> Subscribe();
  // Calls `on_event` for every event published from now on (see Listener).
  std::unique_ptr<Listener> Listen(std::function<void(const Event&)> on_event);
  // Delivers an event of `type` to every current subscriber: `fields` (an
  // object) with "type" set to its name.
  void Publish(EventType type, nlohmann::json fields);

 private:
  static constexpr size_t kMaxQueued = 1000;
  Mutex mutex_;
  std::condition_variable cv_;
  std::map<const Subscription*, std::deque<Event>> queues_ GUARDED_BY(mutex_);  // one per subscriber
  std::map<const Listener*, std::function<void(const Event&)>> listeners_ GUARDED_BY(mutex_);
};

}  // namespace slotd
