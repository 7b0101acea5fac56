// The agent core through the in-memory FakeEngine: what a kernel gets and how
// its container is labelled, all-or-nothing creation, convergence on engine
// events and relists, restore after a crash, and that a container of another
// owner is never touched. The fake is synchronous, so every test drives the
// core directly (OnEngineEvent, Relist) instead of waiting for threads.
#include "agent/agent.h"

#include <gtest/gtest.h>

#include "model/label_codec.h"
#include "model/create_request.h"
#include "common/units.h"
#include "testing/collect_output.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "node/scratch_limits.h"
#include "resources/device_kinds.h"
#include "testing/fake_clock.h"
#include "testing/fake_engine.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

using nlohmann::json;
using Method = FakeEngine::Method;


// Agent "a1": cores 0-3, 1 GiB, host ports 30000-30009.
Config TestConfig() {
  Config config;
  config.agent.id = "a1";
  config.agent.node = "testnode";
  config.resource.allowed_cores = {0, 1, 2, 3};
  config.resource.allowed_cores_explicit = true;
  config.resource.memory_size = kGiB;
  config.resource.memory_size_explicit = true;
  config.container.port_range_start = 30000;
  config.container.port_range_end = 30009;
  config.container.stop_timeout = std::chrono::seconds(1);
  return config;
}

// A create request for kernel `id` running `sleep 3600`; `extra` adds or
// replaces top-level fields of the body.
CreateRequest Request(const std::string& id, json resources = {{"cpu", 1}}, json extra = json::object()) {
  json body = {{"kernel_id", id},
               {"image", FakeEngine::kDefaultImage},
               {"command", json::array({"sleep", "3600"})},
               {"resources", std::move(resources)}};
  body.update(extra);
  Result<CreateRequest> req = ParseCreateRequest(body);
  EXPECT_TRUE(req.ok()) << req.status().message();
  return *req;
}

// The labels `agent_id`'s agent would have put on kernel `id` holding `cores` and `mem`.
Labels OwnedLabels(const std::string& id, std::vector<int> cores, uint64_t mem = 256 * kMiB,
                   const std::string& agent_id = "a1") {
  Kernel kernel;
  kernel.request = Request(id, {{"cpu", static_cast<int>(cores.size())}, {"mem", mem}});
  kernel.agent_id = agent_id;
  kernel.allocation.cores = std::move(cores);
  kernel.allocation.mem_bytes = mem;
  return KernelLabels(kernel);
}

// Every event queued on `sub` now.
std::vector<json> Drain(EventHub::Subscription& sub) {
  std::vector<json> events;
  while (auto event = sub.Next(std::chrono::milliseconds(0))) events.push_back(std::move(event->body));
  return events;
}

// The "type" of each event.
std::vector<std::string> Types(const std::vector<json>& events) {
  std::vector<std::string> types;
  for (const json& e : events) types.push_back(e["type"]);
  return types;
}

class AgentTest : public ::testing::Test {
 protected:
  // A fresh agent over the same engine and hub, as after a restart of slotd.
  std::unique_ptr<Agent> NewAgent() {
    auto plugins = MakePlugins(config_, HostFacts{});
    EXPECT_TRUE(plugins.ok()) << plugins.status().message();
    return std::make_unique<Agent>(config_, engine_, std::move(*plugins), hub_);
  }

  // Creates kernel `request`, which must succeed.
  Kernel MustCreate(const CreateRequest& request, Agent* agent = nullptr) {
    auto out = (agent ? agent : agent_.get())->CreateKernel(request);
    EXPECT_TRUE(out.ok()) << request.kernel_id << ": " << out.status().message();
    return out.ok() ? out->kernel : Kernel{};
  }

  // What `agent` reports as used of `slot` ("cpu", "mem", "ports").
  static uint64_t Used(const Agent& agent, const std::string& slot) {
    return agent.DescribeResources()[slot]["used"].get<uint64_t>();
  }
  uint64_t Used(const std::string& slot) const { return Used(*agent_, slot); }

