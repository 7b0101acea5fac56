// EventHub's listeners: each event published while one is kept reaches it,
// with its type and body, on the publisher's thread; none after it is gone.
#include "agent/event_hub.h"

#include <gtest/gtest.h>

#include <vector>

namespace slotd {
namespace {

TEST(EventHub, AListenerHearsEachEventUntilItIsDestroyed) {
  EventHub hub;
  std::vector<Event> heard;
  std::unique_ptr<EventHub::Listener> listener = hub.Listen([&](const Event& event) { heard.push_back(event); });
  auto subscription = hub.Subscribe();
  hub.Publish(EventType::kKernelStarted, {{"kernel_id", "k1"}});
  listener.reset();
  hub.Publish(EventType::kKernelStarted, {{"kernel_id", "k2"}});
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].type, EventType::kKernelStarted);
  EXPECT_EQ(heard[0].body["kernel_id"], "k1");
  EXPECT_EQ(heard[0].body["type"], "kernel_started");
  // Subscribers get every event still.
  EXPECT_TRUE(subscription->Next(std::chrono::milliseconds(0)));
  EXPECT_TRUE(subscription->Next(std::chrono::milliseconds(0)));
}

}  // namespace
}  // namespace slotd
