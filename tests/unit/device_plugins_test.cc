// The device plugins (mock, and cuda through the fake libnvidia-ml) and the
// topology-aware placement of the agent core: which devices an agent owns,
// what a kernel gets and sees, the messages a user reads when a device cannot
// be given or restored, and that a kernel's cores and devices share one NUMA
// node whenever one node can hold them all.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "agent/agent.h"
#include "agent/watcher.h"
#include "model/label_codec.h"
#include "model/create_request.h"
#include "common/units.h"
#include "resources/cuda/cuda_plugin.h"
#include "resources/mock/mock_plugin.h"
#include "resources/cuda/nvml.h"
#include "testing/fake_clock.h"
#include "testing/fake_engine.h"
#include "testing/temp_tree.h"

namespace slotd {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;


// ---------------------------------------------------------------- helpers

// A request for `cpu` cores and `devices` of each device slot type.
ResourceRequest DeviceRequest(std::map<std::string, int> devices, int cpu = 1) {
  ResourceRequest request;
  request.cpu = cpu;
  request.devices = std::move(devices);
  return request;
}

// Every value `spec` sets for environment variable `name`, in order.
std::vector<std::string> EnvValues(const ContainerSpec& spec, const std::string& name) {
  std::vector<std::string> values;
  for (const std::string& entry : spec.env)
    if (entry.rfind(name + "=", 0) == 0) values.push_back(entry.substr(name.size() + 1));
  return values;
}

// Four mock devices, two per NUMA node: mock0 and mock1 on node 0, mock2 and
// mock3 on node 1; `allowed` is the allow-list (default: all of them).
MockConfig FourMockDevices(std::vector<std::string> allowed = {"mock0", "mock1", "mock2", "mock3"}) {
  MockConfig mock;
  mock.devices = {{"mock0", 16 * kGiB, 108, 0},
                  {"mock1", 16 * kGiB, 108, 0},
                  {"mock2", 32 * kGiB, 132, 1},
                  {"mock3", 32 * kGiB, 132, 1}};
  mock.allowed_devices = std::move(allowed);
  mock.allowed_devices_explicit = true;
  return mock;
}

// The ids `alloc` holds of `plugin` ("mock", "cuda").
std::vector<std::string> Held(const Allocation& alloc, const std::string& plugin) {
  auto it = alloc.devices.find(plugin);
  return it == alloc.devices.end() ? std::vector<std::string>{} : it->second;
}

// An allocation holding `ids` of `plugin`.
Allocation Holding(const std::string& plugin, std::vector<std::string> ids) {
  Allocation alloc;
  alloc.devices[plugin] = std::move(ids);
  return alloc;
}

// ----------------------------------------------------------- mock plugin

// An operator narrows an agent to some of the node's devices; the agent owns
// exactly those, in the order the allow-list gives, and hands them out in
// that order when no NUMA node is preferred.
TEST(MockPluginTest, AllowListNarrowsTheOwnedDevicesInItsOrder) {
  MockPlugin mock(FourMockDevices({"mock3", "mock0"}));
  EXPECT_EQ(mock.Name(), "mock");
  EXPECT_EQ(mock.DeviceSlots(), std::vector<std::string>{"mock.device"});
  EXPECT_EQ(mock.OwnedDevices(), (std::vector<std::string>{"mock3", "mock0"}));
  EXPECT_EQ(mock.Describe()["mock.device"]["capacity"], 2);

  Allocation first, second;
  ASSERT_TRUE(mock.Allocate("k1", DeviceRequest({{"mock.device", 1}}), first).ok());
  EXPECT_EQ(Held(first, "mock"), (std::vector<std::string>{"mock3"}));
  ASSERT_TRUE(mock.Allocate("k2", DeviceRequest({{"mock.device", 1}}), second).ok());
  EXPECT_EQ(Held(second, "mock"), (std::vector<std::string>{"mock0"}));
}

// Without an allow-list (the config resolves it to every declared device) the
// agent owns every device.
TEST(MockPluginTest, DefaultAllowListOwnsEveryDeclaredDevice) {
  MockConfig config = FourMockDevices();
  config.allowed_devices_explicit = false;
  MockPlugin mock(config);
  EXPECT_EQ(mock.OwnedDevices(), (std::vector<std::string>{"mock0", "mock1", "mock2", "mock3"}));
  EXPECT_EQ(mock.FreeByNumaNode(), (std::map<int, int>{{0, 2}, {1, 2}}));
}

// A request the agent cannot meet in full takes nothing, and the user reads
// how many were asked for, how many are free and how many the agent owns.
TEST(MockPluginTest, AllocationIsAllOrNothingWithAnExactMessage) {
  MockPlugin mock(FourMockDevices({"mock0", "mock2"}));
  Allocation refused;
  Status s = mock.Allocate("k1", DeviceRequest({{"mock.device", 3}}), refused);
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "insufficient mock.device: requested 3, free 2 of 2");
  EXPECT_TRUE(refused.devices.empty());
  EXPECT_EQ(mock.Describe()["mock.device"]["used"], 0);

  // With one taken, the message counts what is free now.
  Allocation held;
  ASSERT_TRUE(mock.Allocate("k2", DeviceRequest({{"mock.device", 1}}), held).ok());
  s = mock.Allocate("k3", DeviceRequest({{"mock.device", 2}}), refused);
  EXPECT_EQ(s.message(), "insufficient mock.device: requested 2, free 1 of 2");
  EXPECT_EQ(mock.Describe()["mock.device"]["used"], 1);
}

// A request that asks for no device of this plugin takes none and leaves the
// allocation without an entry for it.
TEST(MockPluginTest, ARequestWithoutDevicesTakesNone) {
  MockPlugin mock(FourMockDevices());
  Allocation alloc;
  ASSERT_TRUE(mock.Allocate("k1", DeviceRequest({}), alloc).ok());
  EXPECT_TRUE(alloc.devices.empty());
  ASSERT_TRUE(mock.Allocate("k2", DeviceRequest({{"cuda.device", 1}}), alloc).ok());  // another plugin's slot
  EXPECT_TRUE(alloc.devices.empty());
  EXPECT_EQ(mock.Describe()["mock.device"]["used"], 0);
}

// The placement's NUMA node wins over the allow-list order; when that node
// has too few free devices the rest come from the others.
TEST(MockPluginTest, PrefersThePlacementsNumaNodeThenFallsBack) {
  MockPlugin mock(FourMockDevices());
  Allocation on_node1;
  on_node1.numa_node = 1;
  ASSERT_TRUE(mock.Allocate("k1", DeviceRequest({{"mock.device", 1}}), on_node1).ok());
  EXPECT_EQ(Held(on_node1, "mock"), (std::vector<std::string>{"mock2"}));

  Allocation spills;
  spills.numa_node = 1;
  ASSERT_TRUE(mock.Allocate("k2", DeviceRequest({{"mock.device", 2}}), spills).ok());
  EXPECT_EQ(Held(spills, "mock"), (std::vector<std::string>{"mock3", "mock0"}));  // node 1 first, then node 0

  Allocation unplaced;  // no preference: allow-list order
  ASSERT_TRUE(mock.Allocate("k3", DeviceRequest({{"mock.device", 1}}), unplaced).ok());
  EXPECT_EQ(Held(unplaced, "mock"), (std::vector<std::string>{"mock1"}));
  EXPECT_EQ(mock.FreeByNumaNode(), (std::map<int, int>{}));
}

// Restoring a kernel whose label names a declared device outside this
// agent's allow-list is refused, naming the device and the config key, and
// takes nothing (not even the allowed devices listed before it).
TEST(MockPluginTest, ClaimRefusesADeviceOutsideAllowedDevices) {
  MockPlugin mock(FourMockDevices({"mock0", "mock2"}));
  Status s = mock.Claim("k1", Holding("mock", {"mock0", "mock1"}));
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(), "mock device mock1 is not in this agent's resource.mock.allowed-devices");
  EXPECT_EQ(mock.Describe()["mock.device"]["used"], 0);
}

