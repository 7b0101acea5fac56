// Converging on the engine (Converger, through the Agent): engine events,
// relists, restore after a crash, races of relists with calls under way, and
// that a container of another owner is never touched.
#include "unit/agent_fixture.h"

namespace slotd::agent_testing {
namespace {

// --------------------------------------------------------------- engine events

TEST_F(AgentTest, DieEventMarksTerminatedWithTheExitCodeAndFreesAtOnce) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  Result<EngineEvent> died = engine_.KillBehindBack(k.container_id, 3);
  ASSERT_TRUE(died.ok());
  EXPECT_FALSE(agent_->owners().converger.OnEngineEvent(*died));

  auto after = agent_->GetKernel("k1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state(), KernelState::kTerminated);
  EXPECT_EQ(after->exit_code, 3);
  EXPECT_FALSE(after->holds_resources);
  ExpectNothingHeld();
  EXPECT_EQ(MustCreate(Request("k2", {{"cpu", 4}})).allocation.cores, (std::vector<int>{0, 1, 2, 3}));
}

TEST_F(AgentTest, DestroyEventForgetsTheKernelAndFreesIt) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  Result<EngineEvent> destroyed = engine_.RemoveBehindBack(k.container_id);
  ASSERT_TRUE(destroyed.ok());
  EXPECT_FALSE(agent_->owners().converger.OnEngineEvent(*destroyed));
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);
  ExpectNothingHeld();
}

// A kernel stored by an agent whose API allowed more (more env variables
// and labels, a longer lifetime) is adopted as it is: the API's limits bound
// what a client may store, never what an agent restores.
TEST_F(AgentTest, AKernelStoredUnderLooserApiLimitsIsAdoptedUnchanged) {
  Kernel kernel;
  kernel.request = Request("k9", {{"cpu", 1}, {"mem", 256 * kMiB}});
  for (int i = 0; i < 1500; ++i) kernel.request.env["V" + std::to_string(i)] = "x";  // the API allows 1024
  for (int i = 0; i < 100; ++i) kernel.request.labels["l" + std::to_string(i)] = "v";  // the API allows 64
  kernel.request.max_lifetime = std::chrono::hours(24 * 400);                        // the API allows 366 days
  kernel.agent_id = "a1";
  kernel.allocation.cores = {2};
  kernel.allocation.mem_bytes = 256 * kMiB;
  const Result<CreateRequest> through_api = ParseCreateRequest(RequestLabel(kernel.request));
  ASSERT_FALSE(through_api.ok()) << "the API's limits are tighter than what was stored";
  ASSERT_TRUE(engine_.AddContainer(ContainerName("a1", "k9"), KernelLabels(kernel)).ok());

  auto agent = NewAgent();
  ASSERT_TRUE(agent->Restore().ok());
  Result<Kernel> adopted = agent->GetKernel("k9");
  ASSERT_TRUE(adopted.ok()) << adopted.status().message();
  EXPECT_EQ(adopted->state(), KernelState::kRunning);
  EXPECT_EQ(RequestLabel(adopted->request), RequestLabel(kernel.request));
  EXPECT_EQ(adopted->request.env.size(), 1500u);
  EXPECT_EQ(adopted->allocation.cores, std::vector<int>{2});
}

TEST_F(AgentTest, EventOfAnUnknownOwnedContainerAsksForARelist) {
  Result<std::string> id = engine_.AddContainer("slotd-a1-k7", OwnedLabels("k7", {1}));
  ASSERT_TRUE(id.ok());
  std::vector<EngineEvent> events = engine_.Events();
  ASSERT_EQ(events.back().action, "start");
  EXPECT_TRUE(agent_->owners().converger.OnEngineEvent(events.back()));
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_EQ(StateOf("k7"), KernelState::kRunning);
}

