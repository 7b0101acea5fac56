// Several real agents on one engine and one node: each sees, counts and
// frees only its own containers, and the node claims refuse every overlap.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "common/units.h"
#include "config/config.h"
#include "model/kernel.h"
#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// How many agents with one exclusive core each this machine can hold, at most 3.
int AgentCount() { return std::min<int>(3, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))); }

std::string MockDevices(int index) {
  return "[resource.mock]\ndevices = [{ id = \"m" + std::to_string(index) + "\", memory = \"1g\" }]\n";
}

// Agent i of a node: core i, mock device m<i>, its own port range, the shared claims dir.
AgentOptions NodeAgent(const std::string& claims_dir, int i, const std::string& name) {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name + std::to_string(i);
  o.cores = std::to_string(i);
  o.memory = "256m";
  o.claims_dir = claims_dir;
  o.port_first = 33000 + 100 * i;
  o.port_last = 33000 + 100 * i + 9;
  o.extra_toml = MockDevices(i);
  o.container_toml = "stats-interval = \"200ms\"\n";
  return o;
}

json DeviceSleeper(const std::string& id) {
  return {{"kernel_id", id},
          {"image", kTestImage},
          {"command", {"sleep", "3600"}},
          {"resources", {{"cpu", 1}, {"mem", "16m"}, {"mock.device", 1}}}};
}

std::set<std::string> ContainerIds(const json& kernels) {
  std::set<std::string> ids;
  for (const auto& k : kernels) ids.insert(k["container_id"].get<std::string>());
  return ids;
}