  // The whole output StreamLogs gives for the kernel.
  Result<std::string> Logs(const std::string& kernel_id, int tail) {
    return CollectOutput([&](const auto& on_output, const auto& stop) {
      return agent_->StreamLogs(kernel_id, tail, /*follow=*/false, [] {}, on_output, stop);
    });
  }

  // Asserts that nothing at all is allocated.
  void ExpectNothingHeld() const {
    EXPECT_EQ(Used("cpu"), 0u);
    EXPECT_EQ(Used("mem"), 0u);
    EXPECT_EQ(Used("ports"), 0u);
  }

  // The kernel's current state.
  KernelState StateOf(const std::string& kernel_id) const {
    auto k = agent_->GetKernel(kernel_id);
    EXPECT_TRUE(k.ok()) << k.status().message();
    return k.ok() ? k->state() : KernelState::kError;
  }

  // The config with its scratch root in `scratch_`.
  Config ConfigWithScratch() const {
    Config config = TestConfig();
    config.container.scratch_root = scratch_.root();
    config.container.allow_root = true;  // the fake's images run as root, as the test image does
    return config;
  }

  FakeEngine engine_;
  EventHub hub_;
  TempTree scratch_{"slotd-agent-scratch"};
  Config config_ = ConfigWithScratch();
  std::unique_ptr<Agent> agent_ = NewAgent();
};

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

  ASSERT_TRUE(agent_->Relist().ok());
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
  ASSERT_TRUE(agent_->Relist().ok());
  EXPECT_TRUE(std::filesystem::exists(scratch_.root() + "/ipc/agent.lock"));
  EXPECT_TRUE(std::filesystem::exists(scratch_.root() + "/agent.toml"));

  // A kernel's directory made by slotd 0.2.0 (no marker) is the agent's once
  // it sees the kernel, and goes with it.
  Kernel k = MustCreate(Request("k1"));
  std::filesystem::remove(scratch_.root() + "/.slotd-made/k1");
  ASSERT_TRUE(agent_->Relist().ok());
  EXPECT_TRUE(std::filesystem::exists(scratch_.root() + "/.slotd-made/k1"));
  ASSERT_TRUE(engine_.RemoveBehindBack(k.container_id).ok());
  ASSERT_TRUE(agent_->Relist().ok());
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

  agent_->StopExpiredKernels(*k.deadline - 1);  // not yet
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);

  agent_->StopExpiredKernels(*k.deadline);
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
  agent_->StopExpiredKernels(*k.deadline);
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminated);
}

TEST_F(AgentTest, AKernelWhoseContainerCannotBeStoppedStaysRunningForTheNextRound) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 1}}, {{"max_lifetime", "1h"}}));
  engine_.FailNext(Method::kStop, Status::Unavailable("engine unreachable"));
  agent_->StopExpiredKernels(*k.deadline);
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  agent_->StopExpiredKernels(*k.deadline);
  EXPECT_EQ(StateOf("k1"), KernelState::kTerminated);
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

// --------------------------------------------------------------- engine events

TEST_F(AgentTest, DieEventMarksTerminatedWithTheExitCodeAndFreesAtOnce) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  Result<EngineEvent> died = engine_.KillBehindBack(k.container_id, 3);
  ASSERT_TRUE(died.ok());
  EXPECT_FALSE(agent_->OnEngineEvent(*died));

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
  EXPECT_FALSE(agent_->OnEngineEvent(*destroyed));
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
  EXPECT_TRUE(agent_->OnEngineEvent(events.back()));
  ASSERT_TRUE(agent_->Relist().ok());
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

  agent_->OnEngineEvent(*die);
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

  Status s = agent_->Relist();
  EXPECT_EQ(s.code(), Status::Code::kUnavailable);
  EXPECT_FALSE(agent_->EngineReachable());
  EXPECT_EQ(StateOf("k1"), KernelState::kRunning);
  EXPECT_EQ(Used("cpu"), 2u);
}

