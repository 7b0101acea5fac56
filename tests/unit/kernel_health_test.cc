// What kernels' cgroups say (KernelHealth, through the Agent): kills for lack
// of memory and cores beyond the allocation, as the kernel's condition.
#include "unit/agent_fixture.h"

namespace slotd::agent_testing {
namespace {

// ------------------------------------------------------------------ cgroups


// An engine that sends no oom event (Podman): the kills the kernel's cgroup
// counts are its condition, and a kill (137) after them is "out of memory".
// A count the agent already has, or one of another container, changes nothing.
TEST_F(AgentTest, KillsForLackOfMemoryThatTheCgroupCountsAreTheConditionAndTheReasonOfTheEnd) {
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}}));
  agent_->owners().health.RecordCgroups({{"k1", "another-container", 5, ""}});
  EXPECT_EQ(agent_->GetKernel("k1")->oom_kills, 0);
  agent_->owners().health.RecordCgroups({{"k1", k1.container_id, 2, ""}});
  auto k = agent_->GetKernel("k1");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->oom_kills, 2);
  EXPECT_NE(k->Conditions().find("2 processes killed for lack of memory"), std::string::npos) << k->Conditions();
  agent_->owners().health.RecordCgroups({{"k1", k1.container_id, 1, ""}});  // an older reading
  EXPECT_EQ(agent_->GetKernel("k1")->oom_kills, 2);

  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(k1.container_id, 137));
  k = agent_->GetKernel("k1");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->state(), KernelState::kTerminated);
  EXPECT_EQ(k->reason, "out of memory");
}

// An engine whose inspect keeps a cpuset changed beside it (Podman after
// `podman update`), and sends no event: the cores the kernel's cgroup allows
// are its drift, and cores back as allocated clear it.
TEST_F(AgentTest, CoresTheCgroupAllowsBeyondTheAllocationAreTheKernelsCondition) {
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}}));
  const int mine = k1.allocation.cores.at(0);
  agent_->owners().health.RecordCgroups({{"k1", k1.container_id, 0, FormatCoreList({mine, mine + 1})}});
  const std::string moved = agent_->GetKernel("k1")->condition;
  EXPECT_NE(moved.find("its cpuset was changed outside slotd to \"" + FormatCoreList({mine, mine + 1}) +
                       "\" (allocated: " + std::to_string(mine) + ")"),
            std::string::npos)
      << moved;
  agent_->owners().health.RecordCgroups({{"k1", k1.container_id, 0, std::to_string(mine)}});
  EXPECT_EQ(agent_->GetKernel("k1")->condition, "");
}


// ------------------------------------------------------------ health checks

// A probe worker gives the result that makes a kernel unhealthy and goes
// back to probing: the kernel's stop runs on the stop queue, not on it.
TEST_F(AgentTest, AProbeThatFindsAKernelUnhealthyNeverWaitsOnItsStop) {
  const Kernel k = MustCreate(
      Request("k1", {{"cpu", 1}}, {{"health", {{"exec", {"true"}}, {"failures", 1}, {"on_unhealthy", "stop"}}}}));
  engine_.HoldNext(Method::kStop);
  agent_->owners().health.RecordCheck("k1", k.container_id, {false, "exit code 1"}, false);  // returns with its stop held
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kStop));
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminating);
  engine_.Release(Method::kStop);
  agent_->owners().ends.WaitForStops();
  Result<Kernel> stopped = agent_->GetKernel("k1");
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->state(), KernelState::kTerminated);
  EXPECT_EQ(stopped->reason, "unhealthy");
}

// A kernel found unhealthy with on_unhealthy "restart" is held by its stop
// until its restart policy has decided: a restart asked meanwhile is
// refused, naming the stop, and a delete waits for it, then wins. The
// pending stop is never overwritten.
class UnhealthyKernelTest : public AgentTest {
 protected:
  // Kernel "k1" with `restart_policy`, found unhealthy by its one failed
  // check (on_unhealthy "restart"), its stop held by the engine.
  Kernel UnhealthyWithItsStopHeld(const std::string& restart_policy) {
    const Kernel k = MustCreate(Request("k1", {{"cpu", 1}},
                                        {{"health", {{"exec", {"true"}}, {"failures", 1}, {"on_unhealthy", "restart"}}},
                                         {"restart", {{"policy", restart_policy}}}}));
    engine_.HoldNext(Method::kStop);
    agent_->owners().health.RecordCheck("k1", k.container_id, {false, "exit code 1"}, false);
    EXPECT_TRUE(engine_.WaitUntilHeld(Method::kStop));
    return k;
  }
};

TEST_F(UnhealthyKernelTest, ItsStopIsItsOneOwnerUntilItsPolicyDecides) {
  const Kernel k = UnhealthyWithItsStopHeld("on-failure");

  const Result<Kernel> restarted = agent_->RestartKernel("k1");
  ASSERT_FALSE(restarted.ok());
  EXPECT_NE(restarted.status().message().find("busy (being stopped: unhealthy)"), std::string::npos)
      << restarted.status().message();
  EXPECT_EQ(engine_.CallCount(Method::kRestart), 0);
  // A second failed check finds it owned: no second stop is queued.
  agent_->owners().health.RecordCheck("k1", k.container_id, {false, "exit code 1"}, false);

  engine_.Release(Method::kStop);
  agent_->owners().ends.WaitForStops();
  Result<Kernel> ended = agent_->GetKernel("k1");
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(ended->state(), KernelState::kBackoff);
  EXPECT_EQ(ended->reason, "unhealthy");
  EXPECT_EQ(engine_.CallCount(Method::kStop), 1);
}

TEST_F(UnhealthyKernelTest, ADeleteDuringItsStopWaitsForItAndThenWins) {
  UnhealthyWithItsStopHeld("always");
  Result<Kernel> deleted = Status::Internal("not run");
  std::thread deleter([&] { deleted = agent_->DeleteKernel("k1"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(engine_.CallCount(Method::kRemove), 0) << "the delete went ahead of the stop that holds the kernel";
  engine_.Release(Method::kStop);
  deleter.join();
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(engine_.ContainerCount(), 0u);
  ExpectNothingHeld();
}

}  // namespace
}  // namespace slotd::agent_testing
