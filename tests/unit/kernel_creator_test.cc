// Creating a kernel (KernelCreator, through the Agent): what a kernel gets
// and how its container is labelled, all or nothing, its scratch, what a
// request may not ask, and repeats of a create.
#include "unit/agent_fixture.h"

namespace slotd::agent_testing {
namespace {

// ---------------------------------------------------------------------- create

TEST_F(AgentTest, CreateAllocatesAndLabelsTheContainer) {
  Result<Agent::CreateOutcome> out = agent_->CreateKernel(
      Request("k1", {{"cpu", 2}, {"mem", "256m"}},
              {{"session_id", "s1"}, {"env", {{"FOO", "bar"}}}, {"ports", json::array({8080})},
               {"labels", {{"team", "vision"}}}}));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_TRUE(out->created);
  const Kernel& k = out->kernel;
  EXPECT_EQ(k.state(), KernelState::kRunning);
  EXPECT_EQ(k.allocation.cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(k.allocation.mem_bytes, 256 * kMiB);
  ASSERT_EQ(k.allocation.ports.size(), 1u);
  EXPECT_EQ(k.allocation.ports[0].container_port, 8080);
  EXPECT_EQ(k.allocation.ports[0].host_port, 30000);

  std::optional<ContainerInfo> info = engine_.Peek(k.container_id);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->name, ContainerName("a1", "k1"));
  EXPECT_TRUE(info->running);
  EXPECT_EQ(info->labels.at("ai.backend.owner"), "a1");
  EXPECT_EQ(info->labels.at("ai.backend.agent-id"), "a1");
  EXPECT_EQ(info->labels.at("ai.backend.kernel-id"), "k1");
  EXPECT_EQ(info->labels.at("ai.backend.session-id"), "s1");
  EXPECT_EQ(info->labels.at("team"), "vision");
  EXPECT_EQ(json::parse(info->labels.at("ai.backend.allocations")), k.allocation.ToJson());

  std::optional<ContainerSpec> spec = engine_.SpecOf(k.container_id);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->image, FakeEngine::kDefaultImage);
  EXPECT_EQ(spec->command, (std::vector<std::string>{"sleep", "3600"}));
  EXPECT_EQ(spec->cpuset_cpus, "0-1");
  EXPECT_EQ(spec->memory_bytes, static_cast<int64_t>(256 * kMiB));
  ASSERT_EQ(spec->ports.size(), 1u);
  EXPECT_EQ(spec->ports[0].host_port, 30000);
  EXPECT_EQ(spec->network_mode, "none");
  for (const char* var : {"FOO=bar", "SLOTD_KERNEL_ID=k1", "SLOTD_AGENT_ID=a1"})
    EXPECT_NE(std::find(spec->env.begin(), spec->env.end(), var), spec->env.end()) << var;

  EXPECT_EQ(Used("cpu"), 2u);
  EXPECT_EQ(Used("mem"), 256 * kMiB);
  EXPECT_EQ(Used("ports"), 1u);
  auto listed = agent_->GetKernel("k1");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->container_id, k.container_id);
}

TEST_F(AgentTest, KernelsGetDisjointCores) {
  Kernel a = MustCreate(Request("k1", {{"cpu", 2}}));
  Kernel b = MustCreate(Request("k2", {{"cpu", 2}}));
  EXPECT_EQ(a.allocation.cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(b.allocation.cores, (std::vector<int>{2, 3}));
  EXPECT_EQ(engine_.SpecOf(b.container_id)->cpuset_cpus, "2-3");
}

TEST_F(AgentTest, EngineCreateFailureLeavesNothingAllocated) {
  engine_.FailNext(Method::kCreate, Status::Unavailable("engine unreachable"));
  auto out = agent_->CreateKernel(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kUnavailable);
  ExpectNothingHeld();
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(engine_.ContainerCount(), 0u);

  // The id is free again: the same request now succeeds.
  auto again = agent_->CreateKernel(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->created);
}

TEST_F(AgentTest, EngineStartFailureRemovesTheContainerAndFreesEverything) {
  engine_.FailNext(Method::kStart, Status::Internal("error gathering device information"));
  auto out = agent_->CreateKernel(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kInternal);
  EXPECT_NE(out.status().message().find("error gathering device information"), std::string::npos);
  EXPECT_EQ(engine_.CallCount(Method::kRemove), 1);
  EXPECT_EQ(engine_.ContainerCount(), 0u);
  ExpectNothingHeld();
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);

  auto again = agent_->CreateKernel(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->kernel.allocation.cores, (std::vector<int>{0, 1}));
}