TEST_F(AgentTest, RelistForgetsAKernelWhoseContainerVanished) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  auto sub = hub_.Subscribe();
  ASSERT_TRUE(engine_.RemoveBehindBack(k.container_id).ok());  // the event is lost

  ASSERT_TRUE(agent_->Relist().ok());
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
  ASSERT_TRUE(agent_->Relist().ok());
  agent_->NoteCgroupReadings({{"k1", k1.container_id, 0, ""}});
  agent_->NoteActivity({{"k1", k1.container_id, 100.0, std::nullopt, 1}});
  EXPECT_EQ(current("k1"), first) << "a relist or a reading that changed nothing made the record again";

  agent_->NoteCgroupReadings({{"k1", k1.container_id, 3, ""}});
  const std::shared_ptr<const std::string> after_oom = current("k1");
  EXPECT_NE(after_oom->find("3 processes killed for lack of memory"), std::string::npos) << *after_oom;
  // The engine's word of one more, as its event stream brings it.
  EngineEvent oom{"container", "oom", k1.container_id, {{"ai.backend.owner", "a1"}, {"ai.backend.kernel-id", "k1"}}};
  agent_->OnEngineEvent(oom);
  EXPECT_NE(current("k1")->find("4 processes killed for lack of memory"), std::string::npos) << *current("k1");

  ASSERT_TRUE(engine_.KillBehindBack(k1.container_id, 7).ok());
  ASSERT_TRUE(agent_->Relist().ok());
  EXPECT_NE(current("k1")->find("\"TERMINATED\""), std::string::npos);
  const std::vector<std::shared_ptr<const std::string>> listed = agent_->ListKernelRecords(/*with_warm=*/false);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0], current("k1"));
  EXPECT_EQ(listed[1], current("k2"));
}

TEST_F(AgentTest, RelistNoticesADeathTheStreamMissed) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}));
  ASSERT_TRUE(engine_.KillBehindBack(k.container_id, 7).ok());  // the event is lost
  ASSERT_TRUE(agent_->Relist().ok());
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

  ASSERT_TRUE(agent_->Relist().ok());
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
  ASSERT_TRUE(agent_->Relist().ok());
  auto k = agent_->GetKernel("k5");
  ASSERT_TRUE(k.ok()) << k.status().message();
  EXPECT_EQ(k->state(), KernelState::kTerminated);
  EXPECT_EQ(k->exit_code, 2);
  EXPECT_FALSE(k->holds_resources);
  ExpectNothingHeld();
}

// An engine that sends no oom event (Podman): the kills the kernel's cgroup
// counts are its condition, and a kill (137) after them is "out of memory".
// A count the agent already has, or one of another container, changes nothing.
TEST_F(AgentTest, KillsForLackOfMemoryThatTheCgroupCountsAreTheConditionAndTheReasonOfTheEnd) {
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}}));
  agent_->NoteCgroupReadings({{"k1", "another-container", 5, ""}});
  EXPECT_EQ(agent_->GetKernel("k1")->oom_kills, 0);
  agent_->NoteCgroupReadings({{"k1", k1.container_id, 2, ""}});
  auto k = agent_->GetKernel("k1");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->oom_kills, 2);
  EXPECT_NE(k->Conditions().find("2 processes killed for lack of memory"), std::string::npos) << k->Conditions();
  agent_->NoteCgroupReadings({{"k1", k1.container_id, 1, ""}});  // an older reading
  EXPECT_EQ(agent_->GetKernel("k1")->oom_kills, 2);

  agent_->OnEngineEvent(*engine_.KillBehindBack(k1.container_id, 137));
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
  agent_->NoteCgroupReadings({{"k1", k1.container_id, 0, FormatCoreList({mine, mine + 1})}});
  const std::string moved = agent_->GetKernel("k1")->condition;
  EXPECT_NE(moved.find("its cpuset was changed outside slotd to \"" + FormatCoreList({mine, mine + 1}) +
                       "\" (allocated: " + std::to_string(mine) + ")"),
            std::string::npos)
      << moved;
  agent_->NoteCgroupReadings({{"k1", k1.container_id, 0, std::to_string(mine)}});
  EXPECT_EQ(agent_->GetKernel("k1")->condition, "");
}

