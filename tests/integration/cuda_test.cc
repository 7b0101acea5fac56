// The CUDA plugin end to end, with NVML answered by the fake libnvidia-ml:
// the real dlopen and discovery code, real slotd processes, real containers.
#include <signal.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include "integration/harness.h"
#include "resources/cuda/cuda_plugin.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

const char* const kUuids[] = {"GPU-0a0a0a0a-1111-2222-3333-000000000000", "GPU-1b1b1b1b-1111-2222-3333-000000000001",
                              "GPU-2c2c2c2c-1111-2222-3333-000000000002", "GPU-3d3d3d3d-1111-2222-3333-000000000003"};

// Writes a fake NVML file with four GPUs (two per NUMA node) and points the
// fake library, in this process and the agents it starts, at it.
class Cuda : public ::testing::Test {
 protected:
  void SetUp() override {
    json gpus = json::array();
    for (int i = 0; i < 4; ++i)
      gpus.push_back({{"uuid", kUuids[i]},
                      {"name", "Fake H200"},
                      {"memory", "141g"},
                      {"minor", i},
                      {"pci_bus_id", "00000000:1" + std::to_string(i) + ":00.0"},
                      {"numa_node", i / 2}});
    file_ = dir_.path() + "/nvml.json";
    WriteFile(file_, json{{"gpus", gpus}}.dump());
    setenv("SLOTD_FAKE_NVML_FILE", file_.c_str(), 1);
  }

  static AgentOptions CudaAgent(const std::string& name, const std::string& cuda_section) {
    AgentOptions o;
    o.id = "it-" + RunTag() + "-" + name;
    o.cores = "0-1";
    o.extra_toml = "[resource.cuda]\nnvml-library = \"" + std::string(SLOTD_FAKE_NVML_PATH) + "\"\n" + cuda_section;
    return o;
  }

  TempDir dir_;
  std::string file_;
};

TEST_F(Cuda, DiscoversGpusAndOwnsExactlyTheAllowListByIndexAndUuid) {
  AgentProcess agent(CudaAgent("disc", "allowed-devices = [\"1\", \"" + std::string(kUuids[3]) + "\"]\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json slot = agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cuda.device"];
  EXPECT_EQ(slot["capacity"], 2);
  ASSERT_EQ(slot["devices"].size(), 2u);
  json gpu = slot["devices"][0];
  EXPECT_EQ(gpu["id"], kUuids[1]);
  EXPECT_EQ(gpu["index"], 1);
  EXPECT_EQ(gpu["name"], "Fake H200");
  EXPECT_EQ(gpu["memory"], 141ull << 30);
  EXPECT_EQ(gpu["minor"], 1);
  EXPECT_EQ(gpu["pci_bus_id"], "00000000:11:00.0");
  EXPECT_EQ(gpu["numa_node"], 0);
  EXPECT_EQ(slot["devices"][1]["id"], kUuids[3]);
  EXPECT_EQ(slot["devices"][1]["numa_node"], 1);
}

TEST_F(Cuda, EnvModeGivesAContainerExactlyItsGpus) {
  AgentProcess agent(CudaAgent("env", "attach = \"env\"\nallowed-devices = [\"0\", \"2\", \"3\"]\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel({{"kernel_id", "g2"},
                               {"image", kTestImage},
                               {"command", {"sleep", "3600"}},
                               {"resources", {{"cpu", 1}, {"cuda.device", 2}}}});
  json held = k["allocations"]["devices"]["cuda"];
  ASSERT_EQ(held.size(), 2u);
  std::string list = held[0].get<std::string>() + "," + held[1].get<std::string>();
  std::string env = agent.CallJson("POST", "/v1/kernels/g2/exec", {{"command", {"env"}}}, 200)["stdout"];
  EXPECT_NE(env.find("NVIDIA_VISIBLE_DEVICES=" + list + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("CUDA_VISIBLE_DEVICES=" + list + "\n"), std::string::npos) << env;

  // A kernel without GPUs sees none, whatever its image would say.
  agent.CreateKernel({{"kernel_id", "g0"}, {"image", kTestImage}, {"command", {"sleep", "3600"}}});
  env = agent.CallJson("POST", "/v1/kernels/g0/exec", {{"command", {"env"}}}, 200)["stdout"];
  EXPECT_NE(env.find("NVIDIA_VISIBLE_DEVICES=void\n"), std::string::npos) << env;

  // A user may not widen what the kernel sees.
  json escape = {{"image", kTestImage}, {"env", {{"NVIDIA_VISIBLE_DEVICES", "all"}}}};
  HttpResponse res = agent.Call("POST", "/v1/kernels", escape.dump());
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("env.NVIDIA_VISIBLE_DEVICES"), std::string::npos) << res.body;

  // The GPUs are restored from the labels after a SIGKILL.
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/g2", nullptr, 200)["allocations"]["devices"]["cuda"], held);
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cuda.device"]["used"], 2);
}

TEST_F(Cuda, DeviceRequestsModeAsksTheEngineForTheNvidiaDriverWithUuids) {
  CudaConfig config;
  config.nvml_library = SLOTD_FAKE_NVML_PATH;
  config.attach = "device-requests";
  auto nvml = LoadNvml(config.nvml_library);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  auto plugin = CudaPlugin::Create(config, std::move(*nvml));
  ASSERT_TRUE(plugin.ok()) << plugin.status().message();
  ResourceRequest request;
  request.devices["cuda.device"] = 2;
  Allocation alloc;
  ASSERT_TRUE((*plugin)->Allocate("dr", request, alloc).ok());

  ContainerSpec spec;
  spec.name = "slotd-it-" + RunTag() + "-devreq";
  spec.image = kTestImage;
  spec.command = {"true"};
  (*plugin)->Apply(alloc, spec);
  auto id = Engine().Create(spec);  // create only: this engine has no nvidia runtime to start it
  if (EngineIsPodman()) {
    // Podman would drop the requests and start the container without its GPUs.
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), Status::Code::kFailedPrecondition);
    EXPECT_NE(id.status().message().find("ignores device requests"), std::string::npos) << id.status().message();
    return;
  }
  ASSERT_TRUE(id.ok()) << id.status().message();
  std::string socket = DockerHost().substr(std::string("unix://").size());
  auto raw = HttpClient::Unix(socket).Request("GET", "/v1.41/containers/" + *id + "/json");
  (void)Engine().Remove(*id, true);
  ASSERT_TRUE(raw.ok());
  json requests = json::parse(raw->body)["HostConfig"]["DeviceRequests"];
  ASSERT_EQ(requests.size(), 1u) << raw->body;
  EXPECT_EQ(requests[0]["Driver"], "nvidia");
  EXPECT_EQ(requests[0]["DeviceIDs"], alloc.devices["cuda"]);
  EXPECT_EQ(requests[0]["Capabilities"], json({{"gpu"}}));
}