TEST_F(AgentTest, UnknownImageIsNotFoundNamingTheImage) {
  CreateRequest req = Request("k1");
  req.image = ParseImageRef("nope/missing:1");
  auto out = agent_->CreateKernel(req);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kNotFound);
  EXPECT_NE(out.status().message().find("nope/missing:1"), std::string::npos) << out.status().message();
  ExpectNothingHeld();
}

TEST_F(AgentTest, OverCapacityIsResourceExhaustedAndTakesNothing) {
  MustCreate(Request("k1", {{"cpu", 3}, {"mem", "256m"}}));

  auto cpu = agent_->CreateKernel(Request("k2", {{"cpu", 2}}));
  ASSERT_FALSE(cpu.ok());
  EXPECT_EQ(cpu.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(cpu.status().message(), "insufficient cpu: requested 2, free 1 of 4");

  // Cores are taken before memory: a memory shortfall must give the core back.
  auto mem = agent_->CreateKernel(Request("k3", {{"cpu", 1}, {"mem", "1g"}}));
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(mem.status().message(), "insufficient mem: requested 1g, free 768m of 1g");

  EXPECT_EQ(Used("cpu"), 3u);
  EXPECT_EQ(Used("mem"), 256 * kMiB);
  EXPECT_EQ(engine_.CallCount(Method::kCreate), 1);
  EXPECT_EQ(agent_->GetKernel("k2").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(agent_->GetKernel("k3").status().code(), Status::Code::kNotFound);
}

TEST_F(AgentTest, AnImagesUserIsReadFromItsFilesOncePerImage) {
  config_.container.allow_root = false;
  agent_ = NewAgent();
  engine_.AddImage("named", "work");
  engine_.SetImageFile("named", "/etc/passwd", "root:x:0:0::/root:/bin/sh\nwork:x:1000:1001::/home/work:/bin/sh\n");
  engine_.AddImage("toor", "toor");
  engine_.SetImageFile("toor", "/etc/passwd", "toor:x:0:0::/root:/bin/sh\n");
  engine_.AddImage("number", "1001:1001");
  engine_.SetImageFile("number", "/etc/passwd", "1001:x:0:0:a user named by a number:/:/bin/sh\n");

  const Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}}, {{"image", "named"}}));
  MustCreate(Request("k2", {{"cpu", 1}}, {{"image", "named"}}));
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kReadFile), 2);  // its passwd and group, once
  // The engine is given numbers, never the name the kernel's files could
  // later make root; the labels record them; the container the files were
  // read from is gone.
  EXPECT_EQ(engine_.SpecOf(k1.container_id)->user, "1000:1001");
  EXPECT_EQ(engine_.SpecOf(k1.container_id)->labels.at(label::kRunAs), "1000:1001");
  EXPECT_EQ(k1.run_as, (RunAs{1000, 1001}));
  EXPECT_EQ(engine_.ContainerCount(), 2u);

  // A user found to be root is refused each time, from the cache too; a
  // number is looked up as well, since a passwd line may be named by it.
  for (const char* image : {"toor", "number"}) {
    for (const std::string id : {"first", "second"}) {
      SCOPED_TRACE(image + (" " + id));
      Result<Agent::CreateOutcome> root = agent_->CreateKernel(Request(image + id, {{"cpu", 1}}, {{"image", image}}));
      ASSERT_FALSE(root.ok());
      EXPECT_EQ(root.status().code(), Status::Code::kPermissionDenied);
      EXPECT_NE(root.status().message().find("runs as root"), std::string::npos) << root.status().message();
    }
  }
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kReadFile), 6);
  EXPECT_EQ(Used("cpu"), 2u);
}

