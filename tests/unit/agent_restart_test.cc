// Restart policies through the agent core and the in-memory FakeEngine: a
// kernel that ends waits in BACKOFF holding its allocation, is started again
// in its own container when its wait is over, records each restart in its
// container's name, stops at its limit, and keeps all of it across a restart
// of the agent. Times are passed in, so nothing sleeps.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "agent/agent.h"
#include "model/label_codec.h"
#include "model/create_request.h"
#include "common/units.h"
#include "resources/device_kinds.h"
#include "testing/fake_engine.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using nlohmann::json;
using Method = FakeEngine::Method;

// Agent "a1": cores 0-4, 2 GiB, a one-second stop timeout.
Config RestartingAgentConfig(const std::string& scratch_root) {
  Config config;
  config.agent.id = "a1";
  config.agent.node = "testnode";
  config.resource.allowed_cores = {0, 1, 2, 3, 4};
  config.resource.allowed_cores_explicit = true;
  config.resource.memory_size = 2 * kGiB;
  config.resource.memory_size_explicit = true;
  config.container.port_range_start = 30000;
  config.container.port_range_end = 30009;
  config.container.stop_timeout = std::chrono::seconds(1);
  config.container.scratch_root = scratch_root;
  config.container.allow_root = true;  // the fake's images run as root
  return config;
}

// Kernel `id` on one core with restart policy `restart`; `extra` adds fields.
CreateRequest RestartingKernel(const std::string& id, json restart, json extra = json::object()) {
  json body = {{"kernel_id", id},
               {"image", FakeEngine::kDefaultImage},
               {"command", json::array({"sleep", "3600"})},
               {"resources", {{"cpu", 1}}},
               {"restart", std::move(restart)}};
  body.update(extra);
  Result<CreateRequest> req = ParseCreateRequest(body);
  EXPECT_TRUE(req.ok()) << req.status().message();
  return *req;
}

class AgentRestartTest : public ::testing::Test {
 protected:
  std::unique_ptr<Agent> NewAgent() {
    auto plugins = MakePlugins(config_, HostFacts{});
    EXPECT_TRUE(plugins.ok()) << plugins.status().message();
    return std::make_unique<Agent>(config_, engine_, std::move(*plugins), hub_);
  }

  Kernel Create(const CreateRequest& request) {
    auto out = agent_->CreateKernel(request);
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? out->kernel : Kernel{};
  }

  Kernel Get(const std::string& id, Agent* agent = nullptr) {
    auto k = (agent ? agent : agent_.get())->GetKernel(id);
    EXPECT_TRUE(k.ok()) << k.status().message();
    return k.ok() ? *k : Kernel{};
  }

  // The kernel's container exits with `code` and the agent hears of it.
  void Crash(const std::string& id, int code) {
    Result<EngineEvent> died = engine_.KillBehindBack(Get(id).container_id, code);
    ASSERT_TRUE(died.ok()) << died.status().message();
    agent_->owners().converger.OnEngineEvent(*died);
  }

  // When the engine says the kernel's container ended, in unix milliseconds.
  int64_t EndedAt(const std::string& id) { return engine_.Peek(Get(id).container_id)->finished_ms; }

  uint64_t UsedCores() const { return agent_->DescribeResources()["cpu"]["used"].get<uint64_t>(); }

  // The types of the events published since the last call.
  std::vector<std::string> NewEvents() {
    std::vector<std::string> types;
    while (auto event = events_->Next(std::chrono::milliseconds(0))) types.push_back(event->body["type"]);
    return types;
  }

  FakeEngine engine_;
  EventHub hub_;
  std::unique_ptr<EventHub::Subscription> events_ = hub_.Subscribe();
  TempTree scratch_{"slotd-restart-scratch"};
  Config config_ = RestartingAgentConfig(scratch_.root());
  std::unique_ptr<Agent> agent_ = NewAgent();
};