// The engine's own events of an agent-driven restart reach the agent after
// RestartKernel returned when the event reader lags. Its "die" must not
// give the kernel's cores away: between it and the following "start",
// another create could take them and two containers would share a core.
//
// The die of a restart can reach the agent after RestartKernel returned (the
// event reader lags); the container runs again, so the kernel keeps its cores.
TEST_F(AgentTest, LateDieEventOfARestartDoesNotFreeTheKernel) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  size_t before = engine_.Events().size();
  ASSERT_TRUE(agent_->RestartKernel("k1").ok());
  std::vector<EngineEvent> events = engine_.Events();
  auto die = std::find_if(events.begin() + before, events.end(), [](const auto& e) { return e.action == "die"; });
  ASSERT_NE(die, events.end());

  agent_->owners().converger.OnEngineEvent(*die);
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  EXPECT_EQ(Used("cpu"), 2u);
  auto stolen = agent_->CreateKernel(Request("k2", {{"cpu", 4}}));
  EXPECT_FALSE(stolen.ok()) << "k2 got cores " << stolen->kernel.allocation.ToJson()["cpu"].dump()
                            << " while k1's container runs on " << engine_.SpecOf(k.container_id)->cpuset_cpus;
}

// -------------------------------------------------------------------- relist

TEST_F(AgentTest, FailedListFreesNothing) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  ASSERT_TRUE(engine_.RemoveBehindBack(k.container_id).ok());  // the event is lost
  engine_.FailNext(Method::kList, Status::Unavailable("engine unreachable"));

  Status s = agent_->owners().converger.Relist();
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_FALSE(agent_->EngineReachable());
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  EXPECT_EQ(Used("cpu"), 2u);
}

TEST_F(AgentTest, RelistForgetsAKernelWhoseContainerVanished) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  auto sub = hub_.Subscribe();
  ASSERT_TRUE(engine_.RemoveBehindBack(k.container_id).ok());  // the event is lost

  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_TRUE(agent_->EngineReachable());
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);
  ExpectNothingHeld();
  std::vector<json> events = Drain(*sub);
  ASSERT_EQ(Types(events), (std::vector<std::string>{"kernel_removed"}));
  EXPECT_EQ(events[0]["kernel_id"], "k1");
}

// The API's record of a kernel (KernelRecord, ListKernelRecords) is made
// once per change: what changes nothing (a relist that finds it as it was, a
// reading with nothing new) keeps it, and every change is in the next one.
TEST_F(AgentTest, AKernelsRecordIsKeptUntilItChangesAndAlwaysSaysWhatItIsNow) {
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}}));
  MustCreate(Request("k2", {{"cpu", 1}}));
  auto current = [&](const std::string& id) {
    auto record = agent_->KernelRecord(id);
    auto kernel = agent_->GetKernel(id);
    EXPECT_TRUE(record.ok() && kernel.ok());
    if (record.ok() && kernel.ok())
      EXPECT_EQ(**record, kernel->ToJson().dump(-1, ' ', false, json::error_handler_t::replace)) << id;
    return record.ok() ? *record : nullptr;
  };
  const std::shared_ptr<const std::string> first = current("k1");
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  agent_->owners().health.RecordCgroups({{"k1", k1.container_id, 0, ""}});
  agent_->owners().lifetimes.NoteActivity({{"k1", k1.container_id, 100.0, std::nullopt, 1}});
  EXPECT_EQ(current("k1"), first) << "a relist or a reading that changed nothing made the record again";

  agent_->owners().health.RecordCgroups({{"k1", k1.container_id, 3, ""}});
  const std::shared_ptr<const std::string> after_oom = current("k1");
  EXPECT_NE(after_oom->find("3 processes killed for lack of memory"), std::string::npos) << *after_oom;
  // The engine's word of one more, as its event stream brings it.
  EngineEvent oom{"container", "oom", k1.container_id, {{"ai.backend.owner", "a1"}, {"ai.backend.kernel-id", "k1"}}};
  agent_->owners().converger.OnEngineEvent(oom);
  EXPECT_NE(current("k1")->find("4 processes killed for lack of memory"), std::string::npos) << *current("k1");

  ASSERT_TRUE(engine_.KillBehindBack(k1.container_id, 7).ok());
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_NE(current("k1")->find("\"TERMINATED\""), std::string::npos);
  const std::vector<std::shared_ptr<const std::string>> listed = agent_->ListKernelRecords(/*with_warm=*/false);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0], current("k1"));
  EXPECT_EQ(listed[1], current("k2"));
}

