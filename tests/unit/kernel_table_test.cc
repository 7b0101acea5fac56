// The kernel lifecycle (agent/kernel_table.h) walked from its table: every
// transition tried from every place a kernel can be in; the legal ones reach
// a place their rule allows, publish exactly the rule's event and hold
// resources as that place does; the illegal ones are refused and change
// nothing, not the state, not the resources, not the events.
#include "agent/kernel_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>

#include "common/units.h"
#include "resources/plugin.h"
#include "testing/fake_clock.h"

namespace slotd {
namespace {

using nlohmann::json;
using Place = KernelTable::Place;
using T = KernelTable::Transition;


// Cores 0-1 and 1 GiB: room for one kernel of one core.
Config TwoCores() {
  Config config;
  config.agent.id = "a1";
  config.resource.allowed_cores = {0, 1};
  config.resource.allowed_cores_explicit = true;
  config.resource.memory_size = 1024 * kMiB;
  config.resource.memory_size_explicit = true;
  config.container.port_range_start = 30000;
  config.container.port_range_end = 30001;
  return config;
}

Kernel NewKernel(const std::string& id) {
  Kernel kernel;
  kernel.request.kernel_id = id;
  kernel.request.resources.cpu = 1;
  kernel.request.resources.mem_bytes = 64 * kMiB;
  kernel.agent_id = "a1";
  return kernel;
}

// A table over the plugins of TwoCores(), and what it publishes.
class Lifecycle {
 public:
  Lifecycle() {
    auto made = MakePlugins(TwoCores(), HostFacts{});
    EXPECT_TRUE(made.ok()) << made.status().message();
    plugins_ = std::move(*made);
    subscription_ = hub_.Subscribe();
  }

