// Shared kernels (SharedCorePool, through the Agent): they follow the pool as
// exclusive kernels come and go, never start on a core taken meanwhile, and
// are adopted exactly.
#include "unit/agent_fixture.h"

namespace slotd::agent_testing {
namespace {

// Shared kernels run on the cores no kernel holds, under their quotas; an
// exclusive kernel takes its cores out of their cpusets before it starts, and
// gives them back when it goes; an agent restart adopts both exactly.
TEST_F(AgentTest, SharedKernelsFollowThePoolAsExclusiveKernelsComeAndGoAndAreAdoptedExactly) {
  std::vector<Kernel> shared;
  for (int i = 0; i < 6; ++i) shared.push_back(MustCreate(Request("s" + std::to_string(i), {{"cpu", 0.5}, {"mem", "64m"}})));
  EXPECT_EQ(engine_.SpecOf(shared[0].container_id)->cpuset_cpus, "0-3");
  EXPECT_EQ(engine_.SpecOf(shared[0].container_id)->cpu_quota_us, 50'000);
  EXPECT_EQ(agent_->DescribeResources()["cpu_shared"]["used"], 3000);

  // Four cores hold 3000m; one exclusive core leaves three, enough for them.
  Kernel exclusive = MustCreate(Request("x", {{"cpu", 1}}));
  EXPECT_EQ(exclusive.allocation.cores, (std::vector<int>{0}));
  for (const Kernel& k : shared) EXPECT_EQ(engine_.Inspect(k.container_id)->cpuset_cpus, "1-3") << k.id();
  EXPECT_EQ(engine_.CallCount(Method::kUpdate), 6);
  // A second would leave two cores for 3000m: refused, naming both.
  Result<Agent::CreateOutcome> refused = agent_->CreateKernel(Request("y", {{"cpu", 1}}));
  ASSERT_EQ(refused.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("6 shared kernel(s) with 3000m"), std::string::npos)
      << refused.status().message();

  // Adopted as they are, by a fresh agent.
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  EXPECT_EQ(agent_->DescribeResources()["cpu_shared"]["used"], 3000);
  EXPECT_EQ(agent_->DescribeResources()["cpu"]["used"], 1);
  EXPECT_EQ(agent_->GetKernel("s3")->allocation.shared_cpu_millis, 500);
  EXPECT_EQ(engine_.CallCount(Method::kUpdate), 6);  // their cpusets already match the pool

  ASSERT_TRUE(agent_->DeleteKernel("x").ok());
  for (const Kernel& k : shared) EXPECT_EQ(engine_.Inspect(k.container_id)->cpuset_cpus, "0-3") << k.id();
}

// A shared kernel's cores changed behind the agent's back are its
// condition; the moves the pool itself makes are not.
TEST_F(AgentTest, ASharedKernelMovedOffThePoolBehindTheAgentsBackHasThatCondition) {
  Kernel s = MustCreate(Request("s", {{"cpu", "250m"}}));
  MustCreate(Request("x", {{"cpu", 1}}));  // the pool moves to 1-3
  int updates = 0;
  for (const EngineEvent& event : engine_.Events())
    if (event.action == "update") updates += (agent_->owners().converger.OnEngineEvent(event), 1);
  EXPECT_EQ(updates, 1);  // the agent's own move
  EXPECT_EQ(agent_->GetKernel("s")->Conditions(), "");

  ASSERT_TRUE(engine_.UpdateCpuset(s.container_id, "0").ok());  // onto x's core, by someone else
  agent_->owners().converger.OnEngineEvent(engine_.Events().back());
  const std::string condition = agent_->GetKernel("s")->Conditions();
  EXPECT_NE(condition.find("its cpuset was changed outside slotd to \"0\" (the shared pool: 1-3)"), std::string::npos)
      << condition;

  ASSERT_TRUE(engine_.UpdateCpuset(s.container_id, "1,2,3").ok());  // back, written another way
  agent_->owners().converger.OnEngineEvent(engine_.Events().back());
  EXPECT_EQ(agent_->GetKernel("s")->Conditions(), "");
  ASSERT_TRUE(agent_->DeleteKernel("x").ok());  // the pool grows back to 0-3
  EXPECT_EQ(engine_.Inspect(s.container_id)->cpuset_cpus, "0-3");
  ASSERT_EQ(engine_.Events().back().action, "update");  // the agent's own move
  agent_->owners().converger.OnEngineEvent(engine_.Events().back());
  EXPECT_EQ(agent_->GetKernel("s")->Conditions(), "");
}

// An engine that cannot update a container's cores: the shared kernel's
// condition says so, and the exclusive kernel is still made.
TEST_F(AgentTest, ASharedKernelWhoseCoresCannotFollowThePoolHasThatCondition) {
  MustCreate(Request("s", {{"cpu", "250m"}}));
  engine_.FailNext(Method::kUpdate, Status::FailedPrecondition("the engine (Podman) cannot change a running "
                                                               "container's cores"));
  MustCreate(Request("x", {{"cpu", 1}}));
  const std::string condition = agent_->GetKernel("s")->Conditions();
  EXPECT_NE(condition.find("its cores could not follow the shared pool to \"1-3\" (it runs on \"0-3\")"),
            std::string::npos)
      << condition;
  // The next relist tries again; once it succeeds, the condition goes.
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_EQ(agent_->GetKernel("s")->Conditions(), "");
}

// A shared create and an exclusive one at the same moment: the shared
// kernel's container, created on the old pool and not yet started, is moved
// off the exclusive core before the exclusive kernel starts, not left on it
// because it did not run yet when the pool moved.
TEST_F(AgentTest, ASharedKernelStartingWhileAnExclusiveOneTakesACoreIsMovedOffItFirst) {
  engine_.HoldNext(Method::kStart);
  Result<Agent::CreateOutcome> shared = Status::Internal("not run");
  std::thread creator([&] { shared = agent_->CreateKernel(Request("s", {{"cpu", "250m"}})); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kStart));
  const std::string container = agent_->GetKernel("s")->container_id;
  EXPECT_EQ(engine_.SpecOf(container)->cpuset_cpus, "0-3");  // made on the pool of then

  Kernel x = MustCreate(Request("x", {{"cpu", 1}}));
  EXPECT_EQ(x.allocation.cores, (std::vector<int>{0}));
  EXPECT_EQ(engine_.Peek(container)->cpuset_cpus, "1-3");  // before it ever starts
  engine_.Release(Method::kStart);
  creator.join();
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_EQ(engine_.Peek(container)->cpuset_cpus, "1-3");
  EXPECT_EQ(agent_->GetKernel("s")->Conditions(), "");
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_EQ(engine_.Peek(container)->cpuset_cpus, "1-3");
}

// The same race one step earlier: the exclusive kernel takes its core while
// the shared kernel's container is being created on the old pool, before
// the agent knows of it. It is brought to the pool before it starts.
TEST_F(AgentTest, ASharedKernelCreatedOnAPoolThatShrankMeanwhileStartsOnThePoolAsItIsNow) {
  engine_.HoldNext(Method::kCreate);
  Result<Agent::CreateOutcome> shared = Status::Internal("not run");
  std::thread creator([&] { shared = agent_->CreateKernel(Request("s", {{"cpu", "250m"}})); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kCreate));
  MustCreate(Request("x", {{"cpu", 1}}));
  engine_.HoldNext(Method::kStart);
  engine_.Release(Method::kCreate);
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kStart));
  const std::string container = agent_->GetKernel("s")->container_id;
  EXPECT_EQ(engine_.SpecOf(container)->cpuset_cpus, "0-3");
  EXPECT_EQ(engine_.Peek(container)->cpuset_cpus, "1-3");  // at its start
  engine_.Release(Method::kStart);
  creator.join();
  ASSERT_TRUE(shared.ok()) << shared.status().message();
  EXPECT_EQ(engine_.Peek(container)->cpuset_cpus, "1-3");
}

// Two exclusive creates one after the other, the first one's move of the
// shared kernel slow: the second one's move never lands before it, so the
// shared kernel ends on the pool without either exclusive core.
TEST_F(AgentTest, TheSharedPoolsMovesReachTheEngineInTheOrderThePoolChanged) {
  Kernel s = MustCreate(Request("s", {{"cpu", "250m"}}));
  engine_.HoldNext(Method::kUpdate);
  std::thread first([&] { MustCreate(Request("x1", {{"cpu", 1}})); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kUpdate));  // moving s to 1-3
  std::thread second([&] { MustCreate(Request("x2", {{"cpu", 1}})); });
  for (int i = 0; i < 1000 && !agent_->GetKernel("x2").ok(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(agent_->GetKernel("x2").ok());  // core 1 taken
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let it move s if it may; the outcome must not depend on it
  engine_.Release(Method::kUpdate);
  first.join();
  second.join();
  EXPECT_EQ(agent_->GetKernel("x2")->allocation.cores, (std::vector<int>{1}));
  EXPECT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "2-3");
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "2-3");
}

// A shared kernel waiting for its restart policy's restart holds its quota:
// the pool's moves meanwhile reach its container, which starts on the pool.
TEST_F(AgentTest, ASharedKernelWaitingForARestartStartsOnThePoolAsItIsNow) {
  Kernel s = MustCreate(Request("s", {{"cpu", "250m"}}, {{"restart", {{"policy", "always"}, {"backoff", {{"initial", "1h"}}}}}}));
  Result<EngineEvent> died = engine_.KillBehindBack(s.container_id, 1);
  ASSERT_TRUE(died.ok());
  agent_->owners().converger.OnEngineEvent(*died);
  ASSERT_EQ(StateOf("s"), KernelState::kBackoff);
  MustCreate(Request("x", {{"cpu", 1}}));
  EXPECT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "1-3");
}

