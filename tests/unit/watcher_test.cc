// The watcher's periods and backoff, and the ages the agent reports, on a
// clock that moves only when the test moves it: no test here sleeps for a
// period, and each checks the exact period.
#include "agent/watcher.h"

#include <gtest/gtest.h>

#include <memory>

#include "testing/eventually.h"
#include "testing/fake_clock.h"
#include "testing/fake_engine.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using Method = FakeEngine::Method;
using std::chrono::milliseconds;
using std::chrono::seconds;

class WatcherTest : public ::testing::Test {
 protected:
  static Config TestConfig() {
    Config config;
    config.agent.id = "a1";
    config.resource.allowed_cores = {0, 1};
    config.resource.allowed_cores_explicit = true;
    config.resource.memory_size = 1ull << 30;
    config.resource.memory_size_explicit = true;
    return config;
  }

  std::unique_ptr<Agent> NewAgent() {
    auto plugins = MakePlugins(config_, HostFacts{});
    EXPECT_TRUE(plugins.ok()) << plugins.status().message();
    return std::make_unique<Agent>(config_, engine_, std::move(*plugins), hub_, clock_);
  }

  FakeClock clock_;
  FakeEngine engine_;
  EventHub hub_;
  TempTree scratch_{"slotd-watcher-scratch"};
  Config config_ = [this] {
    Config config = TestConfig();
    config.container.scratch_root = scratch_.root();
    config.container.allow_root = true;  // the fake's images run as root, as the test image does
    return config;
  }();
  std::unique_ptr<Agent> agent_ = NewAgent();
};

TEST_F(WatcherTest, RelistsOncePerIntervalOfItsClock) {
  // 20 s: the relister shares its thread with the image collector, whose
  // 60 s is a multiple of it, so that thread's every wait ends at one of the
  // relister's runs (WaitForWaiterUntil sees the thread's one deadline).
  const milliseconds interval = seconds(20);
  const Clock::TimePoint start = clock_.Now();
  Watcher watcher(*agent_, engine_, interval, clock_);
  watcher.Start();
  // The event stream's connection asks for a first relist at once.
  ASSERT_TRUE(Eventually([&] { return engine_.CallCount(Method::kList) >= 1; }));
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(clock_.WaitForWaiterUntil(start + i * interval)) << "interval " << i;
    const int lists = engine_.CallCount(Method::kList);
    clock_.Advance(interval);
    ASSERT_TRUE(Eventually([&] { return engine_.CallCount(Method::kList) == lists + 1; })) << "interval " << i;
  }
  watcher.Stop();
}

TEST_F(WatcherTest, ProbesEveryTwoSecondsAndAFailedProbeMakesTheEngineUnreachable) {
  // The prober shares its thread with the health keeper's scheduler, which
  // looks every HealthKeeper::kLookEvery: the clock moves a look at a time,
  // each time once the watcher's three loops wait for what comes next.
  constexpr Clock::Duration kLook = HealthKeeper::kLookEvery;
  constexpr size_t kLoops = 3;
  Watcher watcher(*agent_, engine_, std::chrono::hours(1), clock_);
  watcher.Start();
  // The relist that the event stream's connection asks for also records an
  // answer of the engine: let it finish first (no other comes within the hour).
  ASSERT_TRUE(Eventually([&] { return agent_->LastSyncAgeSeconds() >= 0; }));
  // Moves the clock by `by`, a look at a time; returns the pings made by then.
  auto pings_after = [&](Clock::Duration by) {
    for (Clock::Duration moved{}; moved < by; moved += kLook) {
      EXPECT_TRUE(clock_.WaitForWaitersAfterNow(kLoops));
      clock_.Advance(kLook);
    }
    EXPECT_TRUE(clock_.WaitForWaitersAfterNow(kLoops));
    return engine_.CallCount(Method::kPing);
  };
  EXPECT_EQ(pings_after(seconds(2) - kLook), 1);
  EXPECT_TRUE(agent_->EngineReachable());

  engine_.FailNext(Method::kPing, Status::DeadlineExceeded("no answer within 2000 ms"));
  EXPECT_EQ(pings_after(kLook), 2);
  EXPECT_FALSE(agent_->EngineReachable());
  EXPECT_EQ(pings_after(seconds(2) - kLook), 2);

  EXPECT_EQ(pings_after(kLook), 3);
  EXPECT_TRUE(agent_->EngineReachable());
  watcher.Stop();
}

TEST_F(WatcherTest, ReconnectsTheEventStreamWithADoublingBackoff) {
  for (int i = 0; i < 3; ++i) engine_.FailNext(Method::kStreamEvents, Status::Unavailable("stream broke"));
  const Clock::TimePoint start = clock_.Now();
  Watcher watcher(*agent_, engine_, std::chrono::hours(1), clock_);
  watcher.Start();
  Clock::TimePoint at = start;
  int calls = 1;
  for (milliseconds backoff : {milliseconds(100), milliseconds(200), milliseconds(400)}) {
    ASSERT_TRUE(Eventually([&] { return engine_.CallCount(Method::kStreamEvents) == calls; }));
    at += backoff;
    ASSERT_TRUE(clock_.WaitForWaiterUntil(at)) << "a wait of " << backoff.count() << " ms";
    clock_.Advance(backoff);
    ++calls;
  }
  // The fourth attempt connects, and the connection asks for a relist.
  ASSERT_TRUE(Eventually([&] { return engine_.CallCount(Method::kStreamEvents) == 4; }));
  ASSERT_TRUE(Eventually([&] { return engine_.CallCount(Method::kList) >= 1; }));
  watcher.Stop();
}

TEST_F(WatcherTest, AnEngineAnswerStaysFreshForItsWindowOfTheClock) {
  agent_->owners().engine_health.RecordAnswer(true);
  EXPECT_TRUE(agent_->EngineReachable());
  clock_.Advance(Agent::kEngineAnswerFresh - milliseconds(1));
  EXPECT_TRUE(agent_->EngineReachable());
  clock_.Advance(milliseconds(1));
  EXPECT_FALSE(agent_->EngineReachable());
}

TEST_F(WatcherTest, TheSyncAgeCountsFromTheLastSuccessfulRelist) {
  EXPECT_LT(agent_->LastSyncAgeSeconds(), 0);  // never synced
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  clock_.Advance(seconds(90));
  EXPECT_DOUBLE_EQ(agent_->LastSyncAgeSeconds(), 90.0);
  engine_.FailNext(Method::kList, Status::Unavailable("engine gone"));
  EXPECT_FALSE(agent_->owners().converger.Relist().ok());
  clock_.Advance(seconds(10));
  EXPECT_DOUBLE_EQ(agent_->LastSyncAgeSeconds(), 100.0);
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_DOUBLE_EQ(agent_->LastSyncAgeSeconds(), 0.0);
}

}  // namespace
}  // namespace slotd
