// The agent façade through the in-memory FakeEngine: execs and logs, the
// events on the hub, and the owner-filtered stream.
#include "unit/agent_fixture.h"

namespace slotd::agent_testing {
namespace {

// ------------------------------------------------------------ exec and logs

TEST_F(AgentTest, ExecAndLogsReachTheKernelsContainer) {
  Kernel k = MustCreate(Request("k1"));
  auto exec = agent_->Exec("k1", {"echo", "hi"}, std::chrono::seconds(5));
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  EXPECT_EQ(exec->exit_code, 0);
  EXPECT_EQ(exec->stdout_text, "echo hi\n");

  engine_.SetLogs(k.container_id, "one\ntwo\nthree\n");
  EXPECT_EQ(*Logs("k1", 2), "two\nthree\n");
  EXPECT_EQ(*Logs("k1", 0), "one\ntwo\nthree\n");

  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(k.container_id, 0));
  EXPECT_EQ(agent_->Exec("k1", {"true"}, std::chrono::seconds(5)).status().code(),
            Status::Code::kFailedPrecondition);
  EXPECT_EQ(*Logs("k1", 0), "one\ntwo\nthree\n");  // a dead kernel's output stays readable
}

// -------------------------------------------------------------- event hub

TEST_F(AgentTest, LifecycleEventsArePublishedOnTheHub) {
  auto sub = hub_.Subscribe();
  Kernel k = MustCreate(Request("k1"));
  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(k.container_id, 9));
  ASSERT_TRUE(agent_->DeleteKernel("k1").ok());

  std::vector<json> events = Drain(*sub);
  ASSERT_EQ(Types(events), (std::vector<std::string>{"kernel_created", "kernel_started", "kernel_terminated",
                                                     "kernel_removed"}));
  for (const json& e : events) {
    EXPECT_EQ(e["kernel_id"], "k1");
    EXPECT_EQ(e["agent_id"], "a1");
  }
  EXPECT_EQ(events[1]["state"], "RUNNING");
  EXPECT_EQ(events[2]["state"], "TERMINATED");
  EXPECT_EQ(events[2]["exit_code"], 9);
  EXPECT_NE(events[2]["reason"].get<std::string>().find("9"), std::string::npos);
}

// ---------------------------------------------------------- the event stream

// The owner-filtered stream, as the watcher reads it, carries this agent's
// events and none of another owner's.
TEST_F(AgentTest, OwnerFilteredStreamCarriesOnlyThisAgentsEvents) {
  Kernel k = MustCreate(Request("k1"));
  Result<std::string> foreign = engine_.AddContainer("slotd-a2-k1", OwnedLabels("k1", {0}, 256 * kMiB, "a2"));
  ASSERT_TRUE(foreign.ok());
  std::atomic<bool> stop{false};
  std::promise<void> connected, ours_died;
  std::vector<EngineEvent> seen;  // written by the stream thread until ours_died is set
  Status streamed;
  std::thread reader([&] {
    streamed = engine_.StreamEvents(
        {"ai.backend.owner=a1"}, reconcile::kEventActions, [&] { connected.set_value(); },
        [&](const EngineEvent& e) {
          seen.push_back(e);
          agent_->owners().converger.OnEngineEvent(e);
          if (e.id == k.container_id && e.action == "die") ours_died.set_value();
        },
        stop);
  });
  connected.get_future().wait();

  // No ASSERT until the reader is joined.
  EXPECT_TRUE(engine_.KillBehindBack(*foreign, 1).ok());
  EXPECT_TRUE(engine_.KillBehindBack(k.container_id, 4).ok());
  std::future<void> done = ours_died.get_future();
  bool delivered = done.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  stop = true;
  reader.join();

  EXPECT_TRUE(streamed.ok()) << streamed.message();
  ASSERT_TRUE(delivered);
  ASSERT_EQ(seen.size(), 1u);  // events are delivered in order: the foreign ones came before
  EXPECT_EQ(seen[0].attributes.at("exitCode"), "4");
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminated);
  EXPECT_EQ(engine_.CallsFor(*foreign), 0);
}

}  // namespace
}  // namespace slotd::agent_testing