// A device the node no longer has (removed from the declared devices, or a
// GPU gone from the bus) is refused with a message that says so.
TEST(MockPluginTest, ClaimRefusesADeviceNoLongerPresent) {
  MockPlugin mock(FourMockDevices());
  Status s = mock.Claim("k1", Holding("mock", {"mock2", "mock9"}));
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(), "mock device mock9 is no longer present on this node");
  EXPECT_EQ(mock.Describe()["mock.device"]["used"], 0);
}

// Two restored kernels can never share a device; the message names the holder.
TEST(MockPluginTest, ClaimRefusesADeviceHeldByAnotherKernel) {
  MockPlugin mock(FourMockDevices());
  ASSERT_TRUE(mock.Claim("k1", Holding("mock", {"mock1"})).ok());
  Status s = mock.Claim("k2", Holding("mock", {"mock3", "mock1"}));
  EXPECT_EQ(s.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(s.message(), "mock device mock1 is already held by kernel k1");
  EXPECT_EQ(mock.Describe()["mock.device"]["used"], 1);  // mock3 was not taken

  // The holder itself may claim again (a restart re-takes its allocation).
  EXPECT_TRUE(mock.Claim("k1", Holding("mock", {"mock1"})).ok());
  EXPECT_EQ(mock.Describe()["mock.device"]["used"], 1);
}

// A claimed device is the kernel's: allocation skips it.
TEST(MockPluginTest, ClaimedDevicesAreNotHandedOutAgain) {
  MockPlugin mock(FourMockDevices({"mock0", "mock1"}));
  ASSERT_TRUE(mock.Claim("k1", Holding("mock", {"mock0"})).ok());
  Allocation next;
  ASSERT_TRUE(mock.Allocate("k2", DeviceRequest({{"mock.device", 1}}), next).ok());
  EXPECT_EQ(Held(next, "mock"), (std::vector<std::string>{"mock1"}));
}

// Freeing twice, or freeing a kernel that holds nothing, changes nothing;
// another kernel's devices stay held.
TEST(MockPluginTest, FreeIsIdempotentAndReleasesOnlyThatKernel) {
  MockPlugin mock(FourMockDevices());
  Allocation a, b;
  ASSERT_TRUE(mock.Allocate("k1", DeviceRequest({{"mock.device", 2}}), a).ok());
  ASSERT_TRUE(mock.Allocate("k2", DeviceRequest({{"mock.device", 1}}), b).ok());
  mock.Free("k1");
  mock.Free("k1");
  mock.Free("never-allocated");
  EXPECT_EQ(mock.Describe()["mock.device"]["used"], 1);

  Allocation again;
  ASSERT_TRUE(mock.Allocate("k3", DeviceRequest({{"mock.device", 3}}), again).ok());
  EXPECT_EQ(Held(again, "mock"), (std::vector<std::string>{"mock0", "mock1", "mock3"}));  // around k2's mock2
}

// /v1/agent shows each owned device with its properties, NUMA node and the
// kernel that holds it (null when free); devices outside the allow-list are
// not shown at all.
TEST(MockPluginTest, DescribeListsOwnedDevicesWithPropertiesAndHolder) {
  MockPlugin mock(FourMockDevices({"mock0", "mock2"}));
  Allocation held;
  held.numa_node = 1;
  ASSERT_TRUE(mock.Allocate("k1", DeviceRequest({{"mock.device", 1}}), held).ok());

  json d = mock.Describe();
  ASSERT_EQ(d.size(), 1u);
  const json& slot = d["mock.device"];
  EXPECT_EQ(slot["capacity"], 2);
  EXPECT_EQ(slot["used"], 1);
  EXPECT_EQ(slot["free"], 1);
  ASSERT_EQ(slot["devices"].size(), 2u);
  const json& first = slot["devices"][0];
  EXPECT_EQ(first["id"], "mock0");
  EXPECT_EQ(first["numa_node"], 0);
  EXPECT_EQ(first["memory"], 16 * kGiB);
  EXPECT_EQ(first["processing_units"], 108);
  EXPECT_TRUE(first["held_by"].is_null());
  const json& second = slot["devices"][1];
  EXPECT_EQ(second["id"], "mock2");
  EXPECT_EQ(second["numa_node"], 1);
  EXPECT_EQ(second["memory"], 32 * kGiB);
  EXPECT_EQ(second["processing_units"], 132);
  EXPECT_EQ(second["held_by"], "k1");
}

// A kernel sees exactly its devices; one without devices sees an empty list
// and a count of 0 (so an image's own value cannot leak through).
TEST(MockPluginTest, ApplySetsTheMockEnvironment) {
  MockPlugin mock(FourMockDevices());
  ContainerSpec with;
  mock.Apply(Holding("mock", {"mock2", "mock0"}), with);
  EXPECT_EQ(EnvValues(with, "SLOTD_MOCK_DEVICES"), (std::vector<std::string>{"mock2,mock0"}));
  EXPECT_EQ(EnvValues(with, "SLOTD_MOCK_DEVICE_COUNT"), (std::vector<std::string>{"2"}));
  EXPECT_TRUE(with.device_requests.empty());
  EXPECT_TRUE(with.cdi_devices.empty());

  ContainerSpec without;
  mock.Apply(Allocation{}, without);
  EXPECT_EQ(EnvValues(without, "SLOTD_MOCK_DEVICES"), (std::vector<std::string>{""}));
  EXPECT_EQ(EnvValues(without, "SLOTD_MOCK_DEVICE_COUNT"), (std::vector<std::string>{"0"}));
}

// ----------------------------------------------------------- cuda plugin

constexpr char kGpu0[] = "GPU-aaaaaaaa-0000-4000-8000-000000000000";
constexpr char kGpu1[] = "GPU-bbbbbbbb-1111-4111-8111-111111111111";
constexpr char kGpu2[] = "GPU-cccccccc-2222-4222-8222-222222222222";
constexpr char kGpu3[] = "GPU-dddddddd-3333-4333-8333-333333333333";

// Four fake GPUs: 0 and 1 on NUMA node 0, 2 and 3 on node 1.
std::string FourGpusJson() {
  json gpus = json::array();
  const char* uuids[] = {kGpu0, kGpu1, kGpu2, kGpu3};
  for (int i = 0; i < 4; ++i) {
    gpus.push_back({{"uuid", uuids[i]},
                    {"name", i < 2 ? "Fake H100 80GB HBM3" : "Fake L40S"},
                    {"memory", i < 2 ? "80g" : "48g"},
                    {"minor", i},
                    {"numa_node", i / 2}});
  }
  return json{{"gpus", gpus}}.dump();
}

// A private temp directory with the fake NVML's GPU file in it
// (SLOTD_FAKE_NVML_FILE points there for the test), removed at the end.
class FakeGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "slotd-devices-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    file_ = (dir_ / "gpus.json").string();
    std::ofstream(file_) << FourGpusJson();
    setenv("SLOTD_FAKE_NVML_FILE", file_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("SLOTD_FAKE_NVML_FILE");
    fs::remove_all(dir_);
  }

  // A [resource.cuda] section loading the fake NVML.
  static CudaConfig Cuda(std::vector<std::string> allowed = {}, std::string attach = "device-requests") {
    CudaConfig config;
    config.allowed_devices_explicit = !allowed.empty();
    config.allowed_devices = std::move(allowed);
    config.nvml_library = SLOTD_FAKE_NVML_PATH;
    config.attach = std::move(attach);
    return config;
  }

  // CudaPlugin::Create over a fresh load of the fake NVML.
  static Result<std::unique_ptr<CudaPlugin>> Create(const CudaConfig& config) {
    Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(config.nvml_library);
    if (!nvml.ok()) return nvml.status();
    return CudaPlugin::Create(config, std::move(*nvml));
  }

  // Create, which must succeed.
  static std::unique_ptr<CudaPlugin> MustCreate(const CudaConfig& config) {
    Result<std::unique_ptr<CudaPlugin>> cuda = Create(config);
    EXPECT_TRUE(cuda.ok()) << cuda.status().message();
    return cuda.ok() ? std::move(*cuda) : nullptr;
  }

  fs::path dir_;
  std::string file_;
};

