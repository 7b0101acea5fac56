// What a real job needs from its kernel, through the real binaries and
// engine: a scratch directory that outlives restarts and goes with the
// kernel, a /dev/shm of the size it asks for, and a lifetime that the agent
// enforces, also across its own restarts.
#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// The size of the kernel's /dev/shm in KiB, as df inside it reports it.
std::string ShmKiB(const AgentProcess& agent, const std::string& kernel_id) {
  const json out = agent.CallJson("POST", "/v1/kernels/" + kernel_id + "/exec",
                                  {{"command", {"sh", "-c", "df -k /dev/shm | tail -n 1 | awk '{print $2}'"}}}, 200);
  std::string kib = out["stdout"];
  while (!kib.empty() && (kib.back() == '\n' || kib.back() == ' ')) kib.pop_back();
  return kib;
}

TEST(Workload, ScratchAtHomeWorkOutlivesKernelAndAgentRestartsAndGoesWithTheKernel) {
  AgentProcess agent(TwoCoreAgent("scratch"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel({{"kernel_id", "job"},
                      {"image", kTestImage},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "64m"}}}});
  EXPECT_EQ(RunIn(agent, "job", "echo epoch-3 > /home/work/checkpoint && cat /home/work/checkpoint"), "epoch-3\n");
  const std::string dir = agent.dir() + "/var/scratch/job";
  EXPECT_TRUE(std::filesystem::exists(dir + "/checkpoint"));

  agent.CallJson("POST", "/v1/kernels/job/restart", nullptr, 200);
  EXPECT_EQ(RunIn(agent, "job", "cat /home/work/checkpoint"), "epoch-3\n");
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(RunIn(agent, "job", "cat /home/work/checkpoint"), "epoch-3\n");

  agent.CallJson("DELETE", "/v1/kernels/job", nullptr, 200);
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(Workload, KernelProcessesRunUnderTheConfiguredLimits) {
  AgentProcess agent(TwoCoreAgent("ulimits", "ulimits = { nofile = 4096, memlock = 65536 }\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel({{"kernel_id", "limited"},
                      {"image", kTestImage},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  EXPECT_EQ(RunIn(agent, "limited", "ulimit -n; ulimit -Hn; ulimit -l"), "4096\n4096\n64\n");  // -l in KiB
  agent.CallJson("DELETE", "/v1/kernels/limited", nullptr, 200);
}

// A fork bomb inside a kernel meets the kernel's pids limit: the node, the
// agent, the engine and the kernel next to it keep working, and the bomb's
// kernel can still be deleted.
TEST(Workload, AForkBombIsContainedByThePidsLimit) {
  AgentProcess agent(TwoCoreAgent("forkbomb", "pids-limit = 64\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel({{"kernel_id", "bystander"},
                      {"image", kTestImage},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  agent.CreateKernel({{"kernel_id", "bomb"},
                      {"image", kTestImage},
                      {"command", {"sh", "-c", "f() { f | f & }; f; sleep 3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "64m"}}}});
  // Let it grow to its limit and keep trying past it for a while.
  int most_pids = 0;
  for (int i = 0; i < 30; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const json stats = agent.CallJson("GET", "/v1/kernels/bomb/stats", nullptr, 200);
    if (stats.contains("pids") && stats["pids"].is_number()) most_pids = std::max(most_pids, stats["pids"].get<int>());
  }
  EXPECT_GT(most_pids, 32);  // it did grow
  EXPECT_LE(most_pids, 64);
  EXPECT_EQ(agent.Call("GET", "/health").status, 200);
  EXPECT_EQ(RunIn(agent, "bystander", "echo alive"), "alive\n");
  EXPECT_TRUE(Engine().Identify().ok());
  const CommandResult host = RunCommand({"sh", "-c", "echo the node forks"});
  EXPECT_EQ(host.out, "the node forks\n");
  agent.CallJson("DELETE", "/v1/kernels/bomb", nullptr, 200);
  agent.CallJson("DELETE", "/v1/kernels/bystander", nullptr, 200);
}

TEST(Workload, AKernelReadsAnAllowedDatasetReadOnlyAndEscapesAreRefused) {
  TempDir host;
  std::filesystem::create_directories(host.path() + "/datasets/imagenet");
  WriteFile(host.path() + "/datasets/imagenet/labels.txt", "cat\ndog\n");
  std::filesystem::create_directories(host.path() + "/secrets");
  std::filesystem::create_symlink(host.path() + "/secrets", host.path() + "/datasets/escape");
  AgentProcess agent(
      TwoCoreAgent("mounts", "mount-allow = [{ path = \"" + host.path() + "/datasets\", mode = \"ro\" }]\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const json base = {{"image", kTestImage}, {"command", {"sleep", "3600"}}, {"resources", {{"cpu", 1}, {"mem", "32m"}}}};

  json reader = base;
  reader["kernel_id"] = "reader";
  reader["mounts"] = {{{"source", host.path() + "/datasets/imagenet"}, {"target", "/data"}, {"readonly", true}}};
  agent.CreateKernel(reader);
  EXPECT_EQ(RunIn(agent, "reader", "cat /data/labels.txt"), "cat\ndog\n");
  EXPECT_EQ(RunIn(agent, "reader", "touch /data/new 2>/dev/null && echo wrote || echo refused"), "refused\n");

  for (const auto& [source, why] : std::vector<std::pair<std::string, std::string>>{
           {host.path() + "/datasets/escape", "passes through a symbolic link"},
           {host.path() + "/datasets/../secrets", "is not in a directory this agent lets kernels mount"}}) {
    SCOPED_TRACE(source);
    json escape = base;
    escape["kernel_id"] = "escape";
    escape["mounts"] = {{{"source", source}, {"target", "/data"}, {"readonly", true}}};
    HttpResponse refused = agent.Call("POST", "/v1/kernels", escape.dump());
    EXPECT_EQ(refused.status, 403) << refused.body;
    EXPECT_NE(refused.body.find(why), std::string::npos) << refused.body;
  }
  json writer = base;
  writer["kernel_id"] = "writer";
  writer["mounts"] = {{{"source", host.path() + "/datasets/imagenet"}, {"target", "/data"}}};
  HttpResponse refused = agent.Call("POST", "/v1/kernels", writer.dump());
  EXPECT_EQ(refused.status, 403) << refused.body;
  EXPECT_NE(refused.body.find("read-only only"), std::string::npos) << refused.body;
  const json described = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(described["resources"]["cpu"]["used"], 1) << described.dump();  // the reader's core only

  agent.Kill(SIGKILL);  // the mount is in the kernel's request label: restored as it was
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/reader", nullptr, 200)["state"], "RUNNING");
  EXPECT_EQ(RunIn(agent, "reader", "cat /data/labels.txt"), "cat\ndog\n");
  agent.CallJson("DELETE", "/v1/kernels/reader", nullptr, 200);
  EXPECT_TRUE(std::filesystem::exists(host.path() + "/datasets/imagenet/labels.txt"));  // a mount is not scratch
}

TEST(Workload, DevShmIsTheSizeTheKernelAsksForAndNoMoreThanItsMemory) {
  AgentProcess agent(TwoCoreAgent("shm"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel({{"kernel_id", "asked"},
                      {"image", kTestImage},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "256m"}, {"shm", "128m"}}}});
  EXPECT_EQ(ShmKiB(agent, "asked"), "131072");
  agent.CreateKernel({{"kernel_id", "small"},
                      {"image", kTestImage},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  EXPECT_EQ(ShmKiB(agent, "small"), "32768");  // the default 64m, capped at mem

  HttpResponse over = agent.Call("POST", "/v1/kernels",
                                 json{{"kernel_id", "over"},
                                      {"image", kTestImage},
                                      {"resources", {{"cpu", 1}, {"mem", "64m"}, {"shm", "128m"}}}}
                                     .dump());
  EXPECT_EQ(over.status, 422) << over.body;
  EXPECT_NE(over.body.find("resources.shm: 128m is more than mem (64m)"), std::string::npos) << over.body;
  agent.CallJson("DELETE", "/v1/kernels/asked", nullptr, 200);
  agent.CallJson("DELETE", "/v1/kernels/small", nullptr, 200);
}

TEST(Workload, AKernelIsStoppedWhenItsLifetimeRunsOutAndCannotBeRestarted) {
  AgentProcess agent(TwoCoreAgent("life"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const json created = agent.CreateKernel({{"kernel_id", "brief"},
                                           {"image", kTestImage},
                                           {"command", {"sleep", "3600"}},
                                           {"resources", {{"cpu", 1}, {"mem", "32m"}}},
                                           {"max_lifetime", "2s"}});
  EXPECT_EQ(created["deadline"], created["created_at"].get<int64_t>() + 2);
  const json ended = agent.WaitForState("brief", "TERMINATED", std::chrono::seconds(30));
  EXPECT_EQ(ended["reason"], "lifetime exceeded");
  const json described = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(described["resources"]["cpu"]["used"], 0) << described.dump();

  HttpResponse restart = agent.Call("POST", "/v1/kernels/brief/restart");
  EXPECT_EQ(restart.status, 409) << restart.body;
  EXPECT_NE(restart.body.find("lifetime has run out"), std::string::npos) << restart.body;
  agent.CallJson("DELETE", "/v1/kernels/brief", nullptr, 200);
}

TEST(Workload, TheConfigsMaxLifetimeCapsRequestsAndHoldsAcrossAnAgentKill) {
  AgentProcess agent(TwoCoreAgent("cap", "max-lifetime = \"4s\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  HttpResponse longer = agent.Call("POST", "/v1/kernels",
                                   json{{"kernel_id", "long"}, {"image", kTestImage}, {"max_lifetime", "1h"}}.dump());
  EXPECT_EQ(longer.status, 400) << longer.body;
  EXPECT_NE(longer.body.find("[container] max-lifetime"), std::string::npos) << longer.body;

  const json created = agent.CreateKernel({{"kernel_id", "capped"},
                                           {"image", kTestImage},
                                           {"command", {"sleep", "3600"}},
                                           {"resources", {{"cpu", 1}, {"mem", "32m"}}}});
  EXPECT_EQ(created["deadline"], created["created_at"].get<int64_t>() + 4);
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();  // adopts it, deadline and all
  const json ended = agent.WaitForState("capped", "TERMINATED", std::chrono::seconds(30));
  EXPECT_EQ(ended["reason"], "lifetime exceeded");
  EXPECT_EQ(ended["deadline"], created["deadline"]);
  agent.CallJson("DELETE", "/v1/kernels/capped", nullptr, 200);
}

}  // namespace
}  // namespace slotd::testing