TEST_F(AgentTest, TheContainerGetsTheShmItAsksForOrDockersDefaultCappedAtMem) {
  Kernel plain = MustCreate(Request("k1"));
  EXPECT_EQ(engine_.SpecOf(plain.container_id)->shm_bytes, 64 * kMiB);
  Kernel small = MustCreate(Request("k2", {{"cpu", 1}, {"mem", "16m"}}));
  EXPECT_EQ(engine_.SpecOf(small.container_id)->shm_bytes, 16 * kMiB);
  Kernel asked = MustCreate(Request("k3", {{"cpu", 1}, {"mem", "256m"}, {"shm", "200m"}}));
  EXPECT_EQ(engine_.SpecOf(asked.container_id)->shm_bytes, 200 * kMiB);
  EXPECT_EQ(Used("mem"), (256 + 16 + 256) * kMiB);  // shm is within mem, not added to it
}

// -------------------------------------------------------------------- scratch

TEST_F(AgentTest, EachKernelGetsItsOwnScratchAtHomeWorkUntilItIsDeleted) {
  Kernel k = MustCreate(Request("k1"));
  const std::string dir = scratch_.root() + "/k1";
  const std::vector<Mount> mounts = engine_.SpecOf(k.container_id)->mounts;
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0], (Mount{Mount::Type::kBind, dir, "/home/work", false, 0}));
  EXPECT_TRUE(std::filesystem::is_directory(dir));
  std::ofstream(dir + "/checkpoint") << "epoch 3";

  ASSERT_TRUE(agent_->RestartKernel("k1").ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint"));
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint"));

  ASSERT_TRUE(agent_->DeleteKernel("k1").ok());
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST_F(AgentTest, AFailedCreateLeavesNoScratch) {
  engine_.FailNext(Method::kStart, Status::Internal("error gathering device information"));
  ASSERT_FALSE(agent_->CreateKernel(Request("k1")).ok());
  EXPECT_FALSE(std::filesystem::exists(scratch_.root() + "/k1"));
}

TEST_F(AgentTest, RelistRemovesScratchOfNoKernelAndKeepsThatOfEveryOwnedContainer) {
  Kernel k = MustCreate(Request("k1"));
  Kernel gone = MustCreate(Request("k2"));
  scratch_.Write("leftover/file", "from a kernel deleted while the agent was down");
  scratch_.Write(".slotd-made/leftover", "");
  ASSERT_TRUE(engine_.RemoveBehindBack(gone.container_id).ok());

  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_TRUE(std::filesystem::is_directory(scratch_.root() + "/k1"));
  EXPECT_FALSE(std::filesystem::exists(scratch_.root() + "/k2"));
  EXPECT_FALSE(std::filesystem::exists(scratch_.root() + "/leftover"));
  EXPECT_FALSE(std::filesystem::exists(scratch_.root() + "/.slotd-made/leftover"));
}

TEST_F(AgentTest, TheScratchCollectorRemovesOnlyWhatTheAgentMade) {
  // What the agent did not make: its own files put there by mistake, or an
  // operator's; names a kernel id could have.
  scratch_.Write("ipc/agent.lock", "");
  scratch_.Write("agent.toml", "[agent]\n");
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_TRUE(std::filesystem::exists(scratch_.root() + "/ipc/agent.lock"));
  EXPECT_TRUE(std::filesystem::exists(scratch_.root() + "/agent.toml"));

  // A kernel's directory made by slotd 0.2.0 (no marker) is the agent's once
  // it sees the kernel, and goes with it.
  Kernel k = MustCreate(Request("k1"));
  std::filesystem::remove(scratch_.root() + "/.slotd-made/k1");
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_TRUE(std::filesystem::exists(scratch_.root() + "/.slotd-made/k1"));
  ASSERT_TRUE(engine_.RemoveBehindBack(k.container_id).ok());
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_FALSE(std::filesystem::exists(scratch_.root() + "/k1"));
  EXPECT_TRUE(std::filesystem::exists(scratch_.root() + "/ipc/agent.lock"));
}

TEST_F(AgentTest, ATmpfsScratchIsSizedByScratchSizeOrTheKernelsMemory) {
  config_.container.scratch_type = ScratchType::kTmpfs;
  agent_ = NewAgent();
  Kernel k = MustCreate(Request("k1", {{"cpu", 1}, {"mem", "128m"}}));
  EXPECT_EQ(engine_.SpecOf(k.container_id)->mounts,
            (std::vector<Mount>{{Mount::Type::kTmpfs, "", "/home/work", false, 128 * kMiB}}));
  EXPECT_FALSE(std::filesystem::exists(scratch_.root() + "/k1"));
  config_.container.scratch_size = 32 * kMiB;
  agent_ = NewAgent();
  Kernel sized = MustCreate(Request("k2"));
  EXPECT_EQ(engine_.SpecOf(sized.container_id)->mounts[0].tmpfs_bytes, 32 * kMiB);
  Kernel asked = MustCreate(Request("k3", {{"cpu", 1}, {"scratch", "48m"}}));
  EXPECT_EQ(engine_.SpecOf(asked.container_id)->mounts[0].tmpfs_bytes, 48 * kMiB);
}

TEST_F(AgentTest, ACreateIsRefusedWhileTheScratchFilesystemIsBelowItsFloorAndKeepsNothing) {
  config_.container.scratch_min_free = ~0ull;  // more than any filesystem has
  agent_ = NewAgent();
  Result<Agent::CreateOutcome> refused = agent_->CreateKernel(Request("k1"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("insufficient scratch space: the filesystem of the scratch root " +
                                            scratch_.root() + " has "),
            std::string::npos)
      << refused.status().message();
  EXPECT_TRUE(agent_->ListKernels().empty());
  ExpectNothingHeld();
  EXPECT_FALSE(std::filesystem::exists(scratch_.root() + "/k1"));
  // tmpfs scratch takes nothing from that filesystem: no floor.
  config_.container.scratch_type = ScratchType::kTmpfs;
  agent_ = NewAgent();
  MustCreate(Request("k1"));
}

TEST_F(AgentTest, AHostdirScratchWithASizeNeedsProjectQuotasOrIsRefusedSayingWhy) {
  const Status quota = ProjectQuotaEnforced(scratch_.root());
  if (quota.ok()) GTEST_SKIP() << "the scratch root enforces project quotas here; the integration test covers it";
  Result<Agent::CreateOutcome> refused = agent_->CreateKernel(Request("k1", {{"cpu", 1}, {"scratch", "64m"}}));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("resources.scratch: this agent cannot limit a kernel's scratch"),
            std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find(quota.message()), std::string::npos) << refused.status().message();
  EXPECT_TRUE(agent_->ListKernels().empty());
}

TEST_F(AgentTest, UnknownDeviceSlotIsInvalidArgumentNamingIt) {
  auto out = agent_->CreateKernel(Request("k1", {{"cpu", 1}, {"mock.device", 1}}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(out.status().message().find("resources.mock.device"), std::string::npos) << out.status().message();
  ExpectNothingHeld();
}

// Every kind's variables are refused, whether or not this agent has that
// kind's plugin (this one has none), and nothing is taken.
TEST_F(AgentTest, EnvThatSelectsDevicesIsRefusedForEveryKind) {
  ASSERT_FALSE(DeviceVariablesSelectingNone().empty());
  for (const auto& [name, none] : DeviceVariablesSelectingNone()) {
    SCOPED_TRACE(name);
    auto out = agent_->CreateKernel(Request("k1", {{"cpu", 1}}, {{"env", {{name, "0"}}}}));
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(out.status().message().rfind("env." + name + ": ", 0), 0u) << out.status().message();
    EXPECT_NE(out.status().message().find("may not be overridden"), std::string::npos) << out.status().message();
  }
  EXPECT_EQ(engine_.CallCount(Method::kCreate), 0);
  ExpectNothingHeld();
}

// A kernel of an agent without device plugins still gets every kind's
// variables, set to select none, so an image's own values reach nothing.
TEST_F(AgentTest, AKernelGetsEveryKindsVariablesSelectingNone) {
  Kernel k = MustCreate(Request("k1"));
  std::optional<ContainerSpec> spec = engine_.SpecOf(k.container_id);
  ASSERT_TRUE(spec.has_value());
  for (const auto& [name, none] : DeviceVariablesSelectingNone()) {
    const std::string entry = name + "=" + none;
    EXPECT_EQ(std::count(spec->env.begin(), spec->env.end(), entry), 1) << entry;
  }
}

TEST_F(AgentTest, RepeatOfTheSameRequestReturnsTheExistingKernel) {
  Kernel first = MustCreate(Request("k1", {{"cpu", 1}, {"mem", "256m"}}));
  auto repeat = agent_->CreateKernel(Request("k1", {{"cpu", 1}, {"mem", uint64_t{268435456}}}));
  ASSERT_TRUE(repeat.ok()) << repeat.status().message();
  EXPECT_FALSE(repeat->created);
  EXPECT_EQ(repeat->kernel.container_id, first.container_id);
  EXPECT_EQ(repeat->kernel.allocation, first.allocation);
  EXPECT_EQ(engine_.CallCount(Method::kCreate), 1);
  EXPECT_EQ(Used("cpu"), 1u);
}

TEST_F(AgentTest, SameIdWithADifferentRequestIsConflict) {
  Kernel first = MustCreate(Request("k1", {{"cpu", 1}}));
  auto other = agent_->CreateKernel(Request("k1", {{"cpu", 2}}));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), Status::Code::kConflict);
  EXPECT_NE(other.status().message().find("k1"), std::string::npos);
  EXPECT_EQ(agent_->GetKernel("k1")->allocation, first.allocation);
  EXPECT_EQ(Used("cpu"), 1u);
  EXPECT_EQ(engine_.CallCount(Method::kCreate), 1);
}

// ----------------------------------------------------------- interleavings

TEST_F(AgentTest, RepeatsOfACreateUnderWayWaitForItsFailureAndShareIt) {
  engine_.HoldNext(Method::kStart);
  engine_.FailNext(Method::kStart, Status::InvalidArgument("exec: \"nope\": executable file not found"));
  Result<Agent::CreateOutcome> first = Status::Internal("not run");
  std::thread creator([&] { first = agent_->CreateKernel(Request("k1")); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kStart));
  EXPECT_EQ(StateOf("k1"), KernelState::kPreparing);

  std::vector<Result<Agent::CreateOutcome>> repeats(9, Status::Internal("not run"));
  std::vector<std::thread> threads;
  for (auto& repeat : repeats) threads.emplace_back([&] { repeat = agent_->CreateKernel(Request("k1")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let them reach the wait; the outcome must not depend on it
  engine_.Release(Method::kStart);
  creator.join();
  for (auto& t : threads) t.join();

  ASSERT_FALSE(first.ok());
  for (const auto& repeat : repeats) {
    ASSERT_FALSE(repeat.ok());
    EXPECT_EQ(repeat.status().code(), first.status().code());
    EXPECT_EQ(repeat.status().message(), first.status().message());
  }
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);
  ExpectNothingHeld();
  EXPECT_EQ(engine_.CallCount(Method::kCreate), 1);
}

TEST_F(AgentTest, RepeatsOfACreateUnderWayShareItsKernelAndOnlyTheFirstCreated) {
  engine_.HoldNext(Method::kStart);
  Result<Agent::CreateOutcome> first = Status::Internal("not run");
  std::thread creator([&] { first = agent_->CreateKernel(Request("k1")); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kStart));
  std::vector<Result<Agent::CreateOutcome>> repeats(5, Status::Internal("not run"));
  std::vector<std::thread> threads;
  for (auto& repeat : repeats) threads.emplace_back([&] { repeat = agent_->CreateKernel(Request("k1")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  engine_.Release(Method::kStart);
  creator.join();
  for (auto& t : threads) t.join();

  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->created);
  for (const auto& repeat : repeats) {
    ASSERT_TRUE(repeat.ok()) << repeat.status().message();
    EXPECT_FALSE(repeat->created);
    EXPECT_EQ(repeat->kernel.state(), KernelState::kRunning);
    EXPECT_EQ(repeat->kernel.container_id, first->kernel.container_id);
  }
  EXPECT_EQ(engine_.CallCount(Method::kCreate), 1);
}

}  // namespace
}  // namespace slotd::agent_testing