using CudaPluginTest = FakeGpuTest;

// Without allowed-devices the agent owns every GPU NVML reports, by UUID, in
// index order, with what NVML says about each.
TEST_F(CudaPluginTest, DefaultOwnsEveryGpuByUuid) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda());
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->Name(), "cuda");
  EXPECT_EQ(cuda->DeviceSlots(), std::vector<std::string>{"cuda.device"});
  EXPECT_EQ(cuda->OwnedDevices(), (std::vector<std::string>{kGpu0, kGpu1, kGpu2, kGpu3}));
  EXPECT_EQ(cuda->FreeByNumaNode(), (std::map<int, int>{{0, 2}, {1, 2}}));

  json slot = cuda->Describe()["cuda.device"];
  EXPECT_EQ(slot["capacity"], 4);
  ASSERT_EQ(slot["devices"].size(), 4u);
  const json& third = slot["devices"][2];
  EXPECT_EQ(third["id"], kGpu2);
  EXPECT_EQ(third["index"], 2);
  EXPECT_EQ(third["name"], "Fake L40S");
  EXPECT_EQ(third["memory"], 48 * kGiB);
  EXPECT_EQ(third["minor"], 2);
  EXPECT_EQ(third["pci_bus_id"], "00000000:03:00.0");
  EXPECT_EQ(third["numa_node"], 1);
  EXPECT_TRUE(third["held_by"].is_null());
}

// Operators write GPUs as nvidia-smi shows them, by index or UUID, mixed; the
// agent resolves them to UUIDs (what labels and containers use), keeping the
// order written.
TEST_F(CudaPluginTest, AllowListByIndexAndUuidIsNormalisedToUuids) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({"3", kGpu1}));
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->OwnedDevices(), (std::vector<std::string>{kGpu3, kGpu1}));

  Allocation alloc;
  ASSERT_TRUE(cuda->Allocate("k1", DeviceRequest({{"cuda.device", 2}}), alloc).ok());
  EXPECT_EQ(Held(alloc, "cuda"), (std::vector<std::string>{kGpu3, kGpu1}));
  Status s = cuda->Allocate("k2", DeviceRequest({{"cuda.device", 1}}), alloc);
  EXPECT_EQ(s.message(), "insufficient cuda.device: requested 1, free 0 of 2");
}

// A typo in an index stops the agent with a message that names the entry
// and lists every GPU found, so the operator can correct it.
TEST_F(CudaPluginTest, UnknownAllowListIndexNamesItAndListsTheGpus) {
  Result<std::unique_ptr<CudaPlugin>> cuda = Create(Cuda({"0", "7"}));
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), Status::Code::kInvalidArgument);
  const std::string& message = cuda.status().message();
  EXPECT_THAT(message, HasSubstr("resource.cuda.allowed-devices: \"7\" matches no GPU"));
  EXPECT_THAT(message, HasSubstr("0 " + std::string(kGpu0) + " (Fake H100 80GB HBM3)"));
  EXPECT_THAT(message, HasSubstr("1 " + std::string(kGpu1) + " (Fake H100 80GB HBM3)"));
  EXPECT_THAT(message, HasSubstr("2 " + std::string(kGpu2) + " (Fake L40S)"));
  EXPECT_THAT(message, HasSubstr("3 " + std::string(kGpu3) + " (Fake L40S)"));
}

// A UUID the node does not have (a GPU that fell off the bus) does not stop
// the agent: it is owned as missing, unhealthy, never allocated, and a
// kernel's record of it is still claimed.
TEST_F(CudaPluginTest, AMissingUuidIsOwnedAsAnUnhealthyDeviceThatIsNeverAllocated) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({"0", "GPU-gone-from-the-bus"}));
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->OwnedDevices(), (std::vector<std::string>{kGpu0, "GPU-gone-from-the-bus"}));
  const DeviceHealthState state = cuda->Health()->Get("GPU-gone-from-the-bus");
  EXPECT_EQ(state.health, DeviceHealth::kUnhealthy);
  EXPECT_THAT(state.reason, HasSubstr("missing"));
  Allocation alloc;
  Status s = cuda->Allocate("k1", DeviceRequest({{"cuda.device", 2}}), alloc);
  EXPECT_EQ(s.message(), "insufficient cuda.device: requested 2, free 1 of 2 (1 unhealthy)");
  EXPECT_TRUE(cuda->Claim("k2", Holding("cuda", {"GPU-gone-from-the-bus"})).ok());
  EXPECT_EQ(cuda->Describe()["cuda.device"]["devices"][1]["held_by"], "k2");
  EXPECT_EQ(cuda->Describe()["cuda.device"]["devices"][1]["healthy"], false);
}

// A GPU listed twice (once by index, once by UUID) is a mistake the agent
// refuses rather than silently counting one GPU as two.
TEST_F(CudaPluginTest, GpuListedTwiceByIndexAndUuidIsRefused) {
  Result<std::unique_ptr<CudaPlugin>> cuda = Create(Cuda({"2", kGpu2}));
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(cuda.status().message(), HasSubstr("\"" + std::string(kGpu2) + "\" names GPU " + kGpu2));
  EXPECT_THAT(cuda.status().message(), HasSubstr("already listed"));

  cuda = Create(Cuda({kGpu0, "0"}));  // the other way round
  ASSERT_FALSE(cuda.ok());
  EXPECT_THAT(cuda.status().message(), HasSubstr("\"0\" names GPU " + std::string(kGpu0)));
}

// The same check through MakePlugins, the path an agent takes at start.
TEST_F(CudaPluginTest, MakePluginsRefusesAnUnknownGpu) {
  Config config;
  config.resource.allowed_cores = {0};
  config.resource.memory_size = kGiB;
  config.resource.devices.by_kind["cuda"] = std::make_shared<CudaConfig>(Cuda({"4"}));
  auto plugins = MakePlugins(config, HostFacts{});
  ASSERT_FALSE(plugins.ok());
  EXPECT_THAT(plugins.status().message(), HasSubstr("resource.cuda.allowed-devices: \"4\" matches no GPU"));

  config.resource.devices.by_kind["cuda"] = std::make_shared<CudaConfig>(Cuda({"1"}));
  plugins = MakePlugins(config, HostFacts{});
  ASSERT_TRUE(plugins.ok()) << plugins.status().message();
  EXPECT_EQ((*plugins)[0]->Name(), "cuda");  // device plugins allocate first
  EXPECT_EQ((*plugins)[0]->OwnedDevices(), (std::vector<std::string>{kGpu1}));
}

// Restore of a GPU that has left the node, or that another agent owns, is refused.
TEST_F(CudaPluginTest, ClaimRefusesAGoneGpuAndOneOutsideTheAllowList) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({"0", "1"}));
  ASSERT_NE(cuda, nullptr);
  Status s = cuda->Claim("k1", Holding("cuda", {"GPU-gone"}));
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(s.message(), "cuda device GPU-gone is no longer present on this node");
  s = cuda->Claim("k1", Holding("cuda", {kGpu0, kGpu3}));
  EXPECT_EQ(s.message(), "cuda device " + std::string(kGpu3) + " is not in this agent's resource.cuda.allowed-devices");
  EXPECT_EQ(cuda->Describe()["cuda.device"]["used"], 0);
  EXPECT_TRUE(cuda->Claim("k1", Holding("cuda", {kGpu1})).ok());
  EXPECT_EQ(cuda->Describe()["cuda.device"]["used"], 1);
}