TEST_F(AgentTest, RelistNoticesADeathTheStreamMissed) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  ASSERT_TRUE(engine_.KillBehindBack(k.container_id, 7).ok());  // the event is lost
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  auto after = agent_->GetKernel("k1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state(), KernelState::kTerminated);
  EXPECT_EQ(after->exit_code, 7);
  ExpectNothingHeld();
}

TEST_F(AgentTest, RelistAdoptsAnUnknownRunningOwnedContainerWithItsAllocation) {
  Labels labels = OwnedLabels("k5", {2, 3}, 512 * kMiB);
  Result<std::string> id = engine_.AddContainer("slotd-a1-k5", labels);
  ASSERT_TRUE(id.ok());

  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  auto k = agent_->GetKernel("k5");
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->state(), KernelState::kRunning);
  EXPECT_EQ(k->container_id, *id);
  EXPECT_EQ(k->allocation.ToJson(), json::parse(labels.at("ai.backend.allocations")));
  EXPECT_TRUE(k->holds_resources);
  EXPECT_EQ(Used("cpu"), 2u);
  EXPECT_EQ(Used("mem"), 512 * kMiB);

  EXPECT_EQ(MustCreate(Request("k6", {{"cpu", 2}})).allocation.cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(agent_->CreateKernel(Request("k7", {{"cpu", 1}})).status().code(), Status::Code::kResourceExhausted);
}

TEST_F(AgentTest, RelistAdoptsAnExitedOwnedContainerAsTerminatedHoldingNothing) {
  ASSERT_TRUE(engine_.AddContainer("slotd-a1-k5", OwnedLabels("k5", {2, 3}), /*running=*/false, 2).ok());
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  auto k = agent_->GetKernel("k5");
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->state(), KernelState::kTerminated);
  EXPECT_EQ(k->exit_code, 2);
  EXPECT_FALSE(k->holds_resources);
  ExpectNothingHeld();
}

// A TERMINATED kernel's container started again by someone else while its
// cores went to another kernel, the event lost: the relist must not leave
// the record saying TERMINATED while the container runs on another kernel's
// core. It stops the container and says why.
TEST_F(AgentTest, RelistStopsAKernelRestartedBehindTheBackWhoseCoresAreTaken) {
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}}));
  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(k1.container_id, 0));
  EXPECT_EQ(MustCreate(Request("k2", {{"cpu", 1}})).allocation.cores, k1.allocation.cores);
  ASSERT_TRUE(engine_.Start(k1.container_id).ok());  // `docker start`; the event is lost

  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  agent_->owners().ends.WaitForStops();
  auto k = agent_->GetKernel("k1");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->state(), KernelState::kTerminated);
  EXPECT_NE(k->reason.find("stopped by slotd"), std::string::npos) << k->reason;
  EXPECT_NE(k->reason.find("cpu core 0"), std::string::npos) << k->reason;
  EXPECT_FALSE(engine_.Peek(k1.container_id)->running);
  EXPECT_EQ(Used("cpu"), 1u);
}

// ------------------------------------------------------------- foreign owners