TEST_F(Cuda, DeviceRequestsKernelOnAnEngineWithoutNvidiaFailsCleanly) {
  AgentProcess agent(CudaAgent("noruntime", ""));
  ASSERT_TRUE(agent.Start()) << agent.log();
  HttpResponse res = agent.Call(
      "POST", "/v1/kernels",
      json{{"kernel_id", "needs-gpu"}, {"image", kTestImage}, {"resources", {{"cuda.device", 1}}}}.dump());
  EXPECT_GE(res.status, 400) << res.body;
  // Docker refuses the start (no nvidia runtime); the agent refuses to ask
  // Podman, which would start the kernel without its GPU.
  EXPECT_NE(res.body.find(EngineIsPodman() ? "ignores device requests" : "starting the container"), std::string::npos)
      << res.body;
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cuda.device"]["used"], 0);
  EXPECT_EQ(agent.Call("GET", "/v1/kernels/needs-gpu").status, 404);
  auto left = Engine().List({"ai.backend.owner=" + agent.options().id});
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

TEST_F(Cuda, AnAllowListEntryThatMatchesNoGpuStopsTheStart) {
  AgentProcess agent(CudaAgent("unknown", "allowed-devices = [\"0\", \"7\"]\n"));
  EXPECT_FALSE(agent.Start());
  EXPECT_EQ(agent.exit_code(), 1);
  std::string log = agent.log();
  EXPECT_NE(log.find("resource.cuda.allowed-devices: \"7\" matches no GPU on this node"), std::string::npos) << log;
  EXPECT_NE(log.find(std::string("3 ") + kUuids[3] + " (Fake H200)"), std::string::npos) << log;
}

TEST_F(Cuda, MissingNvmlStopsTheStartSayingWhatToDo) {
  AgentOptions o = CudaAgent("nonvml", "");
  o.extra_toml = "[resource.cuda]\nnvml-library = \"/nonexistent/libnvidia-ml.so.1\"\n";
  AgentProcess agent(o);
  EXPECT_FALSE(agent.Start());
  EXPECT_EQ(agent.exit_code(), 1);
  std::string log = agent.log();
  EXPECT_NE(log.find("cannot load NVML from \"/nonexistent/libnvidia-ml.so.1\""), std::string::npos) << log;
  EXPECT_NE(log.find("nvml-library"), std::string::npos) << log;
}

}  // namespace
}  // namespace slotd::testing