// device-requests (the default): Docker gets one request for exactly the
// kernel's GPUs by UUID, and the environment names them too.
TEST_F(CudaPluginTest, ApplyDeviceRequestsGivesOneNvidiaRequestAndTheEnvironment) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({}, "device-requests"));
  ASSERT_NE(cuda, nullptr);
  ContainerSpec spec;
  cuda->Apply(Holding("cuda", {kGpu2, kGpu0}), spec);
  ASSERT_EQ(spec.device_requests.size(), 1u);
  EXPECT_EQ(spec.device_requests[0].driver, "nvidia");
  EXPECT_EQ(spec.device_requests[0].device_ids, (std::vector<std::string>{kGpu2, kGpu0}));
  EXPECT_EQ(spec.device_requests[0].capabilities, (std::vector<std::string>{"gpu"}));
  EXPECT_TRUE(spec.cdi_devices.empty());
  const std::string list = std::string(kGpu2) + "," + kGpu0;
  EXPECT_EQ(EnvValues(spec, "NVIDIA_VISIBLE_DEVICES"), (std::vector<std::string>{list}));
  EXPECT_EQ(EnvValues(spec, "CUDA_VISIBLE_DEVICES"), (std::vector<std::string>{list}));
}

// cdi: one CDI name per GPU, no device request.
TEST_F(CudaPluginTest, ApplyCdiNamesEachGpu) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({}, "cdi"));
  ASSERT_NE(cuda, nullptr);
  ContainerSpec spec;
  cuda->Apply(Holding("cuda", {kGpu1, kGpu3}), spec);
  EXPECT_EQ(spec.cdi_devices,
            (std::vector<std::string>{"nvidia.com/gpu=" + std::string(kGpu1), "nvidia.com/gpu=" + std::string(kGpu3)}));
  EXPECT_TRUE(spec.device_requests.empty());
  const std::string list = std::string(kGpu1) + "," + kGpu3;
  EXPECT_EQ(EnvValues(spec, "NVIDIA_VISIBLE_DEVICES"), (std::vector<std::string>{list}));
  EXPECT_EQ(EnvValues(spec, "CUDA_VISIBLE_DEVICES"), (std::vector<std::string>{list}));
}

// env: only the environment (for a runtime hook that reads it).
TEST_F(CudaPluginTest, ApplyEnvSetsOnlyTheEnvironment) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({}, "env"));
  ASSERT_NE(cuda, nullptr);
  ContainerSpec spec;
  cuda->Apply(Holding("cuda", {kGpu3}), spec);
  EXPECT_TRUE(spec.device_requests.empty());
  EXPECT_TRUE(spec.cdi_devices.empty());
  EXPECT_EQ(EnvValues(spec, "NVIDIA_VISIBLE_DEVICES"), (std::vector<std::string>{kGpu3}));
  EXPECT_EQ(EnvValues(spec, "CUDA_VISIBLE_DEVICES"), (std::vector<std::string>{kGpu3}));
}

// In every mode a kernel without GPUs gets NVIDIA_VISIBLE_DEVICES=void and an
// empty CUDA_VISIBLE_DEVICES, so an image's NVIDIA_VISIBLE_DEVICES=all cannot
// reach the node's GPUs, and nothing is requested from Docker.
TEST_F(CudaPluginTest, ApplyWithoutGpusHidesEveryGpuInEveryMode) {
  for (const char* attach : {"device-requests", "cdi", "env"}) {
    std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({}, attach));
    ASSERT_NE(cuda, nullptr);
    ContainerSpec spec;
    cuda->Apply(Allocation{}, spec);
    EXPECT_TRUE(spec.device_requests.empty()) << attach;
    EXPECT_TRUE(spec.cdi_devices.empty()) << attach;
    EXPECT_EQ(EnvValues(spec, "NVIDIA_VISIBLE_DEVICES"), (std::vector<std::string>{"void"})) << attach;
    EXPECT_EQ(EnvValues(spec, "CUDA_VISIBLE_DEVICES"), (std::vector<std::string>{""})) << attach;
  }
}

// ------------------------------------------------------------ device meters

// The cuda plugin's meter measures exactly the GPUs the agent owns, in
// allow-list order: NVML's usage of each and the processes on it, a process
// whose memory NVML cannot tell reading 0.
TEST_F(CudaPluginTest, MeterReadsUsageAndProcessesOfOwnedGpus) {
  std::ofstream(file_) << R"({"gpus": [
    {"uuid": ")" << kGpu0 << R"(", "name": "Fake H100", "memory": "80g", "utilization": {"gpu": 37, "memory": 12},
     "processes": [{"pid": 100, "used_memory": "1g"}, {"pid": 200}, {"pid": 300, "used_memory": "512m", "type": "G"}]},
    {"uuid": ")" << kGpu1 << R"(", "name": "Fake H100", "memory": "80g"},
    {"uuid": ")" << kGpu2 << R"(", "name": "Fake L40S", "memory": "48g", "processes": [{"pid": 400, "used_memory": "2g"}]}
  ]})";
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({"2", "0"}));
  ASSERT_NE(cuda, nullptr);
  std::shared_ptr<DeviceMeter> meter = cuda->Meter();
  ASSERT_NE(meter, nullptr);
  EXPECT_EQ(meter, cuda->Meter());
  EXPECT_EQ(meter->Plugin(), "cuda");
  EXPECT_EQ(meter->Devices(), cuda->OwnedDevices());
  EXPECT_EQ(meter->Devices(), (std::vector<std::string>{kGpu2, kGpu0}));

  Result<DeviceReading> gpu0 = meter->Measure(kGpu0);
  ASSERT_TRUE(gpu0.ok()) << gpu0.status().message();
  EXPECT_EQ(gpu0->memory_total_bytes, 80 * kGiB);
  EXPECT_EQ(gpu0->memory_used_bytes, kGiB + kGiB / 2);
  EXPECT_EQ(gpu0->utilization_percent, 37u);
  EXPECT_EQ(gpu0->memory_utilization_percent, 12u);
  ASSERT_EQ(gpu0->processes.size(), 3u);
  EXPECT_EQ(gpu0->processes[0].host_pid, 100u);
  EXPECT_EQ(gpu0->processes[0].memory_bytes, kGiB);
  EXPECT_EQ(gpu0->processes[1].host_pid, 200u);
  EXPECT_EQ(gpu0->processes[1].memory_bytes, 0u);
  EXPECT_EQ(gpu0->processes[2].host_pid, 300u);
  EXPECT_EQ(gpu0->processes[2].memory_bytes, kGiB / 2);

  Result<DeviceReading> gpu2 = meter->Measure(kGpu2);
  ASSERT_TRUE(gpu2.ok()) << gpu2.status().message();
  EXPECT_EQ(gpu2->memory_total_bytes, 48 * kGiB);
  EXPECT_EQ(gpu2->memory_used_bytes, 2 * kGiB);
  EXPECT_EQ(gpu2->utilization_percent, 0u);
  ASSERT_EQ(gpu2->processes.size(), 1u);
  EXPECT_EQ(gpu2->processes[0].host_pid, 400u);
}

// A GPU outside the allow-list is not measured, even though NVML sees it.
TEST_F(CudaPluginTest, MeterRefusesAGpuTheAgentDoesNotOwn) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({"0"}));
  ASSERT_NE(cuda, nullptr);
  Result<DeviceReading> reading = cuda->Meter()->Measure(kGpu1);
  ASSERT_FALSE(reading.ok());
  EXPECT_EQ(reading.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(reading.status().message(), HasSubstr(kGpu1));
}