TEST_F(AgentTest, ForeignContainerIsNeverListedAdoptedOrTouched) {
  // Another agent's kernel, on our core 0, under a name that looks like ours.
  Result<std::string> foreign = engine_.AddContainer(ContainerName("a1", "k9"), OwnedLabels("k9", {0}, 256 * kMiB, "a2"));
  ASSERT_TRUE(foreign.ok());

  ASSERT_TRUE(agent_->Restore().ok());
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_TRUE(agent_->ListKernels().empty());
  ExpectNothingHeld();

  // Its events are not ours, even when fed to the agent.
  Result<EngineEvent> died = engine_.KillBehindBack(*foreign, 1);
  ASSERT_TRUE(died.ok());
  EXPECT_FALSE(agent_->owners().converger.OnEngineEvent(*died));
  // An event that claims our owner only prompts a relist, which does not list it.
  EngineEvent spoofed = *died;
  spoofed.action = "start";
  spoofed.attributes["ai.backend.owner"] = "a1";
  EXPECT_TRUE(agent_->owners().converger.OnEngineEvent(spoofed));
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_TRUE(agent_->ListKernels().empty());

  // Creating k9 clashes with its name: a conflict, and the container stays.
  auto clash = agent_->CreateKernel(Request("k9"));
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().code(), Status::Code::kConflict);
  EXPECT_EQ(agent_->DeleteKernel("k9").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(agent_->RestartKernel("k9").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(Logs("k9", 0).status().code(), Status::Code::kNotFound);
  ExpectNothingHeld();

  EXPECT_TRUE(engine_.Peek(*foreign).has_value());
  EXPECT_EQ(engine_.CallsFor(*foreign), 0);
}

// ------------------------------------------------------------------- restore

// The agent never gives a core to two kernels at once, so of two running
// containers claiming one core the newer got it from the agent and the older
// was started again behind its back: the restore keeps the newer and stops
// the older, instead of refusing to start.
TEST_F(AgentTest, RestoreKeepsTheNewerOfTwoRunningContainersClaimingOneCoreAndStopsTheOlder) {
  auto older = engine_.AddContainer("slotd-a1-k1", OwnedLabels("k1", {1}));
  auto newer = engine_.AddContainer("slotd-a1-k2", OwnedLabels("k2", {1}));
  ASSERT_TRUE(older.ok() && newer.ok());

  std::unique_ptr<Agent> agent = NewAgent();
  ASSERT_TRUE(agent->Restore().ok());
  auto k2 = agent->GetKernel("k2");
  ASSERT_TRUE(k2.ok());
  EXPECT_EQ(k2->state(), KernelState::kRunning);
  EXPECT_TRUE(k2->holds_resources);
  auto k1 = agent->GetKernel("k1");
  ASSERT_TRUE(k1.ok());
  EXPECT_EQ(k1->state(), KernelState::kTerminated);
  EXPECT_FALSE(k1->holds_resources);
  EXPECT_NE(k1->reason.find("stopped by slotd"), std::string::npos) << k1->reason;
  EXPECT_NE(k1->reason.find("cpu core 1 is already held by kernel k2"), std::string::npos) << k1->reason;
  EXPECT_FALSE(engine_.Peek(*older)->running);
  EXPECT_TRUE(engine_.Peek(*newer)->running);
  EXPECT_EQ(Used(*agent, "cpu"), 1u);
}

TEST_F(AgentTest, RestoreRefusesACoreOutsideTheAllowList) {
  ASSERT_TRUE(engine_.AddContainer("slotd-a1-k1", OwnedLabels("k1", {6})).ok());
  Status s = NewAgent()->Restore();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kernel k1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cpu core 6"), std::string::npos) << s.message();
}

TEST_F(AgentTest, RestoreFailsWhenTheEngineCannotBeListed) {
  engine_.FailNext(Method::kList, Status::Unavailable("engine unreachable"));
  Status s = agent_->Restore();
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_FALSE(agent_->EngineReachable());
}

// A container as the agent creates it, left created but never started (the
// agent stopped between the two calls); returns its id.
std::string NeverStartedCopyOf(FakeEngine& engine, const Kernel& kernel) {
  std::optional<ContainerSpec> spec = engine.SpecOf(kernel.container_id);
  EXPECT_TRUE(spec.has_value());
  EXPECT_TRUE(engine.RemoveBehindBack(kernel.container_id).ok());
  auto id = engine.Create(*spec);
  EXPECT_TRUE(id.ok()) << id.status().message();
  return id.ok() ? *id : "";
}

TEST_F(AgentTest, RestoreFinishesTheStartOfANeverStartedContainer) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  const std::string id = NeverStartedCopyOf(engine_, k);
  auto agent = NewAgent();
  ASSERT_TRUE(agent->Restore().ok());
  Result<Kernel> adopted = agent->GetKernel("k1");
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ(adopted->state(), KernelState::kRunning);
  EXPECT_FALSE(adopted->exit_code.has_value());
  EXPECT_EQ(adopted->allocation.ToJson(), k.allocation.ToJson());
  EXPECT_TRUE(engine_.Peek(id)->running);
  EXPECT_EQ(Used(*agent, "cpu"), 2u);
}

