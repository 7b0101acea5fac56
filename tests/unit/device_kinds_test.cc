// The device kinds' registry keeps the promises the rest of slotd relies on
// when it names no plugin: one name per kind, a section named after it in
// the agent's schema, and variables that no two kinds both claim.
#include "resources/device_kinds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <set>
#include <string>

#include "resources/agent_config.h"
#include "testing/test_host.h"

namespace slotd {
namespace {

TEST(DeviceKindsTest, EachKindHasItsOwnNameFitForSlotsLabelsAndSections) {
  ASSERT_FALSE(DeviceKinds().empty());
  static const std::regex kName("[a-z][a-z0-9_]{0,31}");
  std::set<std::string> names;
  for (const DeviceKind& kind : DeviceKinds()) {
    EXPECT_TRUE(std::regex_match(kind.name, kName)) << kind.name;
    EXPECT_TRUE(names.insert(kind.name).second) << kind.name << " is registered twice";
    EXPECT_NE(kind.name, "cpu");
    EXPECT_NE(kind.name, "mem");
    EXPECT_NE(kind.name, "ports");
  }
}

TEST(DeviceKindsTest, EachKindsSectionIsResourceDotItsNameAndFollowsTheCoreSections) {
  const std::vector<std::string> sections = AgentSchema().SectionNames();
  const size_t core = sections.size() - DeviceKinds().size();
  for (size_t i = 0; i < DeviceKinds().size(); ++i) {
    const DeviceKind& kind = DeviceKinds()[i];
    EXPECT_EQ(kind.section.name(), "resource." + kind.name);
    EXPECT_EQ(sections[core + i], "resource." + kind.name);
    EXPECT_TRUE(kind.make_plugin) << kind.name;
    EXPECT_TRUE(kind.check_devices) << kind.name;
  }
}

TEST(DeviceKindsTest, NoTwoKindsReserveTheSameVariable) {
  size_t declared = 0;
  for (const DeviceKind& kind : DeviceKinds()) {
    EXPECT_FALSE(kind.variables_selecting_none.empty()) << kind.name << " reserves no variable";
    declared += kind.variables_selecting_none.size();
  }
  EXPECT_EQ(DeviceVariablesSelectingNone().size(), declared);
  for (const DeviceKind& kind : DeviceKinds())
    for (const auto& [name, none] : kind.variables_selecting_none) EXPECT_EQ(DeviceVariablesSelectingNone().at(name), none);
}

// A section in the file is what turns a kind's plugin on: absent, the
// config holds nothing for it.
TEST(DeviceKindsTest, AConfigWithoutDeviceSectionsHoldsNone) {
  Result<Config> config = ParseConfig("[agent]\nid = \"a1\"\n", "agent.toml", TestHost());
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_TRUE(config->resource.devices.by_kind.empty());
}

}  // namespace
}  // namespace slotd