// An agent started again with fewer allowed-cores moves its shared kernels
// into its new pool before it serves, off the cores it gave up.
TEST_F(AgentTest, AnAgentStartedAgainWithFewerCoresMovesItsSharedKernelsIntoItsPoolAtOnce) {
  Kernel s = MustCreate(Request("s", {{"cpu", "450m"}}));
  ASSERT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "0-3");
  config_.resource.allowed_cores = {2, 3};
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  EXPECT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "2-3");  // before any relist
  EXPECT_EQ(agent_->GetKernel("s")->Conditions(), "");
}

// With no core left for them (its only core held by its exclusive kernel),
// or where they cannot be moved, the agent refuses to start, naming them:
// their cores stay out of any other agent's hands.
TEST_F(AgentTest, AnAgentStartedAgainWithoutCoresForItsSharedKernelsRefusesToStartNamingThem) {
  Kernel s = MustCreate(Request("s", {{"cpu", "450m"}}));
  MustCreate(Request("x", {{"cpu", 1}}));
  ASSERT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "1-3");
  config_.resource.allowed_cores = {0};
  agent_ = NewAgent();
  Status refused = agent_->Restore();
  ASSERT_EQ(refused.code(), Status::Code::kFailedPrecondition) << refused.message();
  EXPECT_NE(refused.message().find("this agent has no shared pool for them"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("kernel s (container " + s.container_id.substr(0, 12) + ", 450m of shared cpu)"),
            std::string::npos)
      << refused.message();
  EXPECT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "1-3");

  // An engine that cannot move it off the cores the agent gave up.
  config_.resource.allowed_cores = {0, 2, 3};
  agent_ = NewAgent();
  engine_.FailNext(Method::kUpdate, Status::FailedPrecondition("the engine cannot change a container's cores"));
  refused = agent_->Restore();
  ASSERT_EQ(refused.code(), Status::Code::kFailedPrecondition) << refused.message();
  EXPECT_NE(refused.message().find("runs on cores 1-3, of which 1 are not this agent's, and could not be moved into "
                                   "its shared pool (2-3): its cores could not follow"),
            std::string::npos)
      << refused.message();
  // Where the engine can move it, the same config starts, and it is moved.
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  EXPECT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "2-3");
}

}  // namespace
}  // namespace slotd::agent_testing