// A TERMINATED kernel's container started again by someone else while its
// cores went to another kernel, the event lost: the relist must not leave
// the record saying TERMINATED while the container runs on another kernel's
// core. It stops the container and says why.
TEST_F(AgentTest, RelistStopsAKernelRestartedBehindTheBackWhoseCoresAreTaken) {
  Kernel k1 = MustCreate(Request("k1", {{"cpu", 1}}));
  agent_->OnEngineEvent(*engine_.KillBehindBack(k1.container_id, 0));
  EXPECT_EQ(MustCreate(Request("k2", {{"cpu", 1}})).allocation.cores, k1.allocation.cores);
  ASSERT_TRUE(engine_.Start(k1.container_id).ok());  // `docker start`; the event is lost

  ASSERT_TRUE(agent_->Relist().ok());
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
  ASSERT_TRUE(agent_->Relist().ok());
  EXPECT_TRUE(agent_->ListKernels().empty());
  ExpectNothingHeld();

  // Its events are not ours, even when fed to the agent.
  Result<EngineEvent> died = engine_.KillBehindBack(*foreign, 1);
  ASSERT_TRUE(died.ok());
  EXPECT_FALSE(agent_->OnEngineEvent(*died));
  // An event that claims our owner only prompts a relist, which does not list it.
  EngineEvent spoofed = *died;
  spoofed.action = "start";
  spoofed.attributes["ai.backend.owner"] = "a1";
  EXPECT_TRUE(agent_->OnEngineEvent(spoofed));
  ASSERT_TRUE(agent_->Relist().ok());
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

// ------------------------------------------------------------------- restart

TEST_F(AgentTest, RestartOfATerminatedKernelRetakesItsAllocation) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}}, {{"ports", json::array({8080})}}));
  agent_->OnEngineEvent(*engine_.KillBehindBack(k.container_id, 1));
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
  agent_->OnEngineEvent(*engine_.KillBehindBack(k1.container_id, 1));
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
  agent_->OnEngineEvent(*engine_.KillBehindBack(k1.container_id, 1));
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

