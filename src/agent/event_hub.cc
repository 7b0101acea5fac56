#include "agent/event_hub.h"

namespace slotd {

EventHub::Subscription::~Subscription() {
  std::lock_guard lock(hub_.mutex_);
  hub_.subscribers_.erase(this);
}

std::optional<nlohmann::json> EventHub::Subscription::Next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(hub_.mutex_);
  if (!hub_.cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
  nlohmann::json event = std::move(queue_.front());
  queue_.pop_front();
  return event;
}

std::unique_ptr<EventHub::Subscription> EventHub::Subscribe() {
  std::unique_ptr<Subscription> sub(new Subscription(*this));
  std::lock_guard lock(mutex_);
  subscribers_.insert(sub.get());
  return sub;
}

void EventHub::Publish(const nlohmann::json& event) {
  {
    std::lock_guard lock(mutex_);
    for (Subscription* sub : subscribers_) {
      if (sub->queue_.size() >= kMaxQueued) sub->queue_.pop_front();
      sub->queue_.push_back(event);
    }
  }
  cv_.notify_all();
}

}  // namespace slotd