// NVML failing, or no longer knowing an owned GPU, is kUnavailable naming the
// GPU and NVML's error; the meter works again once the GPU is back.
TEST_F(CudaPluginTest, MeterReportsNvmlFailuresAsUnavailable) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({"1"}));
  ASSERT_NE(cuda, nullptr);
  std::shared_ptr<DeviceMeter> meter = cuda->Meter();

  std::ofstream(file_) << R"({"gpus": [{"uuid": ")" << kGpu0 << R"(", "name": "Fake H100", "memory": "80g"}]})";
  Result<DeviceReading> gone = meter->Measure(kGpu1);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(gone.status().message(), HasSubstr("GPU " + std::string(kGpu1)));

  std::ofstream(file_) << FourGpusJson().substr(0, FourGpusJson().size() - 1)
                       << R"(, "fail": {"nvmlDeviceGetUtilizationRates": 15}})";
  Result<DeviceReading> lost = meter->Measure(kGpu1);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), Status::Code::kUnavailable);
  EXPECT_THAT(lost.status().message(), HasSubstr("GPU " + std::string(kGpu1)));

  std::ofstream(file_) << FourGpusJson();
  Result<DeviceReading> back = meter->Measure(kGpu1);
  EXPECT_TRUE(back.ok()) << back.status().message();
}

// The meter keeps NVML initialised after the plugin is gone, so a sweep that
// outlives the agent core's plugins still measures.
TEST_F(CudaPluginTest, MeterOutlivesItsPlugin) {
  std::unique_ptr<CudaPlugin> cuda = MustCreate(Cuda({"3"}));
  ASSERT_NE(cuda, nullptr);
  std::shared_ptr<DeviceMeter> meter = cuda->Meter();
  cuda.reset();
  Result<DeviceReading> reading = meter->Measure(kGpu3);
  ASSERT_TRUE(reading.ok()) << reading.status().message();
  EXPECT_EQ(reading->memory_total_bytes, 48 * kGiB);
}

// Mock devices have nothing to measure: no meter.
TEST(MockPluginMeterTest, MockPluginHasNoMeter) {
  MockConfig config;
  config.devices = {{"mock0", 16 * kGiB, 108, 0}};
  config.allowed_devices = {"mock0"};
  EXPECT_EQ(MockPlugin(config).Meter(), nullptr);
}

// ---------------------------------------------------- placement (agent core)

// NUMA node of each core in the placement tests: 0-3 on node 0, 4-7 on node 1.
int NodeOfCore(int core) { return core < 4 ? 0 : 1; }

// The NUMA node of each mock device of FourMockDevices().
int NodeOfMock(const std::string& id) { return id == "mock0" || id == "mock1" ? 0 : 1; }

// Agent "a1" on a two-node host: cores 0-7 (0-3 on node 0, 4-7 on node 1),
// 4 GiB, ports 30000-30009, and the four mock devices (two per node).
class PlacementTest : public FakeGpuTest {
 protected:
  static Config PlacementConfig() {
    Config config;
    config.agent.id = "a1";
    config.agent.node = "testnode";
    config.resource.allowed_cores = {0, 1, 2, 3, 4, 5, 6, 7};
    config.resource.allowed_cores_explicit = true;
    config.resource.memory_size = 4 * kGiB;
    config.resource.memory_size_explicit = true;
    config.resource.devices.by_kind["mock"] = std::make_shared<MockConfig>(FourMockDevices());
    config.container.port_range_start = 30000;
    config.container.port_range_end = 30009;
    config.container.stop_timeout = std::chrono::seconds(1);
    return config;
  }

  static HostFacts TwoNodeHost() {
    HostFacts host;
    host.hostname = "testnode";
    for (int core = 0; core < 8; ++core) {
      host.cpuset.push_back(core);
      host.core_numa_node[core] = NodeOfCore(core);
    }
    host.memory_bytes = 16 * kGiB;
    return host;
  }

  // A fresh agent over the same engine (as after a restart of slotd) with config_.
  std::unique_ptr<Agent> NewAgent() {
    auto plugins = MakePlugins(config_, TwoNodeHost());
    EXPECT_TRUE(plugins.ok()) << plugins.status().message();
    if (!plugins.ok()) return nullptr;
    return std::make_unique<Agent>(config_, engine_, std::move(*plugins), hub_);
  }

  // A create request for kernel `id` with `resources`.
  static CreateRequest Request(const std::string& id, json resources) {
    json body = {{"kernel_id", id},
                 {"image", FakeEngine::kDefaultImage},
                 {"command", json::array({"sleep", "3600"})},
                 {"resources", std::move(resources)}};
    Result<CreateRequest> req = ParseCreateRequest(body);
    EXPECT_TRUE(req.ok()) << req.status().message();
    return *req;
  }

  // Creates the kernel, which must succeed, on `agent_`.
  Kernel MustCreate(const CreateRequest& request) {
    auto out = agent_->CreateKernel(request);
    EXPECT_TRUE(out.ok()) << request.kernel_id << ": " << out.status().message();
    return out.ok() ? out->kernel : Kernel{};
  }

  // The ai.backend.allocations label of the kernel's container.
  json AllocationLabel(const Kernel& kernel) const {
    std::optional<ContainerInfo> info = engine_.Peek(kernel.container_id);
    if (!info) return json();
    return json::parse(info->labels.at("ai.backend.allocations"));
  }

  // The labels a1 would have put on kernel `id` running with `alloc`.
  static Labels LabelsFor(const std::string& id, const Allocation& alloc, json resources) {
    Kernel kernel;
    kernel.request = Request(id, std::move(resources));
    kernel.agent_id = "a1";
    kernel.allocation = alloc;
    return KernelLabels(kernel);
  }

  // Asserts that the kernel's cores and mock devices all sit on `node`.
  static void ExpectAllOnNode(const Kernel& kernel, int node) {
    EXPECT_EQ(kernel.allocation.numa_node, node) << kernel.id();
    for (int core : kernel.allocation.cores) EXPECT_EQ(NodeOfCore(core), node) << kernel.id() << " core " << core;
    for (const std::string& id : Held(kernel.allocation, "mock"))
      EXPECT_EQ(NodeOfMock(id), node) << kernel.id() << " device " << id;
  }

  FakeEngine engine_;
  EventHub hub_;
  TempTree scratch_{"slotd-placement-scratch"};
  Config config_ = [this] {
    Config config = PlacementConfig();
    config.container.scratch_root = scratch_.root();
    config.container.allow_root = true;  // the fake's images run as root, as the test image does
    return config;
  }();
  std::unique_ptr<Agent> agent_ = NewAgent();
};

// A kernel asking for cores and a device gets both on one NUMA node, and the
// node is recorded in its allocation label (so a restore keeps it).
TEST_F(PlacementTest, CoresAndDevicesLandOnOneNodeRecordedInTheLabel) {
  Kernel k = MustCreate(Request("k1", {{"cpu", 2}, {"mock.device", 1}}));
  ExpectAllOnNode(k, 0);
  EXPECT_EQ(k.allocation.cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(Held(k.allocation, "mock"), (std::vector<std::string>{"mock0"}));
  EXPECT_EQ(AllocationLabel(k)["numa_node"], 0);
  EXPECT_EQ(AllocationLabel(k)["devices"]["mock"], json::array({"mock0"}));

  std::optional<ContainerSpec> spec = engine_.SpecOf(k.container_id);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->cpuset_cpus, "0-1");
  EXPECT_EQ(EnvValues(*spec, "SLOTD_MOCK_DEVICES"), (std::vector<std::string>{"mock0"}));
  EXPECT_EQ(EnvValues(*spec, "SLOTD_MOCK_DEVICE_COUNT"), (std::vector<std::string>{"1"}));
}

// The placement overrides the allow-list order: with node 1's devices listed
// first, a kernel whose cores go to node 0 still gets a node-0 device.
TEST_F(PlacementTest, PlacementWinsOverTheAllowListOrder) {
  config_.resource.devices.by_kind["mock"] = std::make_shared<MockConfig>(FourMockDevices({"mock2", "mock3", "mock0", "mock1"}));
  agent_ = NewAgent();
  Kernel k = MustCreate(Request("k1", {{"cpu", 1}, {"mock.device", 1}}));
  ExpectAllOnNode(k, 0);
  EXPECT_EQ(Held(k.allocation, "mock"), (std::vector<std::string>{"mock0"}));
}