TEST_F(AgentTest, ARelistDuringACreateLeavesThePreparingKernelToTheCreate) {
  engine_.HoldNext(Method::kStart);
  Result<Agent::CreateOutcome> created = Status::Internal("not run");
  std::thread creator([&] { created = agent_->CreateKernel(Request("k1")); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kStart));

  ASSERT_TRUE(agent_->Relist().ok());  // lists the container "created", never started
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
  std::thread relister([&] { relisted = agent_->Relist(); });
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
  std::thread relister([&] { relisted = agent_->Relist(); });
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
  for (auto it = events.begin() + before; it != events.end(); ++it) agent_->OnEngineEvent(*it);  // kill, die, stop
  ASSERT_TRUE(agent_->Relist().ok());  // lists it exited
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

  agent_->OnEngineEvent(*engine_.KillBehindBack(k.container_id, 137));  // its process dies meanwhile
  ASSERT_TRUE(agent_->Relist().ok());
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
  agent_->OnEngineEvent(*engine_.KillBehindBack(old.container_id, 0));
  Kernel fresh = MustCreate(Request("fresh", {{"cpu", 4}}));  // the same four cores

  engine_.HoldNextAnswer(Method::kList);
  Status relisted = Status::Internal("not run");
  std::thread relister([&] { relisted = agent_->Relist(); });
  ASSERT_TRUE(engine_.WaitUntilHeld(Method::kList));  // its answer: old exited
  ASSERT_TRUE(engine_.Start(old.container_id).ok());  // docker start, its event lost
  engine_.Release(Method::kList);
  relister.join();
  ASSERT_TRUE(relisted.ok()) << relisted.message();
  EXPECT_EQ(StateOf("old"), KernelState::kTerminated);  // as far as that answer knew
  EXPECT_EQ(StateOf("fresh"), KernelState::kRunning);

  ASSERT_TRUE(agent_->Relist().ok());  // this one sees it running on fresh's cores
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
  agent_->OnEngineEvent(*engine_.KillBehindBack(old.container_id, 0));
  ASSERT_EQ(StateOf("old"), KernelState::kTerminated);
  Kernel fresh = MustCreate(Request("fresh", {{"cpu", 4}}));  // the same four cores

  ASSERT_TRUE(engine_.Start(old.container_id).ok());  // docker start, behind the agent's back
  for (const auto& event : engine_.Events())
    if (event.action == "start" && event.id == old.container_id) agent_->OnEngineEvent(event);

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

// ------------------------------------------------------------ exec and logs

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
    if (event.action == "update") updates += (agent_->OnEngineEvent(event), 1);
  EXPECT_EQ(updates, 1);  // the agent's own move
  EXPECT_EQ(agent_->GetKernel("s")->Conditions(), "");

  ASSERT_TRUE(engine_.UpdateCpuset(s.container_id, "0").ok());  // onto x's core, by someone else
  agent_->OnEngineEvent(engine_.Events().back());
  const std::string condition = agent_->GetKernel("s")->Conditions();
  EXPECT_NE(condition.find("its cpuset was changed outside slotd to \"0\" (the shared pool: 1-3)"), std::string::npos)
      << condition;

  ASSERT_TRUE(engine_.UpdateCpuset(s.container_id, "1,2,3").ok());  // back, written another way
  agent_->OnEngineEvent(engine_.Events().back());
  EXPECT_EQ(agent_->GetKernel("s")->Conditions(), "");
  ASSERT_TRUE(agent_->DeleteKernel("x").ok());  // the pool grows back to 0-3
  EXPECT_EQ(engine_.Inspect(s.container_id)->cpuset_cpus, "0-3");
  ASSERT_EQ(engine_.Events().back().action, "update");  // the agent's own move
  agent_->OnEngineEvent(engine_.Events().back());
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
  ASSERT_TRUE(agent_->Relist().ok());
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
  ASSERT_TRUE(agent_->Relist().ok());
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
  ASSERT_TRUE(agent_->Relist().ok());
  EXPECT_EQ(engine_.Peek(s.container_id)->cpuset_cpus, "2-3");
}

// A shared kernel waiting for its restart policy's restart holds its quota:
// the pool's moves meanwhile reach its container, which starts on the pool.
TEST_F(AgentTest, ASharedKernelWaitingForARestartStartsOnThePoolAsItIsNow) {
  Kernel s = MustCreate(Request("s", {{"cpu", "250m"}}, {{"restart", {{"policy", "always"}, {"backoff", {{"initial", "1h"}}}}}}));
  Result<EngineEvent> died = engine_.KillBehindBack(s.container_id, 1);
  ASSERT_TRUE(died.ok());
  agent_->OnEngineEvent(*died);
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
  agent_->FillPools(std::stop_token());
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
  agent_->FillPools(std::stop_token());
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
  agent_->FillPools(std::stop_token());
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
  agent_->FillPools(std::stop_token());
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
  agent_->FillPools(std::stop_token());
  const std::vector<Kernel> warm = InState(*agent_, KernelState::kWarm);
  ASSERT_EQ(warm.size(), 1u);
  ASSERT_TRUE(engine_.KillBehindBack(warm[0].container_id, 1).ok());
  ASSERT_TRUE(agent_->Relist().ok());
  EXPECT_EQ(agent_->GetKernel(warm[0].id())->state(), KernelState::kTerminated);
  agent_->FillPools(std::stop_token());
  EXPECT_FALSE(agent_->GetKernel(warm[0].id()).ok());  // removed
  const std::vector<Kernel> again = InState(*agent_, KernelState::kWarm);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_NE(again[0].id(), warm[0].id());

  // A drained agent gives none, so it keeps none; an undrain refills the pool.
  ASSERT_TRUE(agent_->SetDraining(true).ok());
  agent_->FillPools(std::stop_token());
  EXPECT_TRUE(agent_->ListKernels().empty());
  EXPECT_EQ(agent_->DescribeResources()["cpu_shared"]["used"], 0);
  ASSERT_TRUE(agent_->SetDraining(false).ok());
  agent_->FillPools(std::stop_token());
  EXPECT_EQ(InState(*agent_, KernelState::kWarm).size(), 1u);
}