TEST_F(AgentTest, ANeverStartedContainerThatCannotStartIsReportedAsNeverStartedWithNoExitCode) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  NeverStartedCopyOf(engine_, k);
  engine_.FailNext(Method::kStart, Status::InvalidArgument("exec: \"nope\": executable file not found"));
  auto agent = NewAgent();
  ASSERT_TRUE(agent->Restore().ok());  // the agent starts all the same
  Result<Kernel> adopted = agent->GetKernel("k1");
  ASSERT_TRUE(adopted.ok());
  EXPECT_EQ(adopted->state(), KernelState::kTerminated);
  EXPECT_FALSE(adopted->exit_code.has_value());  // no exit code it never had
  EXPECT_EQ(adopted->reason.rfind("never started: ", 0), 0u) << adopted->reason;
  EXPECT_EQ(Used(*agent, "cpu"), 0u);
}

TEST_F(AgentTest, RestoreFromTheAdmissionsListAdoptsOnlyItsOwnAndListsNoMore) {
  Kernel mine = MustCreate(Request("k1", {{"cpu", 1}}));
  agent_.reset();
  Result<std::vector<ContainerInfo>> every_owner = engine_.List({std::string(label::kOwner)});
  ASSERT_TRUE(every_owner.ok());
  ContainerInfo other = every_owner->front();  // the same kernel, as another agent's
  other.id = "c-other";
  other.labels[std::string(label::kOwner)] = "another-agent";
  every_owner->push_back(other);

  agent_ = NewAgent();
  const int lists = engine_.CallCount(FakeEngine::Method::kList);
  ASSERT_TRUE(agent_->Restore(std::move(*every_owner)).ok());
  EXPECT_EQ(engine_.CallCount(FakeEngine::Method::kList), lists);
  std::vector<Kernel> kernels = agent_->ListKernels();
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0].container_id, mine.container_id);
  EXPECT_EQ(kernels[0].state(), KernelState::kRunning);
  EXPECT_EQ(Used("cpu"), 1u);
}

TEST_F(AgentTest, RestoreAfterACrashRebuildsTheSameKernelsAndAllocations) {
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 2}, {"mem", "512m"}}, {{"ports", json::array({8080})}}));
  Kernel k2 = MustCreate(Request("k2", {{"cpu", 1}}));
  Kernel k3 = MustCreate(Request("k3", {{"cpu", 1}}));
  ASSERT_TRUE(engine_.KillBehindBack(k3.container_id, 5).ok());  // dies while the agent is down
  agent_.reset();

  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  std::vector<Kernel> kernels = agent_->ListKernels();
  ASSERT_EQ(kernels.size(), 3u);
  for (const Kernel& before : {k1, k2}) {
    auto after = agent_->GetKernel(before.id());
    ASSERT_TRUE(after.ok()) << before.id();
    EXPECT_EQ(after->state(), KernelState::kRunning);
    EXPECT_EQ(after->container_id, before.container_id);
    EXPECT_EQ(after->allocation, before.allocation);
    EXPECT_EQ(RequestLabel(after->request), RequestLabel(before.request));
  }
  auto dead = agent_->GetKernel("k3");
  ASSERT_TRUE(dead.ok());
  EXPECT_EQ(dead->state(), KernelState::kTerminated);
  EXPECT_EQ(dead->exit_code, 5);
  EXPECT_EQ(Used("cpu"), 3u);
  EXPECT_EQ(Used("mem"), 512 * kMiB + 256 * kMiB);
  EXPECT_EQ(Used("ports"), 1u);

  // A repeat is still recognised, and the dead kernel's core is free.
  auto repeat = agent_->CreateKernel(k1.request);
  ASSERT_TRUE(repeat.ok());
  EXPECT_FALSE(repeat->created);
  EXPECT_EQ(MustCreate(Request("k4", {{"cpu", 1}})).allocation.cores, k3.allocation.cores);
}