// When node 0 has too few free cores for the next kernel, the whole kernel
// (cores and device) moves to node 1 instead of straddling the two.
TEST_F(PlacementTest, NodeWithoutEnoughCoresSendsTheKernelToTheNextNode) {
  Kernel filler = MustCreate(Request("k0", {{"cpu", 3}}));
  ExpectAllOnNode(filler, 0);

  Kernel k = MustCreate(Request("k1", {{"cpu", 2}, {"mock.device", 1}}));
  ExpectAllOnNode(k, 1);
  EXPECT_EQ(k.allocation.cores, (std::vector<int>{4, 5}));
  EXPECT_EQ(Held(k.allocation, "mock"), (std::vector<std::string>{"mock2"}));
  EXPECT_EQ(AllocationLabel(k)["numa_node"], 1);
}

// When node 0's devices are all taken, the next kernel lands on node 1 with
// its cores, even though node 0 still has free cores.
TEST_F(PlacementTest, NodeWithoutAFreeDeviceSendsTheKernelToTheNextNode) {
  Kernel first = MustCreate(Request("k1", {{"cpu", 1}, {"mock.device", 2}}));
  ExpectAllOnNode(first, 0);
  EXPECT_EQ(Held(first.allocation, "mock"), (std::vector<std::string>{"mock0", "mock1"}));

  Kernel second = MustCreate(Request("k2", {{"cpu", 1}, {"mock.device", 1}}));
  ExpectAllOnNode(second, 1);
  EXPECT_EQ(second.allocation.cores, (std::vector<int>{4}));
  EXPECT_EQ(Held(second.allocation, "mock"), (std::vector<std::string>{"mock2"}));

  // Once node 0 is free again, it is chosen again.
  ASSERT_TRUE(agent_->DeleteKernel("k1").ok());
  Kernel third = MustCreate(Request("k3", {{"cpu", 1}, {"mock.device", 1}}));
  ExpectAllOnNode(third, 0);
}

// A kernel that no single node can hold still runs: its resources come from
// both nodes and no NUMA node is recorded, in the allocation or its label.
TEST_F(PlacementTest, NoNodeFitsEverythingFallsBackWithoutANumaNode) {
  Kernel many_devices = MustCreate(Request("k1", {{"cpu", 2}, {"mock.device", 3}}));
  EXPECT_FALSE(many_devices.allocation.numa_node.has_value());
  EXPECT_FALSE(AllocationLabel(many_devices).contains("numa_node"));
  EXPECT_EQ(many_devices.allocation.cores, (std::vector<int>{0, 1}));
  EXPECT_EQ(Held(many_devices.allocation, "mock"), (std::vector<std::string>{"mock0", "mock1", "mock2"}));

  Kernel many_cores = MustCreate(Request("k2", {{"cpu", 5}, {"mock.device", 1}}));
  EXPECT_FALSE(many_cores.allocation.numa_node.has_value());
  EXPECT_FALSE(AllocationLabel(many_cores).contains("numa_node"));
  EXPECT_EQ(many_cores.allocation.cores, (std::vector<int>{2, 3, 4, 5, 6}));
  EXPECT_EQ(Held(many_cores.allocation, "mock"), (std::vector<std::string>{"mock3"}));
}

