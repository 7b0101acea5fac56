// The mock accelerator end to end: exclusive devices, their environment,
// restore, allow-lists and topology, through real slotd processes.
#include <signal.h>

#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "model/kernel.h"
#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// Four mock devices; mock0 and mock2 on NUMA node 1, the others on node 0.
std::string MockSection(const std::string& allowed = "") {
  std::string text =
      "[resource.mock]\n"
      "devices = [\n"
      "  { id = \"mock0\", memory = \"16g\", processing-units = 108, numa-node = 1 },\n"
      "  { id = \"mock1\", memory = \"16g\", processing-units = 108, numa-node = 0 },\n"
      "  { id = \"mock2\", memory = \"8g\", processing-units = 54, numa-node = 1 },\n"
      "  { id = \"mock3\", memory = \"8g\", processing-units = 54, numa-node = 0 },\n"
      "]\n";
  if (!allowed.empty()) text += "allowed-devices = " + allowed + "\n";
  return text;
}

AgentOptions MockAgent(const std::string& name, const std::string& allowed = "") {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = "0-1";
  o.extra_toml = MockSection(allowed);
  return o;
}

json DeviceKernel(const std::string& id, int devices, int cpu = 1) {
  return {{"kernel_id", id},
          {"image", kTestImage},
          {"command", {"sleep", "3600"}},
          {"resources", {{"cpu", cpu}, {"mem", "16m"}, {"mock.device", devices}}}};
}

