// EngineLease through the fake engine: an agent's lease is recorded, renewed
// and released; a live agent of the same id with another claims directory is
// a refusal naming it; a dead one's lease is cleared away.
#include "node/engine_lease.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "testing/fake_engine.h"

namespace slotd {
namespace {

using Method = FakeEngine::Method;

class EngineLeaseTest : public ::testing::Test {
 protected:
  // Live: the (claims dir, agent id) pairs in `live_`.
  EngineLease::IsLive IsLive() {
    return [this](const std::string& dir, const std::string& id) { return live_.count(dir + "|" + id) > 0; };
  }
  // The labels of the lease volume named `name`, or nullopt.
  std::optional<Labels> LeaseLabels(const std::string& name) {
    auto volumes = engine_.ListVolumes({});
    EXPECT_TRUE(volumes.ok());
    for (const auto& v : *volumes)
      if (v.name == name) return v.labels;
    return std::nullopt;
  }

  FakeEngine engine_;
  std::set<std::string> live_;
  const LeaseHolder me_{"gpu1", "/run/slotd/node", "n1", 100};
};

TEST_F(EngineLeaseTest, IsRecordedWithItsHolderAndRemovedOnRelease) {
  auto lease = EngineLease::Take(engine_, me_, IsLive());
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  const std::string name = EngineLease::VolumeName(me_);
  EXPECT_EQ(name.rfind("slotd-lease-4-gpu1-", 0), 0u) << name;
  auto labels = LeaseLabels(name);
  ASSERT_TRUE(labels.has_value());
  EXPECT_EQ(labels->at(lease_label::kAgentId), "gpu1");
  EXPECT_EQ(labels->at(lease_label::kClaimsDir), "/run/slotd/node");
  EXPECT_EQ(labels->at(lease_label::kNode), "n1");
  EXPECT_EQ(labels->at(lease_label::kPid), "100");
  (*lease)->Release();
  EXPECT_FALSE(LeaseLabels(name).has_value());
}

TEST_F(EngineLeaseTest, NamesDifferPerIdAndClaimsDirectoryAndCannotCollideAcrossIds) {
  const LeaseHolder other_dir{"gpu1", "/srv/claims", "n1", 1};
  const LeaseHolder other_id{"gpu1-a", "/run/slotd/node", "n1", 1};
  EXPECT_NE(EngineLease::VolumeName(me_), EngineLease::VolumeName(other_dir));
  EXPECT_NE(EngineLease::VolumeName(me_), EngineLease::VolumeName(other_id));
  EXPECT_EQ(EngineLease::VolumeName(me_), EngineLease::VolumeName({"gpu1", "/run/slotd/node", "n2", 7}));
}

TEST_F(EngineLeaseTest, ALiveAgentOfTheSameIdWithAnotherClaimsDirectoryIsARefusalNamingIt) {
  const LeaseHolder twin{"gpu1", "/srv/other-claims", "n1", 4242};
  live_.insert("/srv/other-claims|gpu1");
  ASSERT_TRUE(EngineLease::Take(engine_, twin, IsLive()).ok());

  auto refused = EngineLease::Take(engine_, me_, IsLive());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kFailedPrecondition);
  const std::string& message = refused.status().message();
  EXPECT_NE(message.find("another agent with id gpu1"), std::string::npos) << message;
  EXPECT_NE(message.find("pid 4242"), std::string::npos) << message;
  EXPECT_NE(message.find("claims-dir /srv/other-claims"), std::string::npos) << message;
  EXPECT_NE(message.find("another agent.id"), std::string::npos) << message;
  EXPECT_FALSE(LeaseLabels(EngineLease::VolumeName(me_)).has_value());  // nothing of the refused one is left
  EXPECT_TRUE(LeaseLabels(EngineLease::VolumeName(twin)).has_value());  // the live one's is untouched
}

TEST_F(EngineLeaseTest, ADeadAgentsLeaseIsClearedAway) {
  const LeaseHolder dead{"gpu1", "/srv/other-claims", "n1", 4242};
  ASSERT_TRUE(EngineLease::Take(engine_, dead, IsLive()).ok());  // then SIGKILLed: no Release
  auto lease = EngineLease::Take(engine_, me_, IsLive());
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  EXPECT_FALSE(LeaseLabels(EngineLease::VolumeName(dead)).has_value());
}

TEST_F(EngineLeaseTest, OtherIdsAndThisAgentsOwnEarlierLeaseAreNoRefusal) {
  live_.insert("/srv/other-claims|gpu2");
  ASSERT_TRUE(EngineLease::Take(engine_, {"gpu2", "/srv/other-claims", "n1", 5}, IsLive()).ok());
  ASSERT_TRUE(EngineLease::Take(engine_, {"gpu1", "/run/slotd/node", "n1", 99}, IsLive()).ok());  // an earlier run
  auto lease = EngineLease::Take(engine_, me_, IsLive());
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  EXPECT_EQ(LeaseLabels(EngineLease::VolumeName(me_))->at(lease_label::kPid), "100");  // renewed
}

TEST_F(EngineLeaseTest, AnEngineThatCannotBeAskedIsUnavailable) {
  engine_.FailNext(Method::kVolumes, Status::Unavailable("connection refused"));
  auto lease = EngineLease::Take(engine_, me_, IsLive());
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), Status::Code::kUnavailable);
  EXPECT_NE(lease.status().message().find("lease"), std::string::npos) << lease.status().message();
}

}  // namespace
}  // namespace slotd
