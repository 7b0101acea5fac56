// Deletes (KernelEnds, through the Agent): stop, remove and free, what an
// engine that fails leaves, and a delete that meets a restart.
#include "unit/agent_fixture.h"

namespace slotd::agent_testing {
namespace {

// -------------------------------------------------------------------- delete

TEST_F(AgentTest, DeleteStopsRemovesAndFrees) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  auto deleted = agent_->DeleteKernel("k1");
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  EXPECT_EQ(deleted->state(), KernelState::kTerminated);
  EXPECT_EQ(deleted->exit_code, FakeEngine::kStopExitCode);
  EXPECT_FALSE(deleted->holds_resources);
  EXPECT_FALSE(engine_.Peek(k.container_id).has_value());
  ExpectNothingHeld();
  EXPECT_EQ(agent_->DeleteKernel("k1").status().code(), Status::Code::kNotFound);
}

TEST_F(AgentTest, DeleteKeepsTheKernelAndItsResourcesWhenTheEngineCannotRemoveIt) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  engine_.FailNext(Method::kRemove, Status::Internal("driver failed to remove root filesystem"));
  auto failed = agent_->DeleteKernel("k1");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Status::Code::kInternal);
  EXPECT_NE(failed.status().message().find("driver failed to remove root filesystem"), std::string::npos);
  EXPECT_TRUE(agent_->GetKernel("k1").ok());
  EXPECT_EQ(Used("cpu"), 2u);
  EXPECT_TRUE(engine_.Peek(k.container_id).has_value());

  // Once the engine cooperates, the same call finishes the job.
  ASSERT_TRUE(agent_->DeleteKernel("k1").ok());
  ExpectNothingHeld();
  EXPECT_FALSE(engine_.Peek(k.container_id).has_value());
}

TEST_F(AgentTest, DeleteKeepsTheKernelWhenTheEngineCannotStopIt) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  engine_.FailNext(Method::kStop, Status::Unavailable("engine unreachable"));
  auto failed = agent_->DeleteKernel("k1");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  EXPECT_EQ(Used("cpu"), 2u);
  EXPECT_EQ(engine_.CallCount(Method::kRemove), 0);
  EXPECT_TRUE(engine_.Peek(k.container_id)->running);
}

TEST_F(AgentTest, ADeleteDuringARestartWaitsForItAndThenWins) {
  Kernel k = MustCreate(Request("k1"));
  engine_.HoldNext(Method::kRestart);
  Result<Kernel> restarted = Status::Internal("not run");
  std::thread restarter([&] { restarted = agent_->RestartKernel("k1"); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kRestart));

  Result<Kernel> deleted = Status::Internal("not run");
  std::thread deleter([&] { deleted = agent_->DeleteKernel("k1"); });
  // The delete waits for the restart: nothing is stopped while it is held.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(engine_.CallCount(Method::kStop), 0);
  engine_.Release(Method::kRestart);
  restarter.join();
  deleter.join();
  ASSERT_TRUE(restarted.ok()) << restarted.status().message();
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(engine_.ContainerCount(), 0u);
  ExpectNothingHeld();
}


// ------------------------------------------------------------ queued stops

// The first of `kernel_ids` found TERMINATED, waited for (a queued stop
// ends on a worker of its own); empty when none is within 10 s.
std::string FirstTerminated(const Agent& agent, const std::vector<std::string>& kernel_ids) {
  for (int i = 0; i < 1000; ++i) {
    for (const std::string& id : kernel_ids)
      if (Result<Kernel> k = agent.GetKernel(id); k.ok() && k->state() == KernelState::kTerminated) return id;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

// The drain's deadline stops every kernel at once: the loop that asks
// returns at once, and a stop the engine holds up delays no other.
TEST_F(AgentTest, ADrainsStopsRunSideBySideAndTheLoopThatAsksNeverWaitsOnThem) {
  MustCreate(Request("k1"));
  MustCreate(Request("k2"));
  ASSERT_TRUE(agent_->SetDraining(true, std::chrono::milliseconds(0)).ok());
  engine_.HoldNext(Method::kStop);
  agent_->owners().lifetimes.StopExpired(Clock::Real().UnixSeconds() + 1);  // returns with a stop held
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kStop));
  // One stop is held; the other goes on beside it.
  const std::string stopped = FirstTerminated(*agent_, {"k1", "k2"});
  ASSERT_FALSE(stopped.empty()) << "no stop ended beside the held one";
  EXPECT_EQ(StateOf(stopped == "k1" ? "k2" : "k1"), KernelState::kTerminating);
  engine_.Release(Method::kStop);
  agent_->owners().ends.WaitForStops();
  for (const std::string id : {"k1", "k2"}) {
    Result<Kernel> k = agent_->GetKernel(id);
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(k->state(), KernelState::kTerminated) << id;
    EXPECT_EQ(k->reason, "drained") << id;
  }
  ExpectNothingHeld();
}

}  // namespace
}  // namespace slotd::agent_testing