// A request beyond the agent's devices is refused whole: the user reads the
// plugin's message and nothing stays held, cores included.
TEST_F(PlacementTest, MoreDevicesThanTheAgentOwnsIsRefusedAndTakesNothing) {
  auto out = agent_->CreateKernel(Request("k1", {{"cpu", 2}, {"mock.device", 5}}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(out.status().message(), "insufficient mock.device: requested 5, free 4 of 4");
  json resources = agent_->DescribeResources();
  EXPECT_EQ(resources["cpu"]["used"], 0);
  EXPECT_EQ(resources["mock.device"]["used"], 0);
  EXPECT_EQ(engine_.ContainerCount(), 0u);
}

// A cpu-only kernel also keeps its cores on one node when one node has room,
// rather than taking the lowest-numbered free cores across nodes.
TEST_F(PlacementTest, CpuOnlyRequestKeepsItsCoresOnOneNode) {
  Kernel a = MustCreate(Request("k1", {{"cpu", 2}}));
  EXPECT_EQ(a.allocation.cores, (std::vector<int>{0, 1}));
  ExpectAllOnNode(a, 0);

  Kernel b = MustCreate(Request("k2", {{"cpu", 3}}));  // 2 free on node 0, 4 on node 1
  EXPECT_EQ(b.allocation.cores, (std::vector<int>{4, 5, 6}));
  ExpectAllOnNode(b, 1);
  EXPECT_EQ(AllocationLabel(b)["numa_node"], 1);

  Kernel c = MustCreate(Request("k3", {{"cpu", 2}}));
  EXPECT_EQ(c.allocation.cores, (std::vector<int>{2, 3}));
  ExpectAllOnNode(c, 0);

  Kernel d = MustCreate(Request("k4", {{"cpu", 1}}));  // what is left: core 7
  EXPECT_EQ(d.allocation.cores, (std::vector<int>{7}));
  ExpectAllOnNode(d, 1);
}

// GPUs take part in placement through the NUMA node NVML reports: with GPUs
// 0 and 1 taken, the next GPU kernel gets a node-1 GPU and node-1 cores, and
// Docker is asked for exactly that GPU. A cpu-only kernel on the same agent
// is shut out of every GPU.
TEST_F(PlacementTest, GpusArePlacedByTheirNumaNode) {
  config_.resource.devices.by_kind.erase("mock");
  config_.resource.devices.by_kind["cuda"] = std::make_shared<CudaConfig>(Cuda());
  agent_ = NewAgent();
  ASSERT_NE(agent_, nullptr);

  Kernel first = MustCreate(Request("k1", {{"cpu", 1}, {"cuda.device", 2}}));
  EXPECT_EQ(first.allocation.numa_node, 0);
  EXPECT_EQ(Held(first.allocation, "cuda"), (std::vector<std::string>{kGpu0, kGpu1}));
  EXPECT_EQ(first.allocation.cores, (std::vector<int>{0}));

  Kernel second = MustCreate(Request("k2", {{"cpu", 2}, {"cuda.device", 1}}));
  EXPECT_EQ(second.allocation.numa_node, 1);
  EXPECT_EQ(Held(second.allocation, "cuda"), (std::vector<std::string>{kGpu2}));
  EXPECT_EQ(second.allocation.cores, (std::vector<int>{4, 5}));
  std::optional<ContainerSpec> spec = engine_.SpecOf(second.container_id);
  ASSERT_TRUE(spec.has_value());
  ASSERT_EQ(spec->device_requests.size(), 1u);
  EXPECT_EQ(spec->device_requests[0].device_ids, (std::vector<std::string>{kGpu2}));
  EXPECT_EQ(EnvValues(*spec, "CUDA_VISIBLE_DEVICES"), (std::vector<std::string>{kGpu2}));

  Kernel cpu_only = MustCreate(Request("k3", {{"cpu", 1}}));
  spec = engine_.SpecOf(cpu_only.container_id);
  ASSERT_TRUE(spec.has_value());
  EXPECT_TRUE(spec->device_requests.empty());
  EXPECT_EQ(EnvValues(*spec, "NVIDIA_VISIBLE_DEVICES"), (std::vector<std::string>{"void"}));
}

// ------------------------------------------------- stats targets and meters

// The stats loop measures the RUNNING kernels, with the devices each holds,
// through the meters of the plugins that have one (cuda; mock has none).
TEST_F(PlacementTest, TheRunningKernelsAreWhatStatsMeasureAndMetersComeFromThePlugins) {
  EXPECT_TRUE(agent_->owners().devices.Meters().empty());  // mock only
  const std::map<std::string, std::vector<std::string>> mock_only = {
      {"mock", config_.resource.devices.Of<MockConfig>("mock")->allowed_devices}};
  EXPECT_EQ(agent_->owners().devices.Unmetered(), mock_only);

  config_.resource.devices.by_kind["cuda"] = std::make_shared<CudaConfig>(Cuda({"0", "1"}));
  agent_ = NewAgent();
  ASSERT_NE(agent_, nullptr);
  std::vector<std::shared_ptr<DeviceMeter>> meters = agent_->owners().devices.Meters();
  ASSERT_EQ(meters.size(), 1u);
  EXPECT_EQ(meters[0]->Plugin(), "cuda");
  EXPECT_EQ(meters[0]->Devices(), (std::vector<std::string>{kGpu0, kGpu1}));
  EXPECT_EQ(agent_->owners().devices.Meters()[0], meters[0]);
  EXPECT_EQ(agent_->owners().devices.Unmetered(), mock_only);  // cuda has a meter

  Kernel gpu = MustCreate(Request("k1", {{"cpu", 1}, {"cuda.device", 1}, {"mock.device", 1}}));
  Kernel cpu_only = MustCreate(Request("k2", {{"cpu", 1}}));
  std::vector<Agent::RunningKernel> targets = agent_->RunningKernels();
  ASSERT_EQ(targets.size(), 2u);
  EXPECT_EQ(targets[0].kernel_id, "k1");
  EXPECT_EQ(targets[0].container_id, gpu.container_id);
  EXPECT_EQ(targets[0].devices, gpu.allocation.devices);
  EXPECT_EQ(Held(gpu.allocation, "cuda").size(), 1u);
  EXPECT_EQ(Held(gpu.allocation, "mock").size(), 1u);
  EXPECT_EQ(targets[1].kernel_id, "k2");
  EXPECT_EQ(targets[1].container_id, cpu_only.container_id);
  EXPECT_TRUE(targets[1].devices.empty());

  ASSERT_TRUE(engine_.Kill(cpu_only.container_id).ok());
  ASSERT_TRUE(agent_->owners().converger.Relist().ok());
  ASSERT_EQ(agent_->GetKernel("k2")->state(), KernelState::kTerminated);
  targets = agent_->RunningKernels();
  ASSERT_EQ(targets.size(), 1u);
  EXPECT_EQ(targets[0].kernel_id, "k1");
}

// ------------------------------------------------------- restore of devices

// After a restart of slotd the running kernels hold their devices again (and
// their NUMA node): a new kernel does not get them.
TEST_F(PlacementTest, RestoreRetakesTheDevicesOfRunningKernels) {
  Kernel before = MustCreate(Request("k1", {{"cpu", 1}, {"mock.device", 1}}));
  agent_ = NewAgent();
  ASSERT_TRUE(agent_->Restore().ok());

  auto after = agent_->GetKernel("k1");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->allocation, before.allocation);
  json devices = agent_->DescribeResources()["mock.device"]["devices"];
  EXPECT_EQ(devices[0]["id"], "mock0");
  EXPECT_EQ(devices[0]["held_by"], "k1");

  Kernel next = MustCreate(Request("k2", {{"cpu", 1}, {"mock.device", 1}}));
  EXPECT_EQ(Held(next.allocation, "mock"), (std::vector<std::string>{"mock1"}));
}

// An operator who narrows allowed-devices while a kernel still runs on a
// device it drops is told, at start, which kernel and device, and what to do.
TEST_F(PlacementTest, RestoreRefusesAMockDeviceNoLongerInAllowedDevices) {
  ASSERT_TRUE(engine_
                  .AddContainer("slotd-a1-k1", LabelsFor("k1", Holding("mock", {"mock3"}),
                                                         {{"cpu", 1}, {"mock.device", 1}}))
                  .ok());
  config_.resource.devices.by_kind["mock"] = std::make_shared<MockConfig>(FourMockDevices({"mock0", "mock1", "mock2"}));
  std::unique_ptr<Agent> agent = NewAgent();
  Status s = agent->Restore();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("kernel k1"));
  EXPECT_THAT(s.message(), HasSubstr("mock device mock3 is not in this agent's resource.mock.allowed-devices"));
  EXPECT_THAT(s.message(), HasSubstr("docker rm -f slotd-a1-k1"));
  EXPECT_EQ(agent->DescribeResources()["mock.device"]["used"], 0);
}

// The same when the device is no longer declared on the node at all.
TEST_F(PlacementTest, RestoreRefusesAMockDeviceNoLongerDeclared) {
  ASSERT_TRUE(engine_
                  .AddContainer("slotd-a1-k1", LabelsFor("k1", Holding("mock", {"mock3"}),
                                                         {{"cpu", 1}, {"mock.device", 1}}))
                  .ok());
  MockConfig three = *config_.resource.devices.Of<MockConfig>("mock");
  three.devices.pop_back();
  three.allowed_devices = {"mock0", "mock1", "mock2"};
  config_.resource.devices.by_kind["mock"] = std::make_shared<MockConfig>(three);
  Status s = NewAgent()->Restore();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("kernel k1"));
  EXPECT_THAT(s.message(), HasSubstr("mock device mock3 is no longer present on this node"));
  EXPECT_THAT(s.message(), HasSubstr("docker rm -f slotd-a1-k1"));
}

// A kernel whose container has already exited holds nothing, so a device it
// used to hold may have left the allow-list: the agent starts.
TEST_F(PlacementTest, RestoreAcceptsAnExitedKernelWhoseDeviceWasDropped) {
  ASSERT_TRUE(engine_
                  .AddContainer("slotd-a1-k1",
                                LabelsFor("k1", Holding("mock", {"mock3"}), {{"cpu", 1}, {"mock.device", 1}}),
                                /*running=*/false, /*exit_code=*/3)
                  .ok());
  config_.resource.devices.by_kind["mock"] = std::make_shared<MockConfig>(FourMockDevices({"mock0"}));
  std::unique_ptr<Agent> agent = NewAgent();
  ASSERT_TRUE(agent->Restore().ok());
  auto k = agent->GetKernel("k1");
  ASSERT_TRUE(k.ok());
  EXPECT_EQ(k->state(), KernelState::kTerminated);
  EXPECT_EQ(agent->DescribeResources()["mock.device"]["used"], 0);
}

// Turning the mock plugin off (removing [resource.mock]) while a kernel still
// runs on a mock device drops every device from the agent's allow-list, so
// the restore must refuse just as for a narrowed allow-list.
TEST_F(PlacementTest, RestoreRefusesADeviceOfAPluginThatIsNowOff) {
  ASSERT_TRUE(engine_
                  .AddContainer("slotd-a1-k1", LabelsFor("k1", Holding("mock", {"mock0"}),
                                                         {{"cpu", 1}, {"mock.device", 1}}))
                  .ok());
  config_.resource.devices.by_kind.erase("mock");
  Status s = NewAgent()->Restore();
  ASSERT_FALSE(s.ok()) << "a running kernel holding mock0 was restored by an agent without [resource.mock]";
  EXPECT_THAT(s.message(), HasSubstr("kernel k1"));
  EXPECT_THAT(s.message(), HasSubstr("mock0"));
  EXPECT_THAT(s.message(), HasSubstr("docker rm -f slotd-a1-k1"));
}

}  // namespace
}  // namespace slotd