class MultiAgent : public ::testing::Test {
 protected:
  void StartAgents(const std::string& name) {
    for (int i = 0; i < AgentCount(); ++i) {
      agents_.push_back(std::make_unique<AgentProcess>(NodeAgent(claims_.path(), i, name)));
      ASSERT_TRUE(agents_.back()->Start()) << agents_.back()->log();
    }
  }
  TempDir claims_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

TEST_F(MultiAgent, EachAgentSeesOnlyItsOwnKernelsAndTheEngineAgrees) {
  StartAgents("own");
  // The same kernel id on every agent: a different container each.
  for (auto& agent : agents_) agent->CreateKernel(DeviceSleeper("same-id"));
  std::set<std::string> all;
  for (auto& agent : agents_) {
    json kernels = agent->CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"];
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_EQ(kernels[0]["agent_id"], agent->options().id);
    auto listed = Engine().List({"ai.backend.owner=" + agent->options().id});
    ASSERT_TRUE(listed.ok());
    std::set<std::string> engine_ids;
    for (const auto& c : *listed) engine_ids.insert(c.id);
    EXPECT_EQ(engine_ids, ContainerIds(kernels));
    all.insert(kernels[0]["container_id"].get<std::string>());
    json info = agent->CallJson("GET", "/v1/agent", nullptr, 200);
    EXPECT_EQ(info["resources"]["cpu"]["used"], 1);
    EXPECT_EQ(info["resources"]["mock.device"]["used"], 1);
  }
  EXPECT_EQ(all.size(), agents_.size());

  // Stats and metrics: each agent measures exactly its own "same-id", its own container.
  for (auto& agent : agents_) {
    const std::string container = agent->CallJson("GET", "/v1/kernels/same-id", nullptr, 200)["container_id"];
    json stats;
    for (int tries = 0; tries < 200; ++tries) {
      stats = agent->CallJson("GET", "/v1/stats", nullptr, 200);
      if (!stats["kernels"].empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(stats["kernels"].size(), 1u) << stats.dump();
    EXPECT_EQ(stats["kernels"][0]["kernel_id"], "same-id");
    EXPECT_EQ(stats["kernels"][0]["container_id"], container);
    EXPECT_EQ(stats["agent_id"], agent->options().id);
    const std::string metrics = agent->Call("GET", "/metrics").body;
    for (auto& other : agents_) {
      if (other == agent) continue;
      EXPECT_EQ(metrics.find("agent_id=\"" + other->options().id + "\""), std::string::npos) << metrics;
    }
    EXPECT_NE(metrics.find("kernel_id=\"same-id\""), std::string::npos) << metrics;
  }
}

TEST_F(MultiAgent, SigkillOfOneAgentChangesNothingForTheOthersAndItAdoptsExactlyItsOwn) {
  StartAgents("kill");
  std::vector<json> before;
  for (auto& agent : agents_) {
    agent->CreateKernel(DeviceSleeper("k"));
    before.push_back(agent->CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"]);
  }
  agents_[0]->Kill(SIGKILL);
  for (size_t i = 1; i < agents_.size(); ++i)
    EXPECT_EQ(agents_[i]->CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"], before[i]);
  ASSERT_TRUE(agents_[0]->Start()) << agents_[0]->log();
  json adopted = agents_[0]->CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"];
  // created_at is the agent's clock at the create, and after a restart the
  // engine's date of the container, made a moment later (docs/api.md): the
  // two may fall on either side of a second. Everything else is the same.
  ASSERT_EQ(adopted.size(), before[0].size()) << adopted;
  for (size_t k = 0; k < adopted.size(); ++k) {
    const int64_t later = adopted[k].value("created_at", int64_t{-1}) - before[0][k].value("created_at", int64_t{0});
    EXPECT_TRUE(later == 0 || later == 1) << "created_at moved by " << later << " s: " << adopted[k];
    adopted[k]["created_at"] = before[0][k]["created_at"];
  }
  EXPECT_EQ(adopted, before[0]);
  for (size_t i = 1; i < agents_.size(); ++i)
    EXPECT_EQ(agents_[i]->CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"], before[i]);
}

TEST_F(MultiAgent, ADeathIsNoticedOnlyByItsOwner) {
  StartAgents("death");
  std::vector<std::string> containers;
  for (auto& agent : agents_) containers.push_back(agent->CreateKernel(DeviceSleeper("k"))["container_id"]);
  ASSERT_TRUE(Engine().Kill(containers[0]).ok());
  json dead = agents_[0]->WaitForState("k", "TERMINATED");
  EXPECT_EQ(dead["exit_code"], 137);
  for (size_t i = 1; i < agents_.size(); ++i) {
    json k = agents_[i]->CallJson("GET", "/v1/kernels/k", nullptr, 200);
    EXPECT_EQ(k["state"], "RUNNING");
    EXPECT_EQ(k["container_id"], containers[i]);
    EXPECT_EQ(agents_[i]->log().find(containers[0].substr(0, 12)), std::string::npos);
  }
}

// Starts `second` expecting a refusal whose log names `expected`.
void ExpectRefused(AgentProcess& second, const std::string& expected) {
  EXPECT_FALSE(second.Start()) << "started although it clashes";
  EXPECT_NE(second.log().find(expected), std::string::npos) << second.log();
}

TEST_F(MultiAgent, ClashingConfigsAreRefusedNamingTheHolderAndStartOnceItIsGone) {
  AgentOptions first_options = NodeAgent(claims_.path(), 0, "holder");
  first_options.rpc_port = FreeLoopbackPort();
  AgentProcess first(first_options);
  ASSERT_TRUE(first.Start()) << first.log();
  const std::string holder = "held by agent " + first_options.id + " (pid " + std::to_string(first.pid()) + ",";
  const int other_core = AgentCount() > 1 ? 1 : 0;

  auto variant = [&](const std::string& name) {
    AgentOptions o = NodeAgent(claims_.path(), other_core, name);
    o.extra_toml = MockDevices(9);
    return o;
  };
  {
    AgentOptions o = variant("id");
    o.id = first_options.id;
    AgentProcess second(o);
    ExpectRefused(second, "agent id " + first_options.id + ": " + holder);
  }
  {
    AgentOptions o = variant("port");
    o.rpc_port = first_options.rpc_port;
    AgentProcess second(o);
    ExpectRefused(second, "API port (agent.rpc-listen-addr) " + std::to_string(first_options.rpc_port) + ": " + holder);
  }
  {
    AgentOptions o = variant("ipc");
    o.ipc_dir = first.dir() + "/ipc";
    AgentProcess second(o);
    ExpectRefused(second, "is locked by another running process (pid " + std::to_string(first.pid()) + ")");
  }
  {
    AgentOptions o = variant("range");
    o.port_first = first_options.port_last - 2;
    o.port_last = first_options.port_last + 5;
    AgentProcess second(o);
    ExpectRefused(second, "container.port-range " + std::to_string(o.port_first) + "-" +
                              std::to_string(first_options.port_last) + ": " + holder);
  }
  {
    AgentOptions o = variant("core");
    o.cores = "0";
    AgentProcess second(o);
    ExpectRefused(second, "cpu core 0: " + holder);
  }
  {
    AgentOptions o = variant("device");
    o.extra_toml = MockDevices(0);
    AgentProcess second(o);
    ExpectRefused(second, "mock device m0: " + holder);
  }
  {
    AgentOptions o = variant("memory");
    o.memory = FormatSize(HostFacts::Detect().memory_bytes - (128ull << 20));
    AgentProcess second(o);
    ExpectRefused(second, "memory shares add up to");
  }
  // Once the holder is gone (even by SIGKILL), its claims are void.
  first.Kill(SIGKILL);
  AgentOptions o = variant("core");
  o.cores = "0";
  o.extra_toml = MockDevices(0);
  AgentProcess second(o);
  EXPECT_TRUE(second.Start()) << second.log();
}

// Two agents with one id but different claims directories do not see each
// other in the claims, yet would act on the same containers: the engine
// lease refuses the second, naming the first, until the first is gone.
TEST_F(MultiAgent, ASecondAgentOfTheSameIdWithAnotherClaimsDirIsRefusedUntilTheFirstIsGone) {
  AgentProcess first(NodeAgent(claims_.path(), 0, "twin"));
  ASSERT_TRUE(first.Start()) << first.log();
  first.CreateKernel(DeviceSleeper("k-of-the-first"));

  TempDir other_claims;
  AgentProcess second(NodeAgent(other_claims.path(), 0, "twin"));
  ASSERT_EQ(second.options().id, first.options().id);
  ExpectRefused(second, "another agent with id " + first.options().id + " runs against this engine");
  EXPECT_NE(second.log().find("pid " + std::to_string(first.pid())), std::string::npos) << second.log();
  EXPECT_NE(second.log().find("claims-dir " + claims_.path()), std::string::npos) << second.log();
  first.WaitForState("k-of-the-first", "RUNNING");  // the refused one touched nothing

  first.Kill(SIGKILL);
  ASSERT_TRUE(second.Start()) << second.log();
  second.WaitForState("k-of-the-first", "RUNNING");  // it is this id's kernel: adopted
}

TEST_F(MultiAgent, ADeadAgentsRunningKernelsStillHoldTheirCores) {
  AgentProcess first(NodeAgent(claims_.path(), 0, "dead"));
  ASSERT_TRUE(first.Start()) << first.log();
  json k = first.CreateKernel(DeviceSleeper("still-running"));
  first.Kill(SIGKILL);
  // Another agent id claiming the same core and device: the claims are void,
  // but the dead agent's container still runs on them.
  AgentProcess second(NodeAgent(claims_.path(), 0, "successor"));
  EXPECT_FALSE(second.Start());
  std::string name = ContainerName(first.options().id, "still-running");
  EXPECT_NE(second.log().find("cpu core 0: held by running container " + name + " of agent " + first.options().id),
            std::string::npos)
      << second.log();
  EXPECT_NE(second.log().find("mock device m0: held by running container " + name), std::string::npos);
  auto info = Engine().Inspect(k["container_id"].get<std::string>());
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->running);
}

// A dead agent's shared kernel records no core in its label, yet runs on
// its pool: what its cpuset lets it run on keeps a new agent off those cores.
TEST_F(MultiAgent, ADeadAgentsRunningSharedKernelsStillHoldTheCoresTheyRunOn) {
  AgentOptions o = NodeAgent(claims_.path(), 0, "dead-shared");
  o.cores = "0-1";
  o.extra_toml.clear();
  AgentProcess first(o);
  ASSERT_TRUE(first.Start()) << first.log();
  json shared = SleepKernel("shared-one", "16m");
  shared["resources"]["cpu"] = "100m";
  first.CreateKernel(shared);
  first.Kill(SIGKILL);
  AgentOptions successor = NodeAgent(claims_.path(), 1, "successor");
  successor.extra_toml.clear();
  AgentProcess second(successor);
  EXPECT_FALSE(second.Start());
  const std::string name = ContainerName(first.options().id, "shared-one");
  EXPECT_NE(second.log().find("cpu core 1 (its cpuset: 0-1): held by running container " + name + " of agent " +
                              first.options().id),
            std::string::npos)
      << second.log();
}

}  // namespace
}  // namespace slotd::testing
