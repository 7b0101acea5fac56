// Kernels' timed lives and restarts (KernelLifetimes, through the Agent):
// deadlines, their stop, and restarts that keep or re-take an allocation.
#include "unit/agent_fixture.h"

namespace slotd::agent_testing {
namespace {

// ------------------------------------------------------------------ lifetimes

TEST_F(AgentTest, AKernelsDeadlineIsItsCreationPlusItsLifetimeAndWithoutOneItHasNone) {
  Kernel forever = MustCreate(Request("k1"));
  EXPECT_FALSE(forever.deadline.has_value());
  Kernel brief = MustCreate(Request("k2", {{"cpu", 1}}, {{"max_lifetime", "90m"}}));
  ASSERT_TRUE(brief.deadline.has_value());
  EXPECT_EQ(*brief.deadline, brief.created_at + 90 * 60);
  EXPECT_EQ(engine_.Peek(brief.container_id)->labels.at(label::kDeadline), std::to_string(*brief.deadline));
}

TEST_F(AgentTest, TheConfigsMaxLifetimeIsTheDefaultAndTheMostARequestMayAskFor) {
  config_.container.max_lifetime = std::chrono::hours(2);
  agent_ = NewAgent();
  Kernel capped = MustCreate(Request("k1"));
  ASSERT_TRUE(capped.deadline.has_value());
  EXPECT_EQ(*capped.deadline, capped.created_at + 2 * 3600);
  Kernel shorter = MustCreate(Request("k2", {{"cpu", 1}}, {{"max_lifetime", "30m"}}));
  EXPECT_EQ(*shorter.deadline, shorter.created_at + 30 * 60);

  auto longer = agent_->CreateKernel(Request("k3", {{"cpu", 1}}, {{"max_lifetime", "3h"}}));
  ASSERT_FALSE(longer.ok());
  EXPECT_EQ(longer.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(longer.status().message(),
            "max_lifetime: 3h is longer than this agent allows ([container] max-lifetime = \"2h\"); ask for at most "
            "that");
}

TEST_F(AgentTest, AKernelPastItsDeadlineIsStoppedWithItsReasonAndFreesItsSlice) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}, {{"max_lifetime", "1h"}}));
  Kernel other = MustCreate(Request("k2", {{"cpu", 1}}, {{"max_lifetime", "2h"}}));
  auto events = hub_.Subscribe();

  agent_->owners().lifetimes.StopExpired(*k.deadline - 1);  // not yet
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);

  agent_->owners().lifetimes.StopExpired(*k.deadline);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminated);
  EXPECT_EQ(agent_->GetKernel("k1")->reason, "lifetime exceeded");
  EXPECT_FALSE(engine_.Peek(k.container_id)->running);
  EXPECT_EQ(StateOf("k2"), KernelState::kRunning);
  EXPECT_EQ(Used("cpu"), 1u);
  bool announced = false;
  while (std::optional<Event> event = events->Next(std::chrono::milliseconds(0)))
    announced = announced || (event->type == EventType::kKernelTerminated && event->body["kernel_id"] == "k1" &&
                              event->body["reason"] == "lifetime exceeded");
  EXPECT_TRUE(announced);
}

TEST_F(AgentTest, ADeadlineSurvivesARestartOfTheAgent) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 1}}, {{"max_lifetime", "1h"}}));
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  EXPECT_EQ(agent_->GetKernel("k1")->deadline, k.deadline);
  agent_->owners().lifetimes.StopExpired(*k.deadline);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminated);
}

TEST_F(AgentTest, AKernelWhoseContainerCannotBeStoppedStaysRunningForTheNextRound) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 1}}, {{"max_lifetime", "1h"}}));
  engine_.FailNext(Method::kStop, Status::Unavailable("engine unreachable"));
  agent_->owners().lifetimes.StopExpired(*k.deadline);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  agent_->owners().lifetimes.StopExpired(*k.deadline);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminated);
}

// ------------------------------------------------------------------- restart

TEST_F(AgentTest, RestartOfATerminatedKernelRetakesItsAllocation) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(k.container_id, 1));
  ASSERT_EQ(StateOf("k1"), KernelState::kTerminated);
  ExpectNothingHeld();

  auto restarted = agent_->RestartKernel("k1");
  ASSERT_TRUE(restarted.ok()) << restarted.status().message();
  EXPECT_EQ(restarted->state(), KernelState::kRunning);
  EXPECT_FALSE(restarted->exit_code.has_value());
  EXPECT_EQ(restarted->allocation, k.allocation);
  EXPECT_EQ(Used("cpu"), 2u);
  EXPECT_EQ(Used("ports"), 1u);
  EXPECT_TRUE(engine_.Peek(k.container_id)->running);
}

TEST_F(AgentTest, RestartFailsWhenItsCoreWasGivenAway) {
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}}));
  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(k1.container_id, 1));
  MustCreate(Request("k2", {{"cpu", 1}}));  // takes k1's core 0

  auto restarted = agent_->RestartKernel("k1");
  ASSERT_FALSE(restarted.ok());
  EXPECT_EQ(restarted.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(restarted.status().message().find("cpu core 0 is already held by kernel k2"), std::string::npos)
      << restarted.status().message();
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminated);
  EXPECT_EQ(Used("cpu"), 1u);
  EXPECT_EQ(engine_.CallCount(Method::kRestart), 0);
}

TEST_F(AgentTest, RestartThatFailsPartWayGivesBackWhatItRetook) {
  MustCreate(Request("k0", {{"cpu", 1}}));                          // core 0
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}, {"mem", "512m"}}));  // core 1
  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(k1.container_id, 1));
  ASSERT_TRUE(agent_->DeleteKernel("k0").ok());
  MustCreate(Request("k2", {{"cpu", 1}, {"mem", "768m"}}));  // core 0 and most of the memory

  auto restarted = agent_->RestartKernel("k1");  // core 1 is free, 512m is not
  ASSERT_FALSE(restarted.ok());
  EXPECT_EQ(restarted.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(Used("cpu"), 1u);
  EXPECT_EQ(Used("mem"), 768 * kMiB);
}

TEST_F(AgentTest, RestartOfARunningKernelKeepsItsAllocation) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  auto restarted = agent_->RestartKernel("k1");
  ASSERT_TRUE(restarted.ok()) << restarted.status().message();
  EXPECT_EQ(restarted->state(), KernelState::kRunning);
  EXPECT_EQ(restarted->allocation, k.allocation);
  EXPECT_EQ(Used("cpu"), 2u);
  EXPECT_EQ(engine_.CallsFor(k.container_id), 2);  // Start at create, then Restart
}

}  // namespace
}  // namespace slotd::agent_testing