namespace slotd {
namespace {

TEST(MigSlotTest, FollowsBackendAisNaming) {
  EXPECT_EQ(MigSlot("1g.18gb"), "cuda.mig-1c18g");
  EXPECT_EQ(MigSlot("3g.71gb"), "cuda.mig-3c71g");
  EXPECT_EQ(MigSlot("1c.3g.71gb"), "cuda.mig-1c-3g-71gb");
  EXPECT_EQ(MigSlot("1g.18gb+me"), "cuda.mig-1g-18gb-me");
}

// A board: marks stay until cleared, conditions follow the polls, a stall
// makes healthy devices unknown; only healthy devices are allocatable.
TEST(DeviceHealthBoardTest, MarksConditionsAndStalls) {
  DeviceHealthBoard board({"a", "b"}, 100);
  EXPECT_TRUE(board.Allocatable("a"));
  const uint64_t v0 = board.Version();
  board.Mark("a", "xid 79", 110);
  EXPECT_GT(board.Version(), v0);
  EXPECT_EQ(board.Get("a"), (DeviceHealthState{DeviceHealth::kUnhealthy, "xid 79", 110}));
  board.SetCondition("a", "ecc uncorrected 2", 120);
  EXPECT_EQ(board.Get("a").reason, "xid 79; ecc uncorrected 2");
  EXPECT_TRUE(board.Clear("a", 130));
  EXPECT_FALSE(board.Clear("a", 130));
  EXPECT_EQ(board.Get("a").reason, "ecc uncorrected 2");
  board.SetCondition("a", "", 140);
  EXPECT_EQ(board.Get("a"), (DeviceHealthState{DeviceHealth::kHealthy, "", 140}));
  board.SetStalled("health unknown", 150);
  EXPECT_EQ(board.Get("b").health, DeviceHealth::kUnknown);
  EXPECT_FALSE(board.Allocatable("b"));
  board.ClearStalled(160);
  EXPECT_TRUE(board.Allocatable("b"));
  EXPECT_EQ(board.Marks().size(), 0u);
}

// A board tells its listener of each change of a device's state, and of
// nothing else; once replaced, a listener hears nothing more.
TEST(DeviceHealthBoardTest, TellsItsListenerOfEachChange) {
  DeviceHealthBoard board({"a"}, 100);
  int told = 0;
  board.SetListener([&] { ++told; });
  board.Mark("a", "xid 79", 110);
  EXPECT_EQ(told, 1);
  board.Mark("a", "xid 48", 120);  // a second mark keeps the first
  EXPECT_EQ(told, 1);
  board.SetCondition("a", "ecc uncorrected 2", 130);
  EXPECT_EQ(told, 2);
  board.SetStalled("health unknown", 140);  // "a" is unhealthy, not unknown
  EXPECT_EQ(told, 2);
  board.SetListener(nullptr);
  EXPECT_TRUE(board.Clear("a", 150));
  EXPECT_EQ(told, 2);
}

}  // namespace
}  // namespace slotd

namespace slotd {
namespace {

// The agent core over device health: a mark on a held device reports the
// device and the kernel, keeps the device from new kernels, and is kept with
// the drains across a restart (devices.json under var-base-path).
class DeviceHealthAgentTest : public PlacementTest {
 protected:
  // A fresh agent with config_, and the board of its mock plugin.
  std::pair<std::unique_ptr<Agent>, std::shared_ptr<DeviceHealthBoard>> AgentWithBoard() {
    auto plugins = MakePlugins(config_, TwoNodeHost());
    EXPECT_TRUE(plugins.ok()) << plugins.status().message();
    std::shared_ptr<DeviceHealthBoard> board = (*plugins)[0]->Health();
    return {std::make_unique<Agent>(config_, engine_, std::move(*plugins), hub_), board};
  }

  // The next event of `type` from `sub`; null when none comes.
  static json NextOfType(EventHub::Subscription& sub, const std::string& type) {
    while (auto event = sub.Next(std::chrono::milliseconds(200)))
      if (event->body["type"] == type) return event->body;
    return nullptr;
  }

  TempTree var_{"slotd-device-record"};
};

// The watcher applies a change of a board as it happens, not at its
// once-a-second look: on a clock that never moves, that look never comes.
TEST_F(DeviceHealthAgentTest, TheWatcherAppliesAChangeOfABoardAtOnce) {
  auto [agent, board] = AgentWithBoard();
  ASSERT_TRUE(agent->Restore().ok());
  auto created = agent->CreateKernel(Request("k1", {{"cpu", 1}, {"mock.device", 1}}));
  ASSERT_TRUE(created.ok()) << created.status().message();
  const std::string held = Held(created->kernel.allocation, "mock")[0];
  FakeClock clock;
  Watcher watcher(*agent, engine_, std::chrono::hours(1), clock);
  watcher.Start();
  ASSERT_TRUE(clock.WaitForWaitersAfterNow(3));  // its loops' first rounds are over
  auto sub = hub_.Subscribe();

  board->Mark(held, "xid 79", 1000);
  json condition = NextOfType(*sub, "kernel_condition");
  ASSERT_FALSE(condition.is_null());
  EXPECT_EQ(condition["condition"], "mock device " + held + " is unhealthy: xid 79");
  watcher.Stop();
}

TEST_F(DeviceHealthAgentTest, AMarkReportsTheDeviceAndItsKernelAndSurvivesARestartWithTheDrains) {
  config_.agent.var_base_path = var_.root();
  auto [agent, board] = AgentWithBoard();
  ASSERT_TRUE(agent->Restore().ok());
  auto created = agent->CreateKernel(Request("k1", {{"cpu", 1}, {"mock.device", 1}}));
  ASSERT_TRUE(created.ok()) << created.status().message();
  const std::string held = Held(created->kernel.allocation, "mock")[0];
  auto sub = hub_.Subscribe();

  board->Mark(held, "xid 79", 1000);
  agent->owners().health.ApplyDeviceHealth();
  json event = NextOfType(*sub, "device_unhealthy");
  ASSERT_FALSE(event.is_null());
  EXPECT_EQ(event["device"], held);
  EXPECT_EQ(event["reason"], "xid 79");
  EXPECT_EQ(event["plugin"], "mock");
  json condition = NextOfType(*sub, "kernel_condition");
  ASSERT_FALSE(condition.is_null());
  EXPECT_EQ(condition["condition"], "mock device " + held + " is unhealthy: xid 79");
  EXPECT_EQ(agent->GetKernel("k1")->state(), KernelState::kRunning);  // on-unhealthy: report

  auto drained = agent->DrainDevice("mock3", true);
  ASSERT_TRUE(drained.ok()) << drained.status().message();
  EXPECT_EQ(drained->devices, std::vector<std::string>{"mock3"});
  EXPECT_EQ(agent->DrainDevice("mock9", true).status().code(), Status::Code::kNotFound);
  auto all = agent->CreateKernel(Request("k2", {{"cpu", 1}, {"mock.device", 3}}));
  EXPECT_EQ(all.status().message(), "insufficient mock.device: requested 3, free 2 of 4 (1 drained)");

  // A restart keeps the mark and the drain.
  agent.reset();
  auto [again, again_board] = AgentWithBoard();
  ASSERT_TRUE(again->Restore().ok());
  EXPECT_EQ(again_board->Get(held).reason, "xid 79");
  json slot = again->DescribeResources()["mock.device"];
  EXPECT_EQ(slot["drained"], 1);
  EXPECT_EQ(slot["unhealthy"], 1);
  EXPECT_FALSE(again->GetKernel("k1")->device_condition.empty());

  // Cleared and undrained, both devices are given again.
  ASSERT_TRUE(again->ClearDevice(held).ok());
  EXPECT_EQ(again->ClearDevice(held).status().code(), Status::Code::kFailedPrecondition);
  ASSERT_TRUE(again->DrainDevice("mock3", false).ok());
  again->owners().health.ApplyDeviceHealth();
  EXPECT_TRUE(again->GetKernel("k1")->device_condition.empty());
  auto three = again->CreateKernel(Request("k2", {{"cpu", 1}, {"mock.device", 3}}));
  EXPECT_TRUE(three.ok()) << three.status().message();
}

}  // namespace
}  // namespace slotd