// A create naming a warm kernel's id, with the pool's very request, repeats
// no create: kConflict; the kernel is still given to the next matching create.
TEST_F(AgentTest, ACreateNamingAWarmKernelsIdIsAConflict) {
  config_.pools = {SmallPool(1)};
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());
  agent_->FillPools(std::stop_token());
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
  agent_->FillPools(std::stop_token());
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
  agent->FillPools(std::stop_token());
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
    agent->FillPools(std::stop_token());
    EXPECT_EQ(engine_.CallCount(Method::kImages), looks) << "tried before " << due;
    clock.Advance(std::chrono::seconds(1));
    agent->FillPools(std::stop_token());
    EXPECT_EQ(engine_.CallCount(Method::kImages), looks + 1) << "not tried at " << due;
    EXPECT_EQ(agent->CountPools().at("small").retry_at, clock.UnixSeconds() + delay);
  }
  EXPECT_EQ(Types(Drain(*sub)), std::vector<std::string>{});
  EXPECT_EQ(engine_.CallCount(Method::kUpdate), updates);

  // The image loaded, the next try makes the kernel and the reason is gone.
  engine_.AddImage("slotd-test/missing:1");
  clock.Advance(std::chrono::seconds(300));
  agent->FillPools(std::stop_token());
  EXPECT_EQ(InState(*agent, KernelState::kWarm).size(), 1u);
  EXPECT_EQ(agent->CountPools().at("small").trouble, "");
}

TEST_F(AgentTest, ExecAndLogsReachTheKernelsContainer) {
  Kernel k = MustCreate(Request("k1"));
  auto exec = agent_->Exec("k1", {"echo", "hi"}, std::chrono::seconds(5));
  ASSERT_TRUE(exec.ok()) << exec.status().message();
  EXPECT_EQ(exec->exit_code, 0);
  EXPECT_EQ(exec->stdout_text, "echo hi\n");

  engine_.SetLogs(k.container_id, "one\ntwo\nthree\n");
  EXPECT_EQ(*Logs("k1", 2), "two\nthree\n");
  EXPECT_EQ(*Logs("k1", 0), "one\ntwo\nthree\n");

  agent_->OnEngineEvent(*engine_.KillBehindBack(k.container_id, 0));
  EXPECT_EQ(agent_->Exec("k1", {"true"}, std::chrono::seconds(5)).status().code(),
            Status::Code::kFailedPrecondition);
  EXPECT_EQ(*Logs("k1", 0), "one\ntwo\nthree\n");  // a dead kernel's output stays readable
}

// -------------------------------------------------------------- event hub

TEST_F(AgentTest, LifecycleEventsArePublishedOnTheHub) {
  auto sub = hub_.Subscribe();
  Kernel k = MustCreate(Request("k1"));
  agent_->OnEngineEvent(*engine_.KillBehindBack(k.container_id, 9));
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
          agent_->OnEngineEvent(e);
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
}  // namespace slotd
