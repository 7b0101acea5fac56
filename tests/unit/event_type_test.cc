// The event types' one name table: every type has its own name, and each
// name reads back as its type.
#include "model/event_type.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace slotd {
namespace {

TEST(EventType, EachTypeHasItsOwnNameWhichReadsBackAsIt) {
  std::set<std::string> names;
  for (const EventType type : kEventTypes) {
    const std::string name = EventTypeName(type);
    EXPECT_NE(name, "unknown");
    EXPECT_TRUE(names.insert(name).second) << name << " names two types";
    EXPECT_EQ(ParseEventType(name), type) << name;
  }
  EXPECT_EQ(ParseEventType("kernel_exploded"), std::nullopt);
  EXPECT_EQ(ParseEventType(""), std::nullopt);
  EXPECT_EQ(ParseEventType("Kernel_Started"), std::nullopt);
}

}  // namespace
}  // namespace slotd
