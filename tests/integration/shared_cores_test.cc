// Shared cores through the real binaries and engine: ten shared kernels run
// beside an exclusive one on two cores, the pool follows the exclusive
// kernel, an exclusive core that would starve the pool is refused, an agent
// SIGKILLed and started again adopts both kinds exactly, a quota holds a
// spinning kernel to its share, and shared kernels created at the same moment
// as an exclusive one never keep its core.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// A kernel sleeping an hour on `cpu` (a quota like "100m", or whole cores).
json Sleeper(const std::string& id, const json& cpu) {
  json k = SleepKernel(id, "16m");
  k["resources"]["cpu"] = cpu;
  return k;
}

// The cores kernel `id`'s container runs on, as the engine says.
std::string CpusetOf(const AgentProcess& agent, const std::string& id) {
  const json k = agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200);
  Result<ContainerInfo> info = Engine().Inspect(k["container_id"]);
  EXPECT_TRUE(info.ok()) << info.status().message();
  return info.ok() ? info->cpuset_cpus : "";
}

constexpr int kShared = 10;

TEST(SharedCores, TenSharedKernelsRunBesideAnExclusiveOneAndAreAdoptedExactlyAfterASigkill) {
  AgentProcess agent(TwoCoreAgent("shared"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  for (int i = 0; i < kShared; ++i) {
    json k = agent.CreateKernel(Sleeper("s" + std::to_string(i), "100m"));
    EXPECT_EQ(k["allocations"]["cpu"], json::array());
    EXPECT_EQ(k["allocations"]["cpu_shared"], 100);
  }
  EXPECT_EQ(CpusetOf(agent, "s0"), "0-1");

  // One exclusive core leaves one core for 1000m of quota: enough.
  json x = agent.CreateKernel(Sleeper("x", 1));
  EXPECT_EQ(x["allocations"]["cpu"], json::array({0}));
  json shared = agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu_shared"];
  EXPECT_EQ(shared, (json{{"capacity", 1000}, {"used", 1000}, {"free", 0}, {"kernels", kShared}, {"cores", "1"}}));
  if (EngineIsPodman()) {
    // Podman cannot update a running container's cores: each shared kernel says so.
    json s0 = agent.CallJson("GET", "/v1/kernels/s0", nullptr, 200);
    ASSERT_TRUE(s0["condition"].is_string()) << s0.dump();
    EXPECT_NE(s0["condition"].get<std::string>().find("could not follow the shared pool to \"1\""),
              std::string::npos)
        << s0.dump();
  } else {
    for (int i = 0; i < kShared; ++i) EXPECT_EQ(CpusetOf(agent, "s" + std::to_string(i)), "1") << i;
  }
  // A second would leave the shared kernels no core: refused, naming both.
  HttpResponse refused = agent.Call("POST", "/v1/kernels", Sleeper("y", 1).dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("holds 10 shared kernel(s) with 1000m"), std::string::npos) << refused.body;
  // And so would one more shared kernel.
  EXPECT_EQ(agent.Call("POST", "/v1/kernels", Sleeper("z", "10m").dump()).status, 422);

  // SIGKILLed and started again: every kernel adopted as it was.
  const json before = agent.CallJson("GET", "/v1/kernels", nullptr, 200);
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const json after = agent.CallJson("GET", "/v1/kernels", nullptr, 200);
  ASSERT_EQ(after["kernels"].size(), static_cast<size_t>(kShared + 1)) << after.dump();
  for (size_t i = 0; i < after["kernels"].size(); ++i) {
    EXPECT_EQ(after["kernels"][i]["state"], "RUNNING") << after["kernels"][i].dump();
    EXPECT_EQ(after["kernels"][i]["allocations"], before["kernels"][i]["allocations"]) << i;
  }
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu_shared"], shared);
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu"]["used"], 1);

  // The exclusive kernel's core goes back to the pool.
  agent.CallJson("DELETE", "/v1/kernels/x", nullptr, 200);
  if (!EngineIsPodman())
    for (int i = 0; i < kShared; ++i) EXPECT_EQ(CpusetOf(agent, "s" + std::to_string(i)), "0-1") << i;
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu_shared"]["capacity"], 2000);
}

// The quota is what the kernel gets: a spinning kernel of 250m uses about a
// quarter of a core, and its stats say so against its quota.
TEST(SharedCores, AQuotaHoldsASpinningKernelToItsShare) {
  AgentProcess agent(TwoCoreAgent("quota", "stats-interval = \"500ms\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json spin = Sleeper("spin", "250m");
  spin["command"] = {"sh", "-c", "while :; do :; done"};
  agent.CreateKernel(spin);
  json stats;
  for (int i = 0; i < 100; ++i) {  // two samples are needed for a percent
    stats = agent.CallJson("GET", "/v1/kernels/spin/stats", nullptr, 200);
    if (stats.contains("cpu") && stats["cpu"]["percent"].is_number() && stats["cpu"]["usage_ns"] > 1'000'000'000u)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(stats["cpu"]["percent"].is_number()) << stats.dump();
  EXPECT_EQ(stats["cpu"]["quota_millis"], 250);
  // Loose bounds: the quota caps it near 25% of a core; without it, 100%.
  EXPECT_LT(stats["cpu"]["percent"].get<double>(), 60.0) << stats.dump();
  EXPECT_GT(stats["cpu"]["quota_percent"].get<double>(), stats["cpu"]["percent"].get<double>()) << stats.dump();
  const CommandResult shown = Slotctl({"--socket", agent.socket_path(), "stats", "spin"});
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("% of its 250m quota, "), std::string::npos) << shown.out;
}

// The cores the kernel's first process may run on, as the host's kernel
// enforces its cgroup's cpuset (Cpus_allowed_list of /proc/<pid>/status).
std::string AllowedCoresOf(const AgentProcess& agent, const std::string& id) {
  const json k = agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200);
  Result<ContainerInfo> info = Engine().Inspect(k["container_id"]);
  if (!info.ok() || info->pid <= 0) return "(not running)";
  std::ifstream in("/proc/" + std::to_string(info->pid) + "/status");
  const std::string field = "Cpus_allowed_list:";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0) return line.substr(line.find_first_not_of(" \t", field.size()));
  return "(unreadable)";
}

// Shared kernels created at the same moment as an exclusive one, several
// rounds: whatever order the agent takes them in, no shared kernel keeps the
// exclusive core, as the engine records it and as its cgroup enforces it.
TEST(SharedCores, SharedKernelsCreatedBesideAnExclusiveOneNeverKeepItsCore) {
  if (EngineIsPodman()) GTEST_SKIP() << "Podman cannot move a running container's cores";
  AgentProcess agent(TwoCoreAgent("race"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  constexpr int kRounds = 4, kPerRound = 4;
  for (int round = 0; round < kRounds; ++round) {
    const std::string tag = std::to_string(round);
    std::vector<std::string> shared;
    for (int i = 0; i < kPerRound; ++i) shared.push_back("s" + tag + "-" + std::to_string(i));
    std::vector<int> statuses(kPerRound + 1, 0);
    std::vector<std::thread> creators;
    for (int i = 0; i < kPerRound; ++i)
      creators.emplace_back([&, i] { statuses[i] = agent.Call("POST", "/v1/kernels", Sleeper(shared[i], "100m").dump()).status; });
    creators.emplace_back(
        [&] { statuses[kPerRound] = agent.Call("POST", "/v1/kernels", Sleeper("x" + tag, 1).dump()).status; });
    for (auto& t : creators) t.join();
    for (int i = 0; i <= kPerRound; ++i) ASSERT_EQ(statuses[i], 201) << "round " << round << ", create " << i;

    const json x = agent.CallJson("GET", "/v1/kernels/x" + tag, nullptr, 200);
    ASSERT_EQ(x["allocations"]["cpu"].size(), 1u) << x.dump();
    const std::string taken = std::to_string(x["allocations"]["cpu"][0].get<int>());
    const std::string pool = taken == "0" ? "1" : "0";
    for (const std::string& id : shared) {
      EXPECT_EQ(CpusetOf(agent, id), pool) << "round " << round << ", " << id << " beside x on core " << taken;
      EXPECT_EQ(AllowedCoresOf(agent, id), pool) << "round " << round << ", " << id;
      const json k = agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200);
      EXPECT_TRUE(k["condition"].is_null()) << k.dump();
    }
    agent.CallJson("DELETE", "/v1/kernels/x" + tag, nullptr, 200);
    for (const std::string& id : shared) EXPECT_EQ(CpusetOf(agent, id), "0-1") << id;
    for (const std::string& id : shared) agent.CallJson("DELETE", "/v1/kernels/" + id, nullptr, 200);
  }
}

// An agent started again with fewer allowed-cores beside a second agent
// given the cores it gave up: its shared kernels are moved into its new pool
// before it serves, so the second agent starts beside them; with no core left
// for them it refuses to start, naming them, and so does the second agent
// while they still run on its cores. No core is ever in two agents' hands.
TEST(SharedCores, AnAgentStartedAgainWithFewerCoresNeverLeavesItsSharedKernelsOnTheCoresItGaveUp) {
  if (EngineIsPodman()) GTEST_SKIP() << "Podman cannot move a running container's cores";
  TempDir claims;
  AgentOptions whole = TwoCoreAgent("fewer");
  whole.claims_dir = claims.path();
  AgentProcess first(whole);
  ASSERT_TRUE(first.Start()) << first.log();
  first.CreateKernel(Sleeper("s", "450m"));
  ASSERT_EQ(CpusetOf(first, "s"), "0-1");
  const std::string container = first.CallJson("GET", "/v1/kernels/s", nullptr, 200)["container_id"];
  first.Kill(SIGKILL);

  AgentOptions fewer = whole;
  fewer.cores = "1";
  AgentProcess restarted(fewer);
  ASSERT_TRUE(restarted.Start()) << restarted.log();
  EXPECT_EQ(Engine().Inspect(container)->cpuset_cpus, "1");  // as soon as it serves
  EXPECT_EQ(AllowedCoresOf(restarted, "s"), "1");
  AgentOptions beside = TwoCoreAgent("beside");
  beside.cores = "0";
  beside.claims_dir = claims.path();
  beside.port_first = 32100;
  beside.port_last = 32109;
  {
    AgentProcess second(beside);
    ASSERT_TRUE(second.Start()) << second.log();
    second.CreateKernel(Sleeper("x", 1));
    EXPECT_EQ(CpusetOf(second, "x"), "0");
    EXPECT_EQ(CpusetOf(restarted, "s"), "1");
  }  // gone, its kernel removed
  restarted.Kill(SIGKILL);

  // Back on both cores, an exclusive kernel takes core 0; then started with
  // core 0 alone, which that kernel holds: no pool is left for "s".
  ASSERT_TRUE(first.Start()) << first.log();
  first.CreateKernel(Sleeper("x", 1));
  ASSERT_EQ(CpusetOf(first, "s"), "1");
  first.Kill(SIGKILL);
  fewer.cores = "0";
  AgentProcess refused(fewer);
  ASSERT_FALSE(refused.Start()) << refused.log();
  EXPECT_NE(refused.log().find("this agent has no shared pool for them"), std::string::npos) << refused.log();
  EXPECT_NE(refused.log().find("kernel s (container " + container.substr(0, 12) + ", 450m of shared cpu)"),
            std::string::npos)
      << refused.log();
  // And the agent given core 1 is kept off it while "s" runs there.
  beside.cores = "1";
  AgentProcess kept_off(beside);
  ASSERT_FALSE(kept_off.Start()) << kept_off.log();
  EXPECT_NE(kept_off.log().find("cpu core 1 (its cpuset: 1): held by running container"), std::string::npos)
      << kept_off.log();
  EXPECT_EQ(Engine().Inspect(container)->cpuset_cpus, "1");
  ASSERT_TRUE(first.Start()) << first.log();  // given its cores back
  EXPECT_EQ(first.WaitForState("s", "RUNNING")["allocations"]["cpu_shared"], 450);
}

}  // namespace
}  // namespace slotd::testing
