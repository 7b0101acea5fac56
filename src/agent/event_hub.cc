#include "agent/event_hub.h"

namespace slotd {

EventHub::Subscription::~Subscription() {
  MutexLock lock(hub_.mutex_);
  hub_.queues_.erase(this);
}

std::optional<Event> EventHub::Subscription::Next(std::chrono::milliseconds timeout) {
  MutexLock lock(hub_.mutex_);
  std::deque<Event>& queue = hub_.queues_.at(this);
  if (!hub_.cv_.wait_for(lock.native(), timeout, [&] { return !queue.empty(); })) return std::nullopt;
  Event event = std::move(queue.front());
  queue.pop_front();
  return event;
}

EventHub::Listener::~Listener() {
  MutexLock lock(hub_.mutex_);
  hub_.listeners_.erase(this);
}

std::unique_ptr<EventHub::Listener> EventHub::Listen(std::function<void(const Event&)> on_event) {
  std::unique_ptr<Listener> listener(new Listener(*this));
  MutexLock lock(mutex_);
  listeners_[listener.get()] = std::move(on_event);
  return listener;
}

std::unique_ptr<EventHub::Subscription> EventHub::Subscribe() {
  std::unique_ptr<Subscription> sub(new Subscription(*this));
  MutexLock lock(mutex_);
  queues_[sub.get()];
  return sub;
}

void EventHub::Publish(EventType type, nlohmann::json fields) {
  fields["type"] = EventTypeName(type);
  const Event event{type, std::move(fields)};
  {
    MutexLock lock(mutex_);
    for (auto& [sub, queue] : queues_) {
      if (queue.size() >= kMaxQueued) queue.pop_front();
      queue.push_back(event);
    }
    for (const auto& [listener, on_event] : listeners_) on_event(event);
  }
  cv_.notify_all();
}

}  // namespace slotd
