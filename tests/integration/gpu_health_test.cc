// GPU health, drains and MIG end to end: real slotd processes and containers,
// NVML answered by the fake libnvidia-ml, whose file each test rewrites while
// the agents run (an Xid, a GPU gone, MIG instances).
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <thread>

#include "integration/harness.h"
#include "testing/eventually.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

const char* const kUuids[] = {"GPU-0a0a0a0a-1111-2222-3333-000000000000", "GPU-1b1b1b1b-1111-2222-3333-000000000001",
                              "GPU-2c2c2c2c-1111-2222-3333-000000000002", "GPU-3d3d3d3d-1111-2222-3333-000000000003"};
const char* const kMig[] = {"MIG-a0a0a0a0-5555-6666-7777-000000000000", "MIG-a1a1a1a1-5555-6666-7777-000000000001",
                            "MIG-a2a2a2a2-5555-6666-7777-000000000002"};

class GpuHealth : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = dir_.path() + "/nvml.json";
    Write(Gpus(4), json::array());
    setenv("SLOTD_FAKE_NVML_FILE", file_.c_str(), 1);
  }

  // `n` whole GPUs, two per NUMA node.
  static json Gpus(int n) {
    json gpus = json::array();
    for (int i = 0; i < n; ++i)
      gpus.push_back({{"uuid", kUuids[i]}, {"name", "Fake H200"}, {"memory", "141g"}, {"numa_node", i / 2}});
    return gpus;
  }

  void Write(const json& gpus, const json& events) {
    WriteFile(file_ + ".tmp", json{{"gpus", gpus}, {"events", events}}.dump());
    ASSERT_EQ(::rename((file_ + ".tmp").c_str(), file_.c_str()), 0);
  }

  static AgentOptions CudaAgent(const std::string& name, const std::string& cuda_section) {
    AgentOptions o;
    o.id = "it-" + RunTag() + "-" + name;
    o.cores = "0";
    o.extra_toml = "[resource.cuda]\nnvml-library = \"" + std::string(SLOTD_FAKE_NVML_PATH) +
                   "\"\nattach = \"env\"\n" + cuda_section;
    return o;
  }

  static json Sleeper(const std::string& id, const std::string& slot, int count) {
    return {{"kernel_id", id},
            {"image", kTestImage},
            {"command", {"sleep", "3600"}},
            {"resources", {{"cpu", 1}, {"mem", "32m"}, {slot, count}}}};
  }

  // The device `id` as GET /v1/agent shows it under `slot`; null when absent.
  static json DeviceOf(const AgentProcess& agent, const std::string& id, const std::string& slot = "cuda.device") {
    json resources = agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"];
    if (!resources.contains(slot)) return nullptr;
    for (const auto& d : resources[slot]["devices"])
      if (d["id"] == id) return d;
    return nullptr;
  }

  TempDir dir_;
  std::string file_;
};