TEST(Mock, ConcurrentCreatesNeverShareADeviceAndLeakNothing) {
  AgentProcess agent(MockAgent("race"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  // 20 requests for 1 or 2 devices each (30 in all) against 4 devices and 2 cores.
  std::vector<HttpResponse> responses(20);
  std::vector<std::thread> threads;
  for (int i = 0; i < 20; ++i) {
    threads.emplace_back([&, i] {
      responses[i] = agent.Call("POST", "/v1/kernels", DeviceKernel("r" + std::to_string(i), 1 + i % 2, 1).dump());
    });
  }
  for (auto& t : threads) t.join();

  std::set<std::string> held;
  std::set<int> cores;
  int created = 0;
  for (const auto& res : responses) {
    if (res.status == 201) {
      ++created;
      json k = json::parse(res.body);
      for (const auto& d : k["allocations"]["devices"]["mock"])
        EXPECT_TRUE(held.insert(d.get<std::string>()).second) << "device " << d << " handed out twice";
      for (const auto& c : k["allocations"]["cpu"])
        EXPECT_TRUE(cores.insert(c.get<int>()).second) << "core " << c << " handed out twice";
    } else {
      EXPECT_EQ(res.status, 422) << res.body;
      EXPECT_NE(res.body.find("insufficient"), std::string::npos) << res.body;
    }
  }
  EXPECT_GE(created, 1);
  EXPECT_LE(created, 2);  // two cores
  json info = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(info["resources"]["mock.device"]["used"], held.size());

  json kernels = agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"];
  for (const auto& k : kernels)
    agent.CallJson("DELETE", "/v1/kernels/" + k["kernel_id"].get<std::string>(), nullptr, 200);
  info = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(info["resources"]["mock.device"]["used"], 0);
  EXPECT_EQ(info["resources"]["cpu"]["used"], 0);
  EXPECT_EQ(info["resources"]["mem"]["used"], 0);
  for (const auto& d : info["resources"]["mock.device"]["devices"]) EXPECT_TRUE(d["held_by"].is_null()) << d;
}

TEST(Mock, AKernelSeesExactlyItsDevicesAndTheAllowListNarrowsWhatIsOwned) {
  AgentProcess agent(MockAgent("env", R"(["mock2", "mock3"])"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json info = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  json devices = info["resources"]["mock.device"]["devices"];
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(devices[0]["id"], "mock2");
  EXPECT_EQ(devices[0]["memory"], 8ull << 30);
  EXPECT_EQ(devices[0]["processing_units"], 54);
  EXPECT_EQ(devices[1]["id"], "mock3");
  EXPECT_EQ(info["resources"]["mock.device"]["capacity"], 2);

  json k = agent.CreateKernel(DeviceKernel("two", 2));
  EXPECT_EQ(k["allocations"]["devices"]["mock"], json({"mock2", "mock3"}));
  json out = agent.CallJson("POST", "/v1/kernels/two/exec", {{"command", {"env"}}}, 200);
  std::string env = out["stdout"];
  EXPECT_NE(env.find("SLOTD_MOCK_DEVICES=mock2,mock3\n"), std::string::npos) << env;
  EXPECT_NE(env.find("SLOTD_MOCK_DEVICE_COUNT=2\n"), std::string::npos) << env;

  HttpResponse res = agent.Call("POST", "/v1/kernels", DeviceKernel("more", 1).dump());
  EXPECT_EQ(res.status, 422);
  EXPECT_NE(res.body.find("insufficient mock.device: requested 1, free 0 of 2"), std::string::npos) << res.body;
  res = agent.Call("POST", "/v1/kernels", json{{"image", kTestImage}, {"resources", {{"cuda.device", 1}}}}.dump());
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("resources.cuda.device"), std::string::npos) << res.body;

  CommandResult r = Slotctl({"--socket", agent.socket_path(), "info"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("mock.device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mock3"), std::string::npos) << r.out;
}

TEST(Mock, DevicesPreferTheNumaNodeOfTheCores) {
  AgentProcess agent(MockAgent("numa"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  // The test machine's cores are all on node 0 (sysfs) or unknown (node 0):
  // mock1, on node 0, beats mock0, which comes first but sits on node 1.
  json k = agent.CreateKernel(DeviceKernel("near", 1));
  EXPECT_EQ(k["allocations"]["devices"]["mock"], json({"mock1"}));
  EXPECT_EQ(k["allocations"]["numa_node"], 0);
  // Now node 0 has one free device (mock3) and node 1 has two but no cores:
  // no single node fits one core and two devices, so placement takes any.
  json far = agent.CreateKernel(DeviceKernel("far", 2));
  EXPECT_FALSE(far["allocations"].contains("numa_node")) << far.dump();
  EXPECT_EQ(far["allocations"]["devices"]["mock"], json({"mock0", "mock2"}));
}

TEST(Mock, AllocationsSurviveSigkillAndAMismatchedRestoreRefusesToStart) {
  AgentProcess agent(MockAgent("restore"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel(DeviceKernel("holder", 2));
  json held = k["allocations"]["devices"]["mock"];

  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json again = agent.CallJson("GET", "/v1/kernels/holder", nullptr, 200);
  EXPECT_EQ(again["allocations"], k["allocations"]);
  json info = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(info["resources"]["mock.device"]["used"], 2);
  HttpResponse res = agent.Call("POST", "/v1/kernels", DeviceKernel("greedy", 3).dump());
  EXPECT_EQ(res.status, 422);
  EXPECT_NE(res.body.find("free 2 of 4"), std::string::npos) << res.body;

  // Narrow the allow-list so it no longer holds the kernel's first device.
  agent.Kill(SIGKILL);
  std::string first = held[0];
  std::string others;
  for (const char* id : {"mock0", "mock1", "mock2", "mock3"})
    if (id != first) others += std::string(others.empty() ? "" : ", ") + "\"" + id + "\"";
  agent.SetExtraToml(MockSection("[" + others + "]"));
  EXPECT_FALSE(agent.Start());
  EXPECT_EQ(agent.exit_code(), 1);
  std::string log = agent.log();
  EXPECT_NE(log.find("kernel holder"), std::string::npos) << log;
  EXPECT_NE(log.find("mock device " + first + " is not in this agent's resource.mock.allowed-devices"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("docker rm -f " + ContainerName(agent.options().id, "holder")), std::string::npos) << log;

  // Give the device back: the agent starts and the kernel is intact.
  agent.SetExtraToml(MockSection());
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/holder", nullptr, 200)["allocations"], k["allocations"]);
}

}  // namespace
}  // namespace slotd::testing