TEST_F(AgentTest, ARelistDuringACreateLeavesThePreparingKernelToTheCreate) {
  engine_.HoldNext(Method::kStart);
  Result<Agent::CreateOutcome> created = Status::Internal("not run");
  std::thread creator([&] { created = agent_->CreateKernel(Request("k1")); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kStart));

  ASSERT_TRUE(agent_->owners().converger.Relist().ok());  // lists the container "created", never started
  EXPECT_EQ(StateOf("k1"), KernelState::kPreparing);
  EXPECT_EQ(Used("cpu"), 1u);
  engine_.Release(Method::kStart);
  creator.join();
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  EXPECT_EQ(engine_.CallCount(Method::kStart), 1);  // the relist did not start it as well
  EXPECT_EQ(Used("cpu"), 1u);
}

TEST_F(AgentTest, AListAnswerOlderThanACreateDoesNotForgetTheNewKernel) {
  engine_.HoldNextAnswer(Method::kList);
  Status relisted = Status::Internal("not run");
  std::thread relister([&] { relisted = agent_->owners().converger.Relist(); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kList));  // its answer: no containers
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  engine_.Release(Method::kList);
  relister.join();
  ASSERT_TRUE(relisted.ok()) << relisted.message();
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  EXPECT_EQ(Used("cpu"), 2u);
  EXPECT_TRUE(engine_.Peek(k.container_id)->running);
}

TEST_F(AgentTest, AListAnswerOlderThanADeleteDoesNotAdoptTheDeletedKernelAgain) {
  MustCreate(Request("k1", {{"cpu", 2}}));
  engine_.HoldNextAnswer(Method::kList);
  Status relisted = Status::Internal("not run");
  std::thread relister([&] { relisted = agent_->owners().converger.Relist(); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kList));  // its answer: k1 running
  ASSERT_TRUE(agent_->DeleteKernel("k1").ok());
  engine_.Release(Method::kList);
  relister.join();
  ASSERT_TRUE(relisted.ok()) << relisted.message();
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);
  ExpectNothingHeld();
}

TEST_F(AgentTest, ARelistAndEventsDuringADeleteLeaveTheKernelToTheDelete) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  const size_t before = engine_.Events().size();
  engine_.HoldNext(Method::kRemove);
  Result<Kernel> deleted = Status::Internal("not run");
  std::thread deleter([&] { deleted = agent_->DeleteKernel("k1"); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kRemove));  // stopped, not yet removed

  const std::vector<EngineEvent> events = engine_.Events();
  for (auto it = events.begin() + before; it != events.end(); ++it) agent_->owners().converger.OnEngineEvent(*it);  // kill, die, stop
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());  // lists it exited
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminating);
  EXPECT_EQ(Used("cpu"), 2u);  // still the delete's to free
  EXPECT_EQ(agent_->DeleteKernel("k1").status().code(), Status::Code::kFailedPrecondition);
  engine_.Release(Method::kRemove);
  deleter.join();
  ASSERT_TRUE(deleted.ok()) << deleted.status().message();
  EXPECT_EQ(deleted->exit_code, FakeEngine::kStopExitCode);
  EXPECT_EQ(agent_->GetKernel("k1").status().code(), Status::Code::kNotFound);
  EXPECT_FALSE(engine_.Peek(k.container_id).has_value());
  ExpectNothingHeld();
}

