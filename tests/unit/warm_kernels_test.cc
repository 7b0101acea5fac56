// Warm pools (WarmKernels, through the Agent): kernels made ahead, given once,
// replaced, removed when their pool goes, and a pool that cannot make one.
#include "unit/agent_fixture.h"

namespace slotd::agent_testing {
namespace {

// The kernels of `agent` in `state`, by id.
std::vector<Kernel> InState(const Agent& agent, KernelState state) {
  std::vector<Kernel> kernels;
  for (const Kernel& k : agent.ListKernels())
    if (k.state() == state) kernels.push_back(k);
  return kernels;
}

// A pool "small" of `count` kernels of the fake's image sleeping on 250m and 64m.
PoolConfig SmallPool(int count) {
  PoolConfig pool;
  pool.name = "small";
  pool.image = FakeEngine::kDefaultImage;
  pool.command = {"sleep", "3600"};
  pool.cpu = "250m";
  pool.mem = 64 * kMiB;
  pool.count = count;
  return pool;
}

TEST_F(AgentTest, AWarmPoolsKernelIsGivenToAMatchingCreateOnceAndAdoptedAsGiven) {
  TempTree var("slotd-agent-var");
  config_.agent.var_base_path = var.root();
  config_.pools = {SmallPool(2)};
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  agent_->owners().warm.Fill(std::stop_token());
  const std::vector<Kernel> warm = InState(*agent_, KernelState::kWarm);
  ASSERT_EQ(warm.size(), 2u);
  EXPECT_EQ(warm[0].warm_pool, "small");
  EXPECT_FALSE(warm[0].deadline.has_value());
  EXPECT_EQ(agent_->DescribeResources()["cpu_shared"]["used"], 500);
  EXPECT_EQ(engine_.Peek(warm[0].container_id)->labels.at(label::kWarmPool), "small");
  EXPECT_EQ(engine_.Peek(warm[0].container_id)->labels.at(label::kFormat), "7");
  EXPECT_EQ(agent_->ActiveKernels(), 0);  // no user's yet
  // Full: another round makes nothing.
  const int creates = engine_.CallCount(Method::kCreate);
  agent_->owners().warm.Fill(std::stop_token());
  EXPECT_EQ(engine_.CallCount(Method::kCreate), creates);

  json body = {{"image", FakeEngine::kDefaultImage},
               {"command", {"sleep", "3600"}},
               {"resources", {{"cpu", "250m"}, {"mem", "64m"}}},
               {"session_id", "s1"},
               {"labels", {{"team", "a"}}},
               {"max_lifetime", "1h"}};
  Result<CreateRequest> matching = ParseCreateRequest(body);
  ASSERT_TRUE(matching.ok());
  const Kernel given = MustCreate(*matching);
  EXPECT_EQ(given.state(), KernelState::kRunning);
  EXPECT_EQ(given.id(), warm[0].id());
  EXPECT_EQ(given.container_id, warm[0].container_id);
  EXPECT_EQ(given.request.session_id, "s1");
  EXPECT_EQ(given.request.labels, (std::map<std::string, std::string>{{"team", "a"}}));
  EXPECT_TRUE(given.warm_pool.empty());
  EXPECT_TRUE(given.deadline.has_value());
  EXPECT_EQ(engine_.CallCount(Method::kCreate), creates);  // no container was made for it
  EXPECT_EQ(agent_->ActiveKernels(), 1);
  // The next create gets the other one; the third finds none ready and makes its own.
  const Kernel second = MustCreate(*ParseCreateRequest(body));
  EXPECT_EQ(second.id(), warm[1].id());
  const Kernel third = MustCreate(*ParseCreateRequest(body));
  EXPECT_EQ(engine_.CallCount(Method::kCreate), creates + 1);
  EXPECT_NE(third.id(), warm[0].id());
  EXPECT_NE(third.id(), warm[1].id());
  agent_->owners().warm.Fill(std::stop_token());
  ASSERT_EQ(InState(*agent_, KernelState::kWarm).size(), 2u);

  // A fresh agent (a SIGKILL and a start) adopts the given kernels as given and the warm ones as warm.
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  Result<Kernel> adopted = agent_->GetKernel(given.id());
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ(adopted->state(), KernelState::kRunning);
  EXPECT_EQ(adopted->request, given.request);
  EXPECT_EQ(adopted->created_at, given.created_at);
  EXPECT_EQ(adopted->deadline, given.deadline);
  EXPECT_TRUE(adopted->warm_pool.empty());
  EXPECT_EQ(InState(*agent_, KernelState::kWarm).size(), 2u);
  EXPECT_EQ(InState(*agent_, KernelState::kRunning).size(), 3u);

  // A kernel no pool wants any more (its pool gone) is removed; a given one stays.
  config_.pools.clear();
  config_.pools.push_back(SmallPool(1));
  config_.pools[0].name = "other";
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  agent_->owners().warm.Fill(std::stop_token());
  const std::vector<Kernel> now_warm = InState(*agent_, KernelState::kWarm);
  ASSERT_EQ(now_warm.size(), 1u);
  EXPECT_EQ(now_warm[0].warm_pool, "other");
  EXPECT_EQ(InState(*agent_, KernelState::kRunning).size(), 3u);

  // Deleting a given kernel removes its record.
  ASSERT_TRUE(agent_->DeleteKernel(given.id()).ok());
  struct stat info {};
  EXPECT_NE(::stat((var.root() + "/warm-claims/" + given.id() + ".json").c_str(), &info), 0);
}

// A warm kernel whose container ends is replaced, never given; a drain removes the pool's kernels.
TEST_F(AgentTest, AWarmKernelThatEndsIsReplaced) {
  config_.pools = {SmallPool(1)};
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  agent_->owners().warm.Fill(std::stop_token());
  const std::vector<Kernel> warm = InState(*agent_, KernelState::kWarm);
  ASSERT_EQ(warm.size(), 1u);
  ASSERT_TRUE(engine_.KillBehindBack(warm[0].container_id, 1).ok());
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_EQ(agent_->GetKernel(warm[0].id())->state(), KernelState::kTerminated);
  agent_->owners().warm.Fill(std::stop_token());
  EXPECT_FALSE(agent_->GetKernel(warm[0].id()).ok());  // removed
  const std::vector<Kernel> again = InState(*agent_, KernelState::kWarm);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(again[0].id(), warm[0].id());

  // A drained agent gives none, so it keeps none; an undrain refills the pool.
  ASSERT_TRUE(agent_->SetDraining(true).ok());
  agent_->owners().warm.Fill(std::stop_token());
  EXPECT_TRUE(agent_->ListKernels().empty());
  EXPECT_EQ(agent_->DescribeResources()["cpu_shared"]["used"], 0);
  ASSERT_TRUE(agent_->SetDraining(false).ok());
  agent_->owners().warm.Fill(std::stop_token());
  EXPECT_EQ(InState(*agent_, KernelState::kWarm).size(), 1u);
}

// A create naming a warm kernel's id, with the pool's very request, repeats
// no create: kConflict; the kernel is still given to the next matching create.
TEST_F(AgentTest, ACreateNamingAWarmKernelsIdIsAConflict) {
  config_.pools = {SmallPool(1)};
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  agent_->owners().warm.Fill(std::stop_token());
  const std::vector<Kernel> warm = InState(*agent_, KernelState::kWarm);
  ASSERT_EQ(warm.size(), 1u);
  // The pool's very request, naming the warm kernel's id (and so its session).
  Result<CreateRequest> naming = ParseCreateRequest({{"kernel_id", warm[0].id()},
                                                     {"image", FakeEngine::kDefaultImage},
                                                     {"command", {"sleep", "3600"}},
                                                     {"resources", {{"cpu", "250m"}, {"mem", "64m"}}}});
  ASSERT_TRUE(naming.ok());
  ASSERT_EQ(*naming, warm[0].request);
  Result<Agent::CreateOutcome> stolen = agent_->CreateKernel(*naming);
  EXPECT_EQ(stolen.status().code(), Status::Code::kConflict);
  EXPECT_NE(stolen.status().message().find("kept by warm pool \"small\""), std::string::npos)
      << stolen.status().message();
  Result<CreateRequest> matching = ParseCreateRequest({{"image", FakeEngine::kDefaultImage},
                                                       {"command", {"sleep", "3600"}},
                                                       {"resources", {{"cpu", "250m"}, {"mem", "64m"}}},
                                                       {"session_id", "s1"}});
  ASSERT_TRUE(matching.ok());
  const Kernel given = MustCreate(*matching);
  EXPECT_EQ(given.id(), warm[0].id());
  EXPECT_EQ(given.request.session_id, "s1");
}

// An agent started again without the pool (its [[pool]] entry removed)
// removes the pool's kernels never given, so that what they held is free;
// a given one stays the create's.
TEST_F(AgentTest, WarmKernelsOfAPoolGoneFromTheConfigAreRemovedAtStart) {
  TempTree var("slotd-agent-var");
  config_.agent.var_base_path = var.root();
  config_.pools = {SmallPool(3)};
  config_.pools[0].cpu = "1";  // exclusive cores: three of the four
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  agent_->owners().warm.Fill(std::stop_token());
  const std::vector<Kernel> warm = InState(*agent_, KernelState::kWarm);
  ASSERT_EQ(warm.size(), 3u);
  Result<CreateRequest> matching = ParseCreateRequest({{"image", FakeEngine::kDefaultImage},
                                                       {"command", {"sleep", "3600"}},
                                                       {"resources", {{"cpu", 1}, {"mem", "64m"}}},
                                                       {"session_id", "s1"}});
  ASSERT_TRUE(matching.ok());
  const Kernel given = MustCreate(*matching);
  ASSERT_EQ(given.warm_pool, "");
  EXPECT_EQ(agent_->CreateKernel(Request("big", {{"cpu", 2}})).status().code(), Status::Code::kResourceExhausted);

  config_.pools.clear();
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  EXPECT_EQ(agent_->ListKernels().size(), 1u);
  EXPECT_EQ(agent_->GetKernel(given.id())->state(), KernelState::kRunning);
  for (const Kernel& k : warm) {
    if (k.id() == given.id()) continue;
    EXPECT_FALSE(agent_->GetKernel(k.id()).ok()) << k.id();
    EXPECT_FALSE(engine_.Peek(k.container_id).has_value()) << k.id();
  }
  EXPECT_EQ(Used("cpu"), 1u);
  MustCreate(Request("big", {{"cpu", 3}}));
}

// A pool whose image the engine lacks takes nothing: no kernel reserved
// (no event), no exclusive core taken, so no shared kernel's cpuset moves; it
// says why, and is tried again 10 s later, twice as long after each failure
// in a row, at most 5 minutes.
TEST_F(AgentTest, APoolWhoseImageIsMissingHoldsNothingSaysWhyAndBacksOff) {
  FakeClock clock;
  config_.container.auto_pull = PullPolicy::kNone;
  config_.pools = {SmallPool(1)};
  config_.pools[0].image = "slotd-test/missing:1";
  config_.pools[0].cpu = "1";  // an exclusive core: taken, it would leave the shared kernels' cpusets
  auto plugins = MakePlugins(config_, HostFacts{});
  ASSERT_TRUE(plugins.ok()) << plugins.status().message();
  auto agent = std::make_unique<Agent>(config_, engine_, std::move(*plugins), hub_, clock);  // after clock
  ASSERT_TRUE(agent->Restore().ok());
  MustCreate(Request("shared", {{"cpu", "250m"}}), agent.get());
  const int updates = engine_.CallCount(Method::kUpdate);
  auto sub = hub_.Subscribe();
  agent->owners().warm.Fill(std::stop_token());
  EXPECT_EQ(Types(Drain(*sub)), std::vector<std::string>{});
  EXPECT_EQ(engine_.CallCount(Method::kUpdate), updates);
  EXPECT_EQ(Used(*agent, "cpu"), 0u);
  Agent::PoolCount count = agent->CountPools().at("small");
  EXPECT_NE(count.trouble.find("image slotd-test/missing:1 not found on this node's engine"), std::string::npos)
      << count.trouble;
  EXPECT_NE(count.trouble.find("slotctl pull slotd-test/missing:1"), std::string::npos) << count.trouble;
  EXPECT_EQ(count.retry_at, clock.UnixSeconds() + 10);

  for (int64_t delay : {20, 40, 80, 160, 300, 300}) {
    const int64_t due = agent->CountPools().at("small").retry_at;
    clock.Advance(std::chrono::seconds(due - clock.UnixSeconds() - 1));
    const int looks = engine_.CallCount(Method::kImages);
    agent->owners().warm.Fill(std::stop_token());
    EXPECT_EQ(engine_.CallCount(Method::kImages), looks) << "tried before " << due;
    clock.Advance(std::chrono::seconds(1));
    agent->owners().warm.Fill(std::stop_token());
    EXPECT_EQ(engine_.CallCount(Method::kImages), looks + 1) << "not tried at " << due;
    EXPECT_EQ(agent->CountPools().at("small").retry_at, clock.UnixSeconds() + delay);
  }
  EXPECT_EQ(Types(Drain(*sub)), std::vector<std::string>{});
  EXPECT_EQ(engine_.CallCount(Method::kUpdate), updates);

  // The image loaded, the next try makes the kernel and the reason is gone.
  engine_.AddImage("slotd-test/missing:1");
  clock.Advance(std::chrono::seconds(300));
  agent->owners().warm.Fill(std::stop_token());
  EXPECT_EQ(InState(*agent, KernelState::kWarm).size(), 1u);
  EXPECT_EQ(agent->CountPools().at("small").trouble, "");
}

}  // namespace
}  // namespace slotd::agent_testing