TEST_F(GpuHealth, AnXidMakesItsGpuUnhealthyNeverAllocatedReportedAndClearable) {
  AgentProcess agent(CudaAgent("xid", ""));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel(Sleeper("on-gpu", "cuda.device", 1));
  const std::string held = k["allocations"]["devices"]["cuda"][0];

  Write(Gpus(4), json::array({{{"id", 1}, {"gpu", held}, {"xid", 79}}}));
  ASSERT_TRUE(Eventually([&] { return DeviceOf(agent, held)["healthy"] == false; }, std::chrono::seconds(10)));
  json device = DeviceOf(agent, held);
  EXPECT_EQ(device["health"], "unhealthy");
  EXPECT_EQ(device["reason"], "xid 79");
  EXPECT_EQ(device["held_by"], "on-gpu");  // the kernel keeps it
  HttpResponse metrics = agent.Call("GET", "/metrics");
  EXPECT_NE(metrics.body.find("slotd_device_healthy{agent_id=\"" + agent.options().id + "\",device=\"" + held +
                              "\",plugin=\"cuda\"} 0"),
            std::string::npos)
      << metrics.body;

  // The kernel stays (on-unhealthy = "report") with a condition naming the device.
  ASSERT_TRUE(Eventually([&] {
    return !agent.CallJson("GET", "/v1/kernels/on-gpu", nullptr, 200)["condition"].is_null();
  }));
  json kernel = agent.CallJson("GET", "/v1/kernels/on-gpu", nullptr, 200);
  EXPECT_EQ(kernel["state"], "RUNNING");
  EXPECT_NE(kernel["condition"].get<std::string>().find(held + " is unhealthy: xid 79"), std::string::npos)
      << kernel.dump();

  // Never allocated, not even once its kernel is gone: three GPUs are free, not four.
  agent.CallJson("DELETE", "/v1/kernels/on-gpu", nullptr, 200);
  HttpResponse all = agent.Call("POST", "/v1/kernels", Sleeper("all", "cuda.device", 4).dump());
  EXPECT_EQ(all.status, 422) << all.body;
  EXPECT_NE(all.body.find("free 3 of 4 (1 unhealthy)"), std::string::npos) << all.body;

  // Cleared by the operator (by index or UUID), it is healthy and allocatable again.
  HttpResponse cleared = agent.Call("POST", "/v1/devices/" + held + "/clear");
  EXPECT_EQ(cleared.status, 200) << cleared.body;
  EXPECT_EQ(DeviceOf(agent, held)["healthy"], true);
  EXPECT_EQ(agent.Call("POST", "/v1/devices/" + held + "/clear").status, 409);
  agent.CreateKernel(Sleeper("all", "cuda.device", 4));
}