TEST_F(AgentTest, ADieEventDuringARestartLeavesTheKernelToTheRestart) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  engine_.HoldNext(Method::kRestart);
  Result<Kernel> restarted = Status::Internal("not run");
  std::thread restarter([&] { restarted = agent_->RestartKernel("k1"); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kRestart));

  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(k.container_id, 137));  // its process dies meanwhile
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  EXPECT_EQ(Used("cpu"), 2u);
  EXPECT_FALSE(agent_->CreateKernel(Request("k2", {{"cpu", 4}})).ok());  // its cores are not free
  engine_.Release(Method::kRestart);
  restarter.join();
  ASSERT_TRUE(restarted.ok()) << restarted.status().message();
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  EXPECT_TRUE(engine_.Peek(k.container_id)->running);
  EXPECT_EQ(Used("cpu"), 2u);
}

TEST_F(AgentTest, AContainerStartedBehindTheBackDuringARelistIsStoppedByTheNext) {
  Kernel old = MustCreate(Request("old", {{"cpu", 4}}));
  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(old.container_id, 0));
  Kernel fresh = MustCreate(Request("fresh", {{"cpu", 4}}));  // the same four cores

  engine_.HoldNextAnswer(Method::kList);
  Status relisted = Status::Internal("not run");
  std::thread relister([&] { relisted = agent_->owners().converger.Relist(); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kList));  // its answer: old exited
  ASSERT_TRUE(engine_.Start(old.container_id).ok());  // docker start, its event lost
  engine_.Release(Method::kList);
  relister.join();
  ASSERT_TRUE(relisted.ok()) << relisted.message();
  EXPECT_EQ(StateOf("old"), KernelState::kTerminated);  // as far as that answer knew
  EXPECT_EQ(StateOf("fresh"), KernelState::kRunning);

  ASSERT_TRUE(agent_->owners().converger.Relist().ok());  // this one sees it running on fresh's cores
  agent_->owners().ends.WaitForStops();
  Result<Kernel> stopped = agent_->GetKernel("old");
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->state(), KernelState::kTerminated);
  EXPECT_NE(stopped->reason.find("stopped by slotd"), std::string::npos) << stopped->reason;
  EXPECT_FALSE(engine_.Peek(old.container_id)->running);
  EXPECT_TRUE(engine_.Peek(fresh.container_id)->running);
  EXPECT_EQ(Used("cpu"), 4u);
}

TEST_F(AgentTest, AnOldContainerStartedBehindTheAgentsBackOnAnotherKernelsCoresIsStopped) {
  Kernel old = MustCreate(Request("old", {{"cpu", 4}}));
  agent_->owners().converger.OnEngineEvent(*engine_.KillBehindBack(old.container_id, 0));
  ASSERT_EQ(StateOf("old"), KernelState::kTerminated);
  Kernel fresh = MustCreate(Request("fresh", {{"cpu", 4}}));  // the same four cores

  ASSERT_TRUE(engine_.Start(old.container_id).ok());  // docker start, behind the agent's back
  for (const auto& event : engine_.Events())
    if (event.action == "start" && event.id == old.container_id) agent_->owners().converger.OnEngineEvent(event);
  agent_->owners().ends.WaitForStops();

  Result<Kernel> stopped = agent_->GetKernel("old");
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->state(), KernelState::kTerminated);
  EXPECT_NE(stopped->reason.find("stopped by slotd"), std::string::npos) << stopped->reason;
  EXPECT_NE(stopped->reason.find("held by kernel fresh"), std::string::npos) << stopped->reason;
  EXPECT_FALSE(engine_.Peek(old.container_id)->running);
  EXPECT_EQ(StateOf("fresh"), KernelState::kRunning);
  EXPECT_TRUE(engine_.Peek(fresh.container_id)->running);
  EXPECT_EQ(Used("cpu"), 4u);
  // And a fresh agent (a restart of slotd) starts: nothing to refuse.
  EXPECT_TRUE(NewAgent()->Restore().ok());
}

}  // namespace
}  // namespace slotd::agent_testing