TEST_F(AgentRestartTest, ACrashingKernelBacksOffHoldingItsCoresIsStartedAgainInItsOwnContainerAndStopsAtItsLimit) {
  const Kernel created = Create(RestartingKernel(
      "k1", {{"policy", "on-failure"}, {"max", 2}, {"backoff", {{"initial", "2s"}, {"max", "3s"}}}}));
  NewEvents();
  Crash("k1", 1);
  Kernel k = Get("k1");
  EXPECT_EQ(k.state(), KernelState::kBackoff);
  EXPECT_EQ(k.exit_code, 1);
  EXPECT_EQ(k.reason, "exited with code 1");
  EXPECT_EQ(k.restarts, 0);
  const int64_t first_due = EndedAt("k1") + 2'000;
  EXPECT_EQ(k.next_restart_at_ms, first_due);
  EXPECT_EQ(k.ToJson()["state"], "BACKOFF");
  EXPECT_EQ(k.ToJson()["next_restart_at_ms"], first_due);
  EXPECT_EQ(UsedCores(), 1u);  // no other kernel can take its core meanwhile
  EXPECT_EQ(NewEvents(), std::vector<std::string>{"kernel_backoff"});

  EXPECT_EQ(agent_->owners().lifetimes.RestartDue(first_due - 1), first_due);  // not yet
  EXPECT_EQ(Get("k1").state(), KernelState::kBackoff);
  EXPECT_EQ(engine_.CallCount(Method::kStart), 1);

  EXPECT_EQ(agent_->owners().lifetimes.RestartDue(first_due), std::nullopt);
  k = Get("k1");
  EXPECT_EQ(k.state(), KernelState::kRunning);
  EXPECT_EQ(k.restarts, 1);
  EXPECT_EQ(k.container_id, created.container_id);
  EXPECT_EQ(k.allocation, created.allocation);
  EXPECT_EQ(k.exit_code, std::nullopt);
  EXPECT_EQ(k.next_restart_at_ms, std::nullopt);
  EXPECT_EQ(engine_.Peek(k.container_id)->name, ContainerName("a1", "k1", {1, false}));
  EXPECT_EQ(NewEvents(), std::vector<std::string>{"kernel_restarted"});

  Crash("k1", 2);  // the wait doubles, up to its max
  EXPECT_EQ(Get("k1").next_restart_at_ms, EndedAt("k1") + 3'000);
  agent_->owners().lifetimes.RestartDue(EndedAt("k1") + 3'000);
  EXPECT_EQ(Get("k1").restarts, 2);
  EXPECT_EQ(engine_.Peek(created.container_id)->name, ContainerName("a1", "k1", {2, false}));

  Crash("k1", 3);
  k = Get("k1");
  EXPECT_EQ(k.state(), KernelState::kTerminated);
  EXPECT_EQ(k.reason, "restart limit reached");
  EXPECT_EQ(k.exit_code, 3);
  EXPECT_EQ(UsedCores(), 0u);
}

TEST_F(AgentRestartTest, OnFailureKeepsACleanEndAndAlwaysRestartsIt) {
  Create(RestartingKernel("once", {{"policy", "on-failure"}}));
  Create(RestartingKernel("again", {{"policy", "always"}}));
  Crash("once", 0);
  Crash("again", 0);
  EXPECT_EQ(Get("once").state(), KernelState::kTerminated);
  EXPECT_EQ(Get("once").reason, "exited with code 0");
  EXPECT_EQ(Get("again").state(), KernelState::kBackoff);
  // [container] restart-backoff-initial: one second.
  EXPECT_EQ(Get("again").next_restart_at_ms, EndedAt("again") + 1'000);
}

TEST_F(AgentRestartTest, AnAgentRestartedDuringABackoffKeepsTheCountAndTheWaitAndRestartsOnce) {
  Create(RestartingKernel("k1", {{"policy", "always"}, {"backoff", {{"initial", "10s"}}}}));
  Crash("k1", 1);
  agent_->owners().lifetimes.RestartDue(EndedAt("k1") + 10'000);
  ASSERT_EQ(Get("k1").restarts, 1);
  Crash("k1", 1);
  const int64_t due = EndedAt("k1") + 20'000;
  ASSERT_EQ(Get("k1").next_restart_at_ms, due);

  agent_.reset();  // the agent dies; the engine keeps the container, exited, under its new name
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  Kernel k = Get("k1");
  EXPECT_EQ(k.state(), KernelState::kBackoff);
  EXPECT_EQ(k.restarts, 1);
  EXPECT_EQ(k.next_restart_at_ms, due);
  EXPECT_EQ(UsedCores(), 1u);
  const int starts = engine_.CallCount(Method::kStart);
  EXPECT_EQ(agent_->owners().lifetimes.RestartDue(due - 1), due);
  EXPECT_EQ(engine_.CallCount(Method::kStart), starts);
  agent_->owners().lifetimes.RestartDue(due);
  agent_->owners().lifetimes.RestartDue(due + 1);
  EXPECT_EQ(engine_.CallCount(Method::kStart), starts + 1);
  EXPECT_EQ(Get("k1").state(), KernelState::kRunning);
  EXPECT_EQ(Get("k1").restarts, 2);
}

TEST_F(AgentRestartTest, ADeleteOrARunOutLifetimeWinsOverABackoff) {
  Create(RestartingKernel("deleted", {{"policy", "always"}}));
  Create(RestartingKernel("expired", {{"policy", "always"}}, {{"max_lifetime", "1h"}}));
  Crash("deleted", 1);
  Crash("expired", 1);
  ASSERT_TRUE(agent_->DeleteKernel("deleted").ok());
  EXPECT_EQ(agent_->GetKernel("deleted").status().code(), Status::Code::kNotFound);

  const Kernel expired = Get("expired");
  agent_->owners().lifetimes.StopExpired(*expired.deadline);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(Get("expired").state(), KernelState::kTerminated);
  EXPECT_EQ(Get("expired").reason, "lifetime exceeded");
  EXPECT_EQ(agent_->owners().lifetimes.RestartDue(expired.deadline.value() * 1000 + 60'000), std::nullopt);
  EXPECT_EQ(Get("expired").state(), KernelState::kTerminated);
  EXPECT_EQ(UsedCores(), 0u);
}

TEST_F(AgentRestartTest, ARestartThatCannotStartCountsAsAnEnd) {
  Create(RestartingKernel("k1", {{"policy", "on-failure"}, {"max", 2}}));
  Crash("k1", 1);
  const int64_t due = *Get("k1").next_restart_at_ms;
  engine_.FailNext(Method::kRename, Status::Unavailable("engine restarting"));
  const int64_t now = due + 5;
  agent_->owners().lifetimes.RestartDue(now);
  Kernel k = Get("k1");
  EXPECT_EQ(k.state(), KernelState::kBackoff);  // nothing was recorded: the same count, waiting again
  EXPECT_EQ(k.restarts, 0);
  EXPECT_EQ(k.next_restart_at_ms, now + 1'000);
  EXPECT_NE(k.reason.find("restart failed: recording the restart"), std::string::npos) << k.reason;

  engine_.FailNext(Method::kStart, Status::NotFound("no such image"));
  agent_->owners().lifetimes.RestartDue(*k.next_restart_at_ms);
  k = Get("k1");
  EXPECT_EQ(k.state(), KernelState::kBackoff);
  EXPECT_EQ(k.restarts, 1);  // renamed, so counted
  EXPECT_EQ(k.reason, "restart failed: no such image");

  engine_.FailNext(Method::kStart, Status::NotFound("no such image"));
  agent_->owners().lifetimes.RestartDue(*k.next_restart_at_ms);
  EXPECT_EQ(Get("k1").state(), KernelState::kTerminated);
  EXPECT_EQ(Get("k1").reason, "restart limit reached");
  EXPECT_EQ(UsedCores(), 0u);
}

TEST_F(AgentRestartTest, AWarningIsSentOnceBeforeTheLifetimeEndsAndAnAgentRestartDoesNotRepeatIt) {
  const Kernel k = Create(RestartingKernel("k1", {{"policy", "never"}},
                                           {{"max_lifetime", "1h"}, {"warn_before", {{"signal", "USR1"}, {"before", "5m"}}}}));
  NewEvents();
  agent_->owners().lifetimes.Warn(*k.deadline - 301);  // not yet
  EXPECT_EQ(engine_.CallCount(Method::kKill), 0);
  agent_->owners().lifetimes.Warn(*k.deadline - 300);
  EXPECT_EQ(engine_.CallCount(Method::kKill), 1);
  EXPECT_TRUE(Get("k1").warned);
  EXPECT_EQ(engine_.Peek(k.container_id)->name, ContainerName("a1", "k1", {0, true}));
  EXPECT_EQ(NewEvents(), std::vector<std::string>{"kernel_warned"});
  agent_->owners().lifetimes.Warn(*k.deadline - 100);
  EXPECT_EQ(engine_.CallCount(Method::kKill), 1) << "once";

  agent_.reset();
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  EXPECT_TRUE(Get("k1").warned);
  agent_->owners().lifetimes.Warn(*k.deadline - 10);
  EXPECT_EQ(engine_.CallCount(Method::kKill), 1) << "not again after a restart of the agent";
}

TEST_F(AgentRestartTest, ADrainSignalsNoKernelBeforeItsDeadlineButThoseThatAskedForAWarningAndStopsTheRestAtIt) {
  Create(RestartingKernel("warned", {{"policy", "always"}}, {{"warn_before", {{"signal", "USR1"}, {"before", "1m"}}}}));
  Create(RestartingKernel("plain", {{"policy", "never"}}));
  Create(RestartingKernel("waiting", {{"policy", "always"}}));
  Crash("waiting", 1);
  ASSERT_EQ(Get("waiting").state(), KernelState::kBackoff);

  // Without a deadline a drain leaves its kernels alone, however long it lasts.
  ASSERT_TRUE(agent_->SetDraining(true).ok());
  constexpr int64_t kYearLater = 1'800'000'000 + 365 * 86400;
  agent_->owners().lifetimes.Warn(kYearLater);
  agent_->owners().lifetimes.StopExpired(kYearLater);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(engine_.CallCount(Method::kKill), 0);
  EXPECT_EQ(engine_.CallCount(Method::kStop), 0);
  EXPECT_EQ(Get("plain").state(), KernelState::kRunning);

  Result<Agent::Drain> drain = agent_->SetDraining(true, std::chrono::minutes(30));
  ASSERT_TRUE(drain.ok()) << drain.status().message();
  ASSERT_TRUE(drain->deadline);
  const int64_t deadline = *drain->deadline;
  for (const int64_t now : {deadline - 1800, deadline - 600, deadline - 61}) {
    agent_->owners().lifetimes.Warn(now);
    agent_->owners().lifetimes.StopExpired(now);
    agent_->owners().ends.WaitForStops();
  }
  EXPECT_EQ(engine_.CallCount(Method::kKill), 0) << "no kernel is signalled while the drain's deadline is far";
  EXPECT_EQ(engine_.CallCount(Method::kStop), 0);
  EXPECT_FALSE(Get("plain").warned);
  EXPECT_FALSE(Get("warned").warned);
  agent_->owners().lifetimes.Warn(deadline - 60);
  EXPECT_EQ(engine_.CallCount(Method::kKill), 1) << "USR1, its warn_before ahead of the deadline";
  EXPECT_TRUE(Get("warned").warned);
  EXPECT_FALSE(Get("plain").warned) << "a kernel that did not ask is not warned";
  agent_->owners().lifetimes.Warn(deadline - 1);
  EXPECT_EQ(engine_.CallCount(Method::kKill), 1);

  // The fake engine ends a container on any signal: a relist sees the
  // warned one ended, and under the drain it is not restarted, whatever
  // its policy; nor is the one waiting in BACKOFF.
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_EQ(Get("warned").state(), KernelState::kTerminated);
  EXPECT_EQ(agent_->owners().lifetimes.RestartDue(EndedAt("waiting") + 3'600'000), std::nullopt);
  EXPECT_EQ(Get("waiting").state(), KernelState::kBackoff);

  agent_->owners().lifetimes.StopExpired(deadline - 1);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(Get("plain").state(), KernelState::kRunning);
  EXPECT_EQ(Get("waiting").state(), KernelState::kBackoff);
  EXPECT_EQ(engine_.CallCount(Method::kStop), 0);
  agent_->owners().lifetimes.StopExpired(deadline);
  agent_->owners().ends.WaitForStops();
  for (const char* id : {"plain", "waiting"}) {
    EXPECT_EQ(Get(id).state(), KernelState::kTerminated) << id;
    EXPECT_EQ(Get(id).reason, "drained") << id;
  }
  EXPECT_FALSE(Get("plain").warned);
  EXPECT_EQ(UsedCores(), 0u);
}

TEST_F(AgentRestartTest, AnIdleKernelIsWarnedAndStoppedWhileABusyOneAndOneWithAnExecAreKept) {
  const json idle = {{"idle", {{"for", "10m"}, {"cpu_below", 0.05}, {"gpu_below", 0.10}}}};
  const Kernel sleepy = Create(RestartingKernel("sleepy", {{"policy", "always"}},
                                                {{"idle", idle["idle"]}, {"warn_before", {{"signal", "USR1"}, {"before", "1m"}}}}));
  const Kernel busy = Create(RestartingKernel("busy", {{"policy", "never"}}, idle));
  const Kernel shell = Create(RestartingKernel("shell", {{"policy", "never"}}, idle));
  const Kernel plain = Create(RestartingKernel("plain", {{"policy", "never"}}));  // [container] idle-for is 0: never idle
  const Kernel trainer = Create(RestartingKernel("trainer", {{"policy", "never"}}, idle));  // its GPU is busy
  NewEvents();
  constexpr int64_t kT0 = 1'800'000'000'000;
  auto sweep = [&](int64_t at_ms) {
    agent_->owners().lifetimes.NoteActivity({{"sleepy", sleepy.container_id, 1.0, std::nullopt, at_ms},
                          {"busy", busy.container_id, 60.0, std::nullopt, at_ms},
                          {"shell", shell.container_id, 0.0, std::nullopt, at_ms},
                          {"plain", plain.container_id, 0.0, std::nullopt, at_ms},
                          {"trainer", trainer.container_id, 0.5, 10.0, at_ms}});  // 10 %: at the mark, not below
  };
  ASSERT_TRUE(agent_->ExecInteractive("shell", {"sh"}, 24, 80).ok());  // open: not idle
  sweep(kT0);
  EXPECT_EQ(Get("sleepy").idle_since_ms, kT0);
  EXPECT_EQ(Get("busy").idle_since_ms, std::nullopt);
  EXPECT_EQ(Get("shell").idle_since_ms, std::nullopt);
  EXPECT_EQ(Get("plain").idle_since_ms, std::nullopt);
  EXPECT_EQ(Get("trainer").idle_since_ms, std::nullopt);
  EXPECT_EQ(NewEvents(), std::vector<std::string>{"kernel_idle"});
  sweep(kT0 + 1000);
  EXPECT_EQ(Get("sleepy").idle_since_ms, kT0) << "the window goes on";

  agent_->owners().lifetimes.Warn(kT0 / 1000 + 600 - 61);
  EXPECT_EQ(engine_.CallCount(Method::kKill), 0);
  agent_->owners().lifetimes.Warn(kT0 / 1000 + 600 - 60);
  EXPECT_EQ(engine_.CallCount(Method::kKill), 1) << "its warn_before, a minute before the window ends";
  agent_->owners().lifetimes.Warn(kT0 / 1000 + 600 - 30);
  EXPECT_EQ(engine_.CallCount(Method::kKill), 1) << "once";

  agent_->owners().lifetimes.StopExpired(kT0 / 1000 + 599);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(Get("sleepy").state(), KernelState::kRunning);
  agent_->owners().lifetimes.StopExpired(kT0 / 1000 + 600);
  agent_->owners().ends.WaitForStops();
  EXPECT_EQ(Get("sleepy").state(), KernelState::kTerminated);
  EXPECT_EQ(Get("sleepy").reason, "idle");
  EXPECT_EQ(Get("busy").state(), KernelState::kRunning);
  EXPECT_EQ(Get("shell").state(), KernelState::kRunning);
  EXPECT_EQ(Get("plain").state(), KernelState::kRunning);
  EXPECT_EQ(Get("trainer").state(), KernelState::kRunning);
}

TEST_F(AgentRestartTest, AnUnhealthyKernelWhoseStopFailedIsStoppedAgainAtItsNextFailedCheck) {
  const Kernel created = Create(RestartingKernel(
      "k1", {{"policy", "never"}}, {{"health", {{"exec", {"true"}}, {"failures", 1}, {"on_unhealthy", "stop"}}}}));
  NewEvents();
  engine_.FailNext(Method::kStop, Status::Internal("the engine is busy"));
  agent_->owners().health.RecordCheck("k1", created.container_id, {false, "exit code 1"}, false);
  agent_->owners().ends.WaitForStops();
  Kernel k = Get("k1");
  EXPECT_EQ(k.state(), KernelState::kRunning);  // its stop failed
  ASSERT_TRUE(k.health);
  EXPECT_EQ(k.health->status, HealthStatus::kUnhealthy);
  EXPECT_EQ(NewEvents(), std::vector<std::string>{"kernel_unhealthy"});

  agent_->owners().health.RecordCheck("k1", created.container_id, {false, "exit code 1"}, false);
  agent_->owners().ends.WaitForStops();
  k = Get("k1");
  EXPECT_EQ(k.state(), KernelState::kTerminated);
  EXPECT_EQ(k.reason, "unhealthy");
  EXPECT_EQ(NewEvents(), std::vector<std::string>{"kernel_terminated"});  // announced unhealthy once
  EXPECT_EQ(UsedCores(), 0u);
}

TEST_F(AgentRestartTest, TheStopContractGoesToTheEngineAndAPreStopCommandRunsFirst) {
  config_.container.stop_timeout = std::chrono::seconds(30);
  agent_ = NewAgent();
  const Kernel k = Create(RestartingKernel("k1", {{"policy", "never"}},
                                           {{"stop_signal", "USR1"}, {"stop_timeout", "20s"},
                                            {"pre_stop", {"sh", "-c", "echo bye"}}}));
  std::optional<ContainerSpec> spec = engine_.SpecOf(k.container_id);
  ASSERT_TRUE(spec);
  EXPECT_EQ(spec->stop_signal, "SIGUSR1");
  EXPECT_EQ(spec->stop_timeout_s, 20);
  EXPECT_TRUE(spec->init);
  ASSERT_TRUE(agent_->DeleteKernel("k1").ok());
  EXPECT_EQ(engine_.CallCount(Method::kExec), 1);

  Result<Agent::CreateOutcome> refused = agent_->CreateKernel(
      RestartingKernel("k2", {{"policy", "never"}}, {{"stop_timeout", "31s"}}));
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("[container] stop-timeout = \"30s\""), std::string::npos)
      << refused.status().message();
  refused = agent_->CreateKernel(RestartingKernel("k3", {{"policy", "always"}, {"max", 11}}));
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("[container] restart-max = 10"), std::string::npos)
      << refused.status().message();
}

}  // namespace
}  // namespace slotd