  // Puts kernel "k" in `place` through legal transitions, then forgets the events.
  void Enter(Place place) {
    if (place) {
      switch (*place) {
        case KernelState::kPulling:
          ASSERT_TRUE(table_.Reserve(NewKernel("k"), true).ok());
          break;
        case KernelState::kPreparing:
          ASSERT_TRUE(table_.Reserve(NewKernel("k"), false).ok());
          break;
        case KernelState::kWarm:
          ASSERT_TRUE(table_.Reserve(NewKernel("k"), false).ok());
          ASSERT_TRUE(table_.Warmed("k").ok());
          break;
        case KernelState::kRunning:
          ASSERT_TRUE(table_.Reserve(NewKernel("k"), false).ok());
          ASSERT_TRUE(table_.Started("k").ok());
          break;
        case KernelState::kBackoff:
          ASSERT_TRUE(table_.Reserve(NewKernel("k"), false).ok());
          ASSERT_TRUE(table_.Started("k").ok());
          ASSERT_TRUE(table_.BackOff("k", 1, "exited with code 1", 1'800'000'000, 1'800'000'001'000).ok());
          break;
        case KernelState::kTerminating:
          ASSERT_TRUE(table_.Reserve(NewKernel("k"), false).ok());
          ASSERT_TRUE(table_.Started("k").ok());
          ASSERT_TRUE(table_.Stopping("k").ok());
          break;
        case KernelState::kTerminated:
          ASSERT_TRUE(table_.Adopt(NewKernel("k"), KernelState::kTerminated).ok());
          break;
        case KernelState::kError:
          ASSERT_TRUE(table_.Adopt(NewKernel("k"), KernelState::kError).ok());
          break;
      }
    }
    ASSERT_EQ(PlaceOf(), place);
    Events();
  }

  Place PlaceOf() const {
    const Kernel* k = table_.Find("k");
    return k ? Place(k->state()) : std::nullopt;
  }

  // Whether a call owns "k" now.
  bool Owned() const {
    const Kernel* k = table_.Find("k");
    return k && table_.OwnedByACall(*k);
  }

  // Whether "k" holds cores now, as the cpu plugin tells.
  bool HoldsCores() {
    const Kernel* k = table_.Find("k");
    return k && k->holds_resources;
  }

  // Makes "k"'s Record, if it is in the table, so that a change after it must drop it.
  void MakeRecord() const {
    if (const Kernel* k = table_.Find("k")) (void)table_.Record(*k);
  }

  // Whether "k"'s Record says what "k" is now (true when it is not in the table).
  bool RecordIsCurrent() const {
    const Kernel* k = table_.Find("k");
    return !k || *table_.Record(*k) == k->ToJson().dump(-1, ' ', false, json::error_handler_t::replace);
  }

  // The events published since the last call, by type.
  std::vector<std::string> Events() {
    std::vector<std::string> types;
    while (auto event = subscription_->Next(std::chrono::milliseconds(0))) types.push_back(event->body["type"]);
    return types;
  }

  // Tries `transition` on "k" (each with the arguments a caller would give).
  Status Try(T transition) {
    switch (transition) {
      case T::kReserve: return table_.Reserve(NewKernel("k"), false);
      case T::kPrepared: return table_.Prepared("k");
      case T::kAdopt: return table_.Adopt(NewKernel("k"), KernelState::kRunning);
      case T::kStarted: return table_.Started("k");
      case T::kWarmed: return table_.Warmed("k");
      case T::kGiven: return table_.Given("k", NewKernel("k").request, 1'800'000'000, std::nullopt);
      case T::kResumed:
      case T::kRefused: return table_.Resume("k", "started outside slotd");
      case T::kRestartHeld: {
        Result<KernelHold> hold = table_.BeginRestart("k");
        if (!hold.ok()) return hold.status();
        held_ = std::move(*hold);  // kept: the test looks at what the hold holds
        return Status::Ok();
      }
      case T::kRestartUnheld: {
        Result<KernelHold> hold = table_.BeginRestart("k");
        if (!hold.ok()) return hold.status();
        return table_.FinishRestart(*hold, false);
      }
      case T::kRestarted: {
        Result<KernelHold> hold = table_.BeginRestart("k");
        return hold.ok() ? table_.FinishRestart(*hold, true) : hold.status();
      }
      case T::kBackedOff: return table_.BackOff("k", 1, "exited with code 1", 1'800'000'100, 1'800'000'101'000);
      case T::kPolicyRestarted: {
        Result<KernelHold> hold = table_.BeginPolicyRestart("k");
        if (!hold.ok()) return hold.status();
        table_.Change("k")->restarts = 1;
        return table_.FinishRestart(*hold, true);
      }
      case T::kStopping: return table_.Stopping("k");
      case T::kStopFailed: return table_.StopFailed("k");
      case T::kTerminated: return table_.Terminated("k", 3, "exited with code 3", 1'800'000'100);
      case T::kDeleted: return table_.Deleted("k", 0).status();
      case T::kForgotten: return table_.Forget("k", "container vanished");
      case T::kAbandoned: return table_.Abandon("k");
    }
    return Status::Internal("unknown transition");
  }

 protected:
  EventHub hub_;
  std::unique_ptr<EventHub::Subscription> subscription_;
  FakeClock clock_;
  std::vector<std::unique_ptr<ResourcePlugin>> plugins_;
  Mutex mutex_;  // what a hold's destructor takes; the test holds no other lock
  KernelTable table_{"a1", mutex_, plugins_, hub_, clock_};
  KernelHold held_;  // kRestartHeld's, given back (before the table goes) when the test ends
};

class KernelTableTest : public ::testing::Test, public Lifecycle {};

bool Has(const std::vector<Place>& places, Place place) {
  return std::find(places.begin(), places.end(), place) != places.end();
}

// Whether a kernel in `place` holds its resources (TERMINATING: as before it).
bool HoldsIn(Place place) {
  return place && (*place == KernelState::kPulling || *place == KernelState::kPreparing ||
                   *place == KernelState::kWarm || *place == KernelState::kRunning || *place == KernelState::kBackoff ||
                   *place == KernelState::kTerminating);
}

TEST(KernelTableRules, EveryTransitionHasOneRowAndEveryStateIsReachedAndLeft) {
  std::set<T> seen;
  for (const auto& rule : KernelRules()) {
    EXPECT_TRUE(seen.insert(rule.transition).second) << rule.name;
    EXPECT_FALSE(rule.from.empty()) << rule.name;
    EXPECT_FALSE(rule.to.empty()) << rule.name;
  }
  for (Place place : KernelPlaces()) {
    bool reached = false, left = false;
    for (const auto& rule : KernelRules()) {
      reached = reached || Has(rule.to, place);
      left = left || Has(rule.from, place);
    }
    EXPECT_TRUE(reached) << PlaceName(place);
    EXPECT_TRUE(left) << PlaceName(place);
  }
}

TEST_F(KernelTableTest, EachTransitionFromEachPlaceIsAppliedWhenLegalAndRefusedOtherwise) {
  for (const auto& rule : KernelRules()) {
    // kRefused is what kResumed becomes when the claim fails: tried below.
    if (rule.transition == T::kRefused) continue;
    for (Place from : KernelPlaces()) {
      SCOPED_TRACE(std::string(rule.name) + " from " + PlaceName(from));
      Lifecycle fresh;
      fresh.Enter(from);
      if (::testing::Test::HasFatalFailure()) return;
      const bool held_before = fresh.HoldsCores();
      fresh.MakeRecord();
      const Status status = fresh.Try(rule.transition);
      const std::vector<std::string> events = fresh.Events();
      EXPECT_TRUE(fresh.RecordIsCurrent()) << "the API's record of the kernel is not what it is now";
      if (Has(rule.from, from)) {
        ASSERT_TRUE(status.ok()) << status.message();
        const Place to = fresh.PlaceOf();
        EXPECT_TRUE(Has(rule.to, to)) << "reached " << PlaceName(to);
        EXPECT_EQ(events, rule.event ? std::vector<std::string>{EventTypeName(*rule.event)} : std::vector<std::string>{});
        // Stopping keeps what the kernel held; a restart's hold holds what the
        // restart needs; every other place says what it holds.
        if (rule.transition == T::kRestartHeld) {
          EXPECT_TRUE(fresh.HoldsCores());
          EXPECT_TRUE(fresh.Owned());
        } else if (to == Place(KernelState::kTerminating)) {
          EXPECT_EQ(fresh.HoldsCores(), held_before);
        } else {
          EXPECT_EQ(fresh.HoldsCores(), HoldsIn(to));
        }
      } else {
        EXPECT_EQ(status.code(), Status::Code::kFailedPrecondition) << status.message();
        EXPECT_EQ(fresh.PlaceOf(), from) << "an illegal transition changed the state";
        EXPECT_EQ(fresh.HoldsCores(), held_before);
        EXPECT_TRUE(events.empty());
      }
    }
  }
}

TEST_F(KernelTableTest, AResumeThatCannotClaimItsCoresIsRefusedIntoErrorWithoutAnEvent) {
  // "k" ended; another kernel took both cores meanwhile.
  Kernel k = NewKernel("k");
  k.allocation.cores = {0};
  ASSERT_TRUE(table_.Adopt(k, KernelState::kTerminated).ok());
  Kernel other = NewKernel("other");
  other.request.resources.cpu = 2;
  ASSERT_TRUE(table_.Reserve(other, false).ok());
  Events();
  const Status claimed = table_.Resume("k", "started outside slotd");
  EXPECT_FALSE(claimed.ok());
  EXPECT_EQ(PlaceOf(), Place(KernelState::kError));
  EXPECT_NE(table_.Find("k")->reason.find("container started outside slotd on resources it does not hold"),
            std::string::npos)
      << table_.Find("k")->reason;
  EXPECT_FALSE(HoldsCores());
  EXPECT_TRUE(Events().empty());
}

TEST_F(KernelTableTest, TerminatedRecordsItsEndAndOneEventCarryingIt) {
  Enter(KernelState::kRunning);
  ASSERT_TRUE(table_.Terminated("k", 137, "out of memory", 1'800'000'042).ok());
  const Kernel* k = table_.Find("k");
  EXPECT_EQ(k->exit_code, 137);
  EXPECT_EQ(k->reason, "out of memory");
  EXPECT_EQ(k->terminated_at, 1'800'000'042);
  EXPECT_EQ(k->ToJson()["terminated_at"], 1'800'000'042);
  EXPECT_EQ(Events(), std::vector<std::string>{"kernel_terminated"});
  ASSERT_TRUE(table_.Resume("k", "started outside slotd").ok());
  EXPECT_FALSE(table_.Find("k")->terminated_at) << "a kernel running again has not ended";
}

TEST_F(KernelTableTest, AStopThatFailsGoesBackToTheStateBeforeIt) {
  Enter(KernelState::kTerminated);
  ASSERT_TRUE(table_.Stopping("k").ok());
  ASSERT_TRUE(table_.StopFailed("k").ok());
  EXPECT_EQ(PlaceOf(), Place(KernelState::kTerminated));
}

TEST_F(KernelTableTest, ARestartingKernelIsOwnedByACallAndCannotBeStopped) {
  Enter(KernelState::kRunning);
  Result<KernelHold> hold = table_.BeginRestart("k");
  ASSERT_TRUE(hold.ok());
  EXPECT_TRUE(table_.OwnedByACall(*table_.Find("k")));
  const Status stop = table_.Stopping("k");
  EXPECT_NE(stop.message().find("busy (restarting)"), std::string::npos) << stop.message();
  ASSERT_TRUE(table_.FinishRestart(*hold, false).ok());
  EXPECT_FALSE(hold->held());
  EXPECT_EQ(PlaceOf(), Place(KernelState::kRunning));
  EXPECT_FALSE(Owned());
  EXPECT_TRUE(HoldsCores()) << "a running kernel whose restart failed keeps what it holds";
}

TEST_F(KernelTableTest, OneCallAtATimeHoldsAKernelAndOnlyItsHoldMayStopIt) {
  Enter(KernelState::kWarm);
  Result<KernelHold> giving = table_.Hold("k", KernelTable::Act::kGiveWarm);
  ASSERT_TRUE(giving.ok());
  for (KernelTable::Act act : {KernelTable::Act::kRestart, KernelTable::Act::kPolicyRestart,
                              KernelTable::Act::kRemoveWarm, KernelTable::Act::kEnd}) {
    const Result<KernelHold> second = table_.Hold("k", act, "unhealthy");
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("busy (being given to a create)"), std::string::npos)
        << second.status().message();
  }
  EXPECT_FALSE(table_.BeginRestart("k").ok());
  EXPECT_FALSE(table_.Stopping("k").ok()) << "a stop by a call that does not hold it";
  EXPECT_EQ(table_.Hold("nobody", KernelTable::Act::kEnd).status().code(), Status::Code::kNotFound);
  table_.Release(*giving);
  EXPECT_FALSE(Owned());

  Result<KernelHold> removing = table_.Hold("k", KernelTable::Act::kRemoveWarm);
  ASSERT_TRUE(removing.ok());
  EXPECT_TRUE(table_.Stopping("k", &*removing).ok()) << "the holder's own stop";
  EXPECT_EQ(PlaceOf(), Place(KernelState::kTerminating));
}

TEST_F(KernelTableTest, AHoldDroppedWithoutItsFinishGivesBackWhatItsRestartClaimed) {
  Enter(KernelState::kTerminated);
  ASSERT_FALSE(HoldsCores());
  {
    Result<KernelHold> hold = table_.BeginRestart("k");
    ASSERT_TRUE(hold.ok());
    EXPECT_TRUE(HoldsCores());
    KernelHold moved = std::move(*hold);
    EXPECT_FALSE(hold->held()) << "a hold moved from holds nothing";
    EXPECT_TRUE(Owned());
  }  // the restart's call returned early (an exception, a forgotten path): its hold's destructor undoes it
  EXPECT_FALSE(Owned());
  EXPECT_FALSE(HoldsCores()) << "a TERMINATED kernel holds nothing once its restart is given up";
  EXPECT_EQ(PlaceOf(), Place(KernelState::kTerminated));
}

TEST_F(KernelTableTest, AHoldOfAKernelRemovedMeanwhileEndsWithItAndNeverReleasesAKernelOfTheSameIdMadeLater) {
  Enter(KernelState::kRunning);
  Result<KernelHold> old = table_.Hold("k", KernelTable::Act::kEnd, "unhealthy");
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(table_.Forget("k", "container removed outside slotd").ok());
  Enter(KernelState::kRunning);  // a new kernel of the same id
  Result<KernelHold> current = table_.Hold("k", KernelTable::Act::kEnd, "unhealthy");
  ASSERT_TRUE(current.ok());
  table_.Release(*old);
  EXPECT_TRUE(Owned()) << "the old hold gave back the new one";
  table_.Release(*current);
  EXPECT_FALSE(Owned());
}

}  // namespace
}  // namespace slotd