TEST_F(GpuHealth, OnUnhealthyStopStopsTheKernelsOfTheDevice) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two cores: one per kernel";
  AgentOptions options = CudaAgent("stop", "on-unhealthy = \"stop\"\n");
  options.cores = "0-1";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel(Sleeper("doomed", "cuda.device", 1));
  agent.CreateKernel(Sleeper("bystander", "cuda.device", 1));
  const std::string held = k["allocations"]["devices"]["cuda"][0];
  Write(Gpus(4), json::array({{{"id", 1}, {"gpu", held}, {"xid", 48}}}));
  ASSERT_TRUE(Eventually(
      [&] { return agent.CallJson("GET", "/v1/kernels/doomed", nullptr, 200)["state"] == "TERMINATED"; },
      std::chrono::seconds(30)));
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/doomed", nullptr, 200)["reason"], "device unhealthy");
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/bystander", nullptr, 200)["state"], "RUNNING");
  // An Xid of the application's own making (13) is not critical.
  Write(Gpus(4), json::array({{{"id", 1}, {"gpu", held}, {"xid", 48}}, {{"id", 2}, {"gpu", kUuids[3]}, {"xid", 13}}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(DeviceOf(agent, kUuids[3])["healthy"], true);
}

TEST_F(GpuHealth, DrainsAndMarksSurviveARestart) {
  AgentProcess agent(CudaAgent("drain", ""));
  ASSERT_TRUE(agent.Start()) << agent.log();
  HttpResponse drained = agent.Call("POST", "/v1/devices/1/drain");
  ASSERT_EQ(drained.status, 200) << drained.body;
  EXPECT_EQ(json::parse(drained.body)["devices"], json::array({kUuids[1]}));
  EXPECT_EQ(agent.Call("POST", "/v1/devices/GPU-not-mine/drain").status, 404);
  Write(Gpus(4), json::array({{{"id", 1}, {"gpu", kUuids[2]}, {"xid", 79}}}));
  ASSERT_TRUE(Eventually([&] { return DeviceOf(agent, kUuids[2])["healthy"] == false; }));

  agent.Kill(SIGTERM);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(DeviceOf(agent, kUuids[1])["drained"], true) << agent.CallJson("GET", "/v1/agent", nullptr, 200).dump()
                                                        << agent.log();
  EXPECT_EQ(DeviceOf(agent, kUuids[2])["reason"], "xid 79");
  HttpResponse two = agent.Call("POST", "/v1/kernels", Sleeper("two", "cuda.device", 3).dump());
  EXPECT_EQ(two.status, 422) << two.body;
  EXPECT_NE(two.body.find("free 2 of 4 (1 unhealthy, 1 drained)"), std::string::npos) << two.body;

  ASSERT_EQ(agent.Call("POST", "/v1/devices/" + std::string(kUuids[1]) + "/undrain").status, 200);
  agent.CreateKernel(Sleeper("three", "cuda.device", 3));
}

TEST_F(GpuHealth, AGpuGoneWhileTheAgentWasDownDoesNotStopItsStart) {
  std::string list;
  for (const char* uuid : kUuids) list += std::string(list.empty() ? "" : ", ") + "\"" + uuid + "\"";
  AgentProcess agent(CudaAgent("gone", "allowed-devices = [" + list + "]\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel(Sleeper("orphan", "cuda.device", 1));
  const std::string held = k["allocations"]["devices"]["cuda"][0];
  agent.Kill(SIGKILL);

  json remaining = json::array();
  for (const json& gpu : Gpus(4))
    if (gpu["uuid"] != held) remaining.push_back(gpu);
  Write(remaining, json::array());
  ASSERT_TRUE(agent.Start()) << agent.log();
  json kernel = agent.CallJson("GET", "/v1/kernels/orphan", nullptr, 200);
  EXPECT_EQ(kernel["state"], "RUNNING");
  EXPECT_EQ(kernel["allocations"]["devices"]["cuda"], json::array({held}));
  ASSERT_FALSE(kernel["condition"].is_null()) << kernel.dump();
  EXPECT_NE(kernel["condition"].get<std::string>().find("missing"), std::string::npos) << kernel.dump();
  json device = DeviceOf(agent, held);
  EXPECT_EQ(device["healthy"], false);
  EXPECT_EQ(device["held_by"], "orphan");
}

// GPU 0 split into two 1g.18gb instances and one 3g.71gb, GPU 1 whole: agent
// A owns GPU 1 and one small instance, agent B the other two; a third config
// that owns GPU 0 whole is refused naming both.
TEST_F(GpuHealth, MigInstancesOfOneGpuAreSharedByAgentsWithTheOverlapChecked) {
  json gpus = Gpus(2);
  gpus[0]["mig"] = {{"instances",
                     {{{"uuid", kMig[0]}, {"profile", "1g.18gb"}, {"memory", "16g"}, {"gpu_instance", 9}},
                      {{"uuid", kMig[1]}, {"profile", "1g.18gb"}, {"memory", "16g"}, {"gpu_instance", 10}},
                      {{"uuid", kMig[2]}, {"profile", "3g.71gb"}, {"memory", "70g"}, {"gpu_instance", 2}}}}};
  Write(gpus, json::array());
  TempDir claims;
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two cores: one per agent";
  auto agent_of = [&](const std::string& name, const std::string& list, int port) {
    AgentOptions o = CudaAgent(name, "allowed-devices = [" + list + "]\n");
    o.cores = port == 33100 ? "0" : "1";
    o.claims_dir = claims.path();
    o.port_first = port;
    o.port_last = port + 9;
    return o;
  };
  AgentProcess a(agent_of("miga", "\"1\", \"" + std::string(kMig[0]) + "\"", 33100));
  AgentProcess b(agent_of("migb", "\"" + std::string(kMig[1]) + "\", \"" + kMig[2] + "\"", 33200));
  ASSERT_TRUE(a.Start()) << a.log();
  ASSERT_TRUE(b.Start()) << b.log() << a.log();
  AgentProcess whole(agent_of("whole", "\"0\"", 33300));
  EXPECT_FALSE(whole.Start());
  EXPECT_NE(whole.log().find(kUuids[0]), std::string::npos) << whole.log();
  EXPECT_NE(whole.log().find(a.options().id), std::string::npos) << whole.log();
  EXPECT_NE(whole.log().find(b.options().id), std::string::npos) << whole.log();

  json slots = a.CallJson("GET", "/v1/agent", nullptr, 200)["resources"];
  EXPECT_EQ(slots["cuda.device"]["capacity"], 1);
  EXPECT_EQ(slots["cuda.mig-1c18g"]["capacity"], 1);
  EXPECT_EQ(slots["cuda.mig-1c18g"]["devices"][0]["parent"], kUuids[0]);
  EXPECT_EQ(b.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cuda.mig-3c71g"]["capacity"], 1);

  json ka = a.CreateKernel(Sleeper("small", "cuda.mig-1c18g", 1));
  json kb = b.CreateKernel(Sleeper("big", "cuda.mig-3c71g", 1));
  std::string env = a.CallJson("POST", "/v1/kernels/small/exec", {{"command", {"env"}}}, 200)["stdout"];
  EXPECT_NE(env.find("NVIDIA_VISIBLE_DEVICES=" + std::string(kMig[0]) + "\n"), std::string::npos) << env;
  env = b.CallJson("POST", "/v1/kernels/big/exec", {{"command", {"env"}}}, 200)["stdout"];
  EXPECT_NE(env.find("NVIDIA_VISIBLE_DEVICES=" + std::string(kMig[2]) + "\n"), std::string::npos) << env;

  // Attribution per instance: the small kernel's process on its instance.
  auto info = Engine().Inspect(ka["container_id"]);
  ASSERT_TRUE(info.ok());
  gpus[0]["mig"]["instances"][0]["processes"] = json::array({{{"pid", info->pid}, {"used_memory", "2g"}}});
  Write(gpus, json::array());
  json use;
  ASSERT_TRUE(Eventually(
      [&] {
        json stats = a.CallJson("GET", "/v1/kernels/small/stats", nullptr, 200);
        if (!stats.contains("devices") || stats["devices"].empty()) return false;
        use = stats["devices"][0];
        return use.value("memory_used_bytes", 0ull) > 0;
      },
      std::chrono::seconds(20)));
  EXPECT_EQ(use["device"], kMig[0]);
  EXPECT_EQ(use["memory_used_bytes"].get<uint64_t>(), 2ull << 30);
}

}  // namespace
}  // namespace slotd::testing

namespace slotd::testing {
namespace {

// Reads the agent's event stream until `text` comes (or 20 s pass); returns what came.
std::string ReadEventsUntil(RawClient& events, const std::string& text) {
  std::string seen;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (seen.find(text) == std::string::npos && std::chrono::steady_clock::now() < give_up)
    seen += events.Read(std::chrono::milliseconds(200));
  return seen;
}

TEST_F(GpuHealth, EccErrorsAndALostGpuArePolledEventedAndClearThemselves) {
  AgentProcess agent(CudaAgent("poll", ""));
  ASSERT_TRUE(agent.Start()) << agent.log();
  RawClient events(agent.socket_path());
  ASSERT_TRUE(events.connected());
  events.Send("GET /v1/events HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_NE(events.Read(std::chrono::seconds(5), nullptr, "\r\n\r\n").find("200"), std::string::npos);

  json gpus = Gpus(4);
  gpus[1]["ecc_uncorrected"] = 3;
  gpus[2]["lost"] = true;
  Write(gpus, json::array());
  std::string seen = ReadEventsUntil(events, "gpu lost");
  EXPECT_NE(seen.find("event: device_unhealthy"), std::string::npos) << seen;
  EXPECT_NE(seen.find("\"reason\":\"ecc uncorrected 3\""), std::string::npos) << seen;
  EXPECT_NE(seen.find("\"device\":\"" + std::string(kUuids[2]) + "\""), std::string::npos) << seen;
  ASSERT_TRUE(Eventually([&] { return DeviceOf(agent, kUuids[1])["reason"] == "ecc uncorrected 3"; }));
  CommandResult info = Slotctl({"--socket", agent.socket_path(), "info"});
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("unhealthy (gpu lost)"), std::string::npos) << info.out;

  // A condition the poll no longer finds clears without the operator.
  Write(Gpus(4), json::array());
  seen = ReadEventsUntil(events, std::string("\"device\":\"") + kUuids[2] + "\",\"health\":\"healthy\"");
  EXPECT_NE(seen.find("event: device_healthy"), std::string::npos) << seen;
  ASSERT_TRUE(Eventually([&] { return DeviceOf(agent, kUuids[1])["healthy"] == true; }));
}

// A driver call that hangs makes the devices of unknown health (never
// allocated) while the API keeps answering; they come back when it answers.
TEST_F(GpuHealth, AHungNvmlCallMakesTheDevicesUnknownAndNeverSlowsTheApi) {
  AgentProcess agent(CudaAgent("hang", ""));
  ASSERT_TRUE(agent.Start()) << agent.log();
  WriteFile(file_ + ".tmp", json{{"gpus", Gpus(4)}, {"hang", {{"nvmlDeviceGetTotalEccErrors", 9000}}}}.dump());
  ASSERT_EQ(::rename((file_ + ".tmp").c_str(), file_.c_str()), 0);
  ASSERT_TRUE(Eventually([&] { return DeviceOf(agent, kUuids[0])["health"] == "unknown"; }, std::chrono::seconds(20)));
  HttpResponse refused = agent.Call("POST", "/v1/kernels", Sleeper("while-hung", "cuda.device", 1).dump());
  EXPECT_EQ(refused.status, 422) << refused.body;
  EXPECT_NE(refused.body.find("4 of unknown health"), std::string::npos) << refused.body;
  EXPECT_NE(DeviceOf(agent, kUuids[0])["reason"].get<std::string>().find("NVML has not answered"), std::string::npos);

  Write(Gpus(4), json::array());
  ASSERT_TRUE(Eventually([&] { return DeviceOf(agent, kUuids[0])["healthy"] == true; }, std::chrono::seconds(30)));
  agent.CreateKernel(Sleeper("after", "cuda.device", 1));
}

// slotd check reads MIG configs as the agents would claim them: instances of
// one GPU for two agents pass; the GPU whole beside them clashes with both.
TEST_F(GpuHealth, SlotdCheckUnderstandsTheMigHierarchy) {
  json gpus = Gpus(2);
  gpus[0]["mig"] = {{"instances",
                     {{{"uuid", kMig[0]}, {"profile", "1g.18gb"}, {"memory", "16g"}, {"gpu_instance", 9}},
                      {{"uuid", kMig[1]}, {"profile", "1g.18gb"}, {"memory", "16g"}, {"gpu_instance", 10}}}}};
  Write(gpus, json::array());
  TempDir claims;
  auto config_of = [&](const std::string& name, const std::string& list, const std::string& core, int port) {
    AgentOptions o = CudaAgent(name, "allowed-devices = [" + list + "]\n");
    o.claims_dir = claims.path();
    o.cores = core;
    o.memory = "256m";
    o.port_first = port;
    o.port_last = port + 9;
    return o;
  };
  AgentProcess a(config_of("checka", "\"1\", \"" + std::string(kMig[0]) + "\"", "0", 33400));
  AgentProcess b(config_of("checkb", "\"" + std::string(kMig[1]) + "\"", "1", 33500));
  AgentProcess whole(config_of("checkw", "\"" + std::string(kUuids[0]) + "\"", "2", 33600));
  const std::string slotd = std::string(SLOTD_BIN_DIR) + "/slotd";
  const std::string node = "--node-cores=0-3";
  CommandResult good = RunCommand({slotd, "check", node, a.config_path(), b.config_path()});
  EXPECT_EQ(good.exit_code, 0) << good.out << good.err;
  CommandResult bad = RunCommand({slotd, "check", node, a.config_path(), b.config_path(), whole.config_path()});
  EXPECT_EQ(bad.exit_code, 1) << bad.out << bad.err;
  EXPECT_NE(bad.out.find(std::string(kUuids[0]) + "/" + kMig[0] + " and " + kUuids[0]), std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find(std::string(kUuids[0]) + "/" + kMig[1] + " and " + kUuids[0]), std::string::npos)
      << bad.out;
}

}  // namespace
}  // namespace slotd::testing
