// The NVML loader through the fake libnvidia-ml (tests/fake_nvml): the real
// dlopen/dlsym code, GPUs from a JSON file, and every error message.
#include "common/units.h"
#include "resources/cuda/nvml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace slotd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;


// A private temp directory, removed at the end; points SLOTD_FAKE_NVML_FILE
// at `gpus.json` inside it.
class NvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = (fs::temp_directory_path() / "slotd-nvml-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    file_ = (dir_ / "gpus.json").string();
    setenv("SLOTD_FAKE_NVML_FILE", file_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("SLOTD_FAKE_NVML_FILE");
    fs::remove_all(dir_);
  }

  // Writes `text` to `path`, creating its directories.
  static void Write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  // Loads the fake library over `file_`, failing the test if it cannot.
  static std::unique_ptr<NvmlApi> Load() {
    Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
    EXPECT_TRUE(nvml.ok()) << nvml.status().message();
    return nvml.ok() ? std::move(nvml).value() : nullptr;
  }

  fs::path dir_;
  std::string file_;
};

// A process list as {pid, used memory} pairs, which gtest compares and prints.
using Pids = std::vector<std::pair<unsigned, uint64_t>>;
Pids AsPids(const std::vector<GpuProcess>& processes) {
  Pids pids;
  for (const GpuProcess& p : processes) pids.emplace_back(p.pid, p.used_memory_bytes);
  return pids;
}

constexpr const char* kThreeGpus = R"({
  "gpus": [
    {"uuid": "GPU-00000000-1111-2222-3333-444444444444", "name": "Fake H100 80GB HBM3", "memory": "80g",
     "minor": 0, "pci_bus_id": "00000000:17:00.0", "numa_node": 0},
    {"uuid": "GPU-55555555-6666-7777-8888-999999999999", "name": "Fake H100 80GB HBM3", "memory": 85899345920,
     "minor": 3, "pci_bus_id": "00000000:B1:00.0", "numa_node": 1},
    {"uuid": "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "name": "Fake L4", "memory": "24g",
     "minor": 7, "pci_bus_id": "00000001:CA:00.0", "numa_node": 3}
  ]
})";

TEST_F(NvmlTest, DiscoversEveryGpuWithAllFields) {
  Write(file_, kThreeGpus);
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  EXPECT_EQ((*nvml)->LibraryPath(), SLOTD_FAKE_NVML_PATH);

  Result<std::vector<GpuInfo>> gpus = (*nvml)->Devices();
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 3u);
  const GpuInfo& first = (*gpus)[0];
  EXPECT_EQ(first.index, 0);
  EXPECT_EQ(first.uuid, "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_EQ(first.name, "Fake H100 80GB HBM3");
  EXPECT_EQ(first.memory_bytes, 80 * kGiB);
  EXPECT_EQ(first.minor, 0);
  EXPECT_EQ(first.pci_bus_id, "00000000:17:00.0");
  EXPECT_EQ(first.numa_node, 0);
  const GpuInfo& second = (*gpus)[1];
  EXPECT_EQ(second.index, 1);
  EXPECT_EQ(second.uuid, "GPU-55555555-6666-7777-8888-999999999999");
  EXPECT_EQ(second.memory_bytes, 80 * kGiB);
  EXPECT_EQ(second.minor, 3);
  EXPECT_EQ(second.pci_bus_id, "00000000:B1:00.0");
  EXPECT_EQ(second.numa_node, 1);
  const GpuInfo& third = (*gpus)[2];
  EXPECT_EQ(third.index, 2);
  EXPECT_EQ(third.name, "Fake L4");
  EXPECT_EQ(third.memory_bytes, 24 * kGiB);
  EXPECT_EQ(third.minor, 7);
  EXPECT_EQ(third.pci_bus_id, "00000001:CA:00.0");
  EXPECT_EQ(third.numa_node, 3);
}

TEST_F(NvmlTest, ReReadsTheFileAtEveryLoad) {
  Write(file_, kThreeGpus);
  {
    Result<std::unique_ptr<NvmlApi>> first = LoadNvml(SLOTD_FAKE_NVML_PATH);
    ASSERT_TRUE(first.ok()) << first.status().message();
  }  // shuts NVML down and closes the library

  Write(file_, R"({"gpus": [{"uuid": "GPU-only", "name": "Fake A100", "memory": "40g"},
                            {"uuid": "GPU-second", "name": "Fake A100", "memory": "40g"}]})");
  Result<std::unique_ptr<NvmlApi>> second = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_TRUE(second.ok()) << second.status().message();
  Result<std::vector<GpuInfo>> gpus = (*second)->Devices();
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].uuid, "GPU-only");
  EXPECT_EQ((*gpus)[1].uuid, "GPU-second");
  EXPECT_EQ((*gpus)[1].minor, 1);  // the fake's defaults
  EXPECT_EQ((*gpus)[1].pci_bus_id, "00000000:02:00.0");
}

TEST_F(NvmlTest, NumaNodeFallsBackToSysfsWhenNvmlCannotTell) {
  // Without a numa_node the fake's nvmlDeviceGetNumaNodeId says "Not
  // Supported", as most hosts do; the loader then reads sysfs, where a bus id
  // that is not this machine's gives node 0.
  Write(file_, R"({"gpus": [{"uuid": "GPU-x", "name": "Fake", "memory": "1g", "pci_bus_id": "0000ABCD:EE:1F.7"}]})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  Result<std::vector<GpuInfo>> gpus = (*nvml)->Devices();
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].numa_node, 0);
}

TEST_F(NvmlTest, PciNumaNodeReadsSysfs) {
  const fs::path devices = dir_ / "devices";
  Write(devices / "0000:17:00.0" / "numa_node", "1\n");
  Write(devices / "0001:ca:00.0" / "numa_node", "3\n");
  Write(devices / "0000:b1:00.0" / "numa_node", "-1\n");
  EXPECT_EQ(PciNumaNode("00000000:17:00.0", devices.string()), 1);  // NVML's 8-digit domain
  EXPECT_EQ(PciNumaNode("0000:17:00.0", devices.string()), 1);      // the legacy 4-digit one
  EXPECT_EQ(PciNumaNode("00000001:CA:00.0", devices.string()), 3);  // upper-case hex
  EXPECT_EQ(PciNumaNode("00000000:B1:00.0", devices.string()), 0);  // -1: no NUMA information
  EXPECT_EQ(PciNumaNode("00000000:99:00.0", devices.string()), 0);  // no such device
  EXPECT_EQ(PciNumaNode("garbage", devices.string()), 0);
  EXPECT_EQ(PciNumaNode("", devices.string()), 0);
}

TEST_F(NvmlTest, MissingLibraryGivesAdvice) {
  const std::string library = (dir_ / "libnvidia-ml.so.1").string();
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(library);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(nvml.status().message(),
            "cannot load NVML from \"" + library + "\": " + library +
                ": cannot open shared object file: No such file or directory. Install the NVIDIA driver (it "
                "provides libnvidia-ml.so.1), or set resource.cuda.nvml-library to its path, or remove "
                "[resource.cuda] on a node without NVIDIA GPUs.");
}

TEST_F(NvmlTest, LibraryWithoutNvmlNamesTheSymbol) {
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml("libc.so.6");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(nvml.status().message(), HasSubstr("NVML library \"libc.so.6\" has no symbol nvmlInit_v2"));
  EXPECT_THAT(nvml.status().message(), HasSubstr("resource.cuda.nvml-library"));
}

TEST_F(NvmlTest, MissingFakeFileIsNamed) {
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_FALSE(nvml.ok());
  EXPECT_THAT(nvml.status().message(), HasSubstr("nvmlInit_v2 failed"));
  EXPECT_THAT(nvml.status().message(),
              HasSubstr("cannot read SLOTD_FAKE_NVML_FILE \"" + file_ + "\": No such file or directory"));
}

TEST_F(NvmlTest, BadFakeFileIsNamed) {
  Write(file_, R"({"gpus": [{"uuid": "GPU-x", "name": "Fake", "memory": -1}]})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_FALSE(nvml.ok());
  EXPECT_THAT(nvml.status().message(), HasSubstr("SLOTD_FAKE_NVML_FILE \"" + file_ + "\": gpus[0] needs \"memory\""));

  Write(file_, "{not json");
  nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_FALSE(nvml.ok());
  EXPECT_THAT(nvml.status().message(), HasSubstr("SLOTD_FAKE_NVML_FILE \"" + file_ + "\" is not valid"));
}

TEST_F(NvmlTest, UnsetFakeFileIsExplained) {
  unsetenv("SLOTD_FAKE_NVML_FILE");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_FALSE(nvml.ok());
  EXPECT_THAT(nvml.status().message(), HasSubstr("SLOTD_FAKE_NVML_FILE is not set"));
}

TEST_F(NvmlTest, NvmlErrorsNameTheCallAndNvmlsText) {
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "1g"},
                            {"uuid": "GPU-b", "name": "Fake", "memory": "1g"}],
                   "fail": {"nvmlDeviceGetName": 999}})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  Result<std::vector<GpuInfo>> gpus = (*nvml)->Devices();
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(gpus.status().message(), "nvmlDeviceGetName(GPU 0) failed: Unknown Error");
}

// A lost GPU does not fail discovery: it is listed lost, with what was read
// before NVML said so; its health reads lost.
TEST_F(NvmlTest, ALostGpuIsListedLostAndReadsLost) {
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "1g", "lost": true},
                            {"uuid": "GPU-b", "name": "Fake", "memory": "1g", "ecc_uncorrected": 3,
                             "row_remap": {"failure": true}}]})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  Result<std::vector<GpuInfo>> gpus = (*nvml)->Devices();
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_TRUE((*gpus)[0].lost);
  EXPECT_FALSE((*gpus)[1].lost);
  EXPECT_EQ((*gpus)[1].uuid, "GPU-b");
  Result<GpuHealthReading> lost = (*nvml)->Health("GPU-a");
  ASSERT_TRUE(lost.ok()) << lost.status().message();
  EXPECT_TRUE(lost->lost);
  Result<GpuHealthReading> worn = (*nvml)->Health("GPU-b");
  ASSERT_TRUE(worn.ok()) << worn.status().message();
  EXPECT_FALSE(worn->lost);
  EXPECT_EQ(worn->ecc_uncorrected, 3u);
  EXPECT_EQ(worn->row_remap_failure, true);
  EXPECT_EQ((*nvml)->Health("GPU-none").status().code(), Status::Code::kNotFound);
}

// A GPU in MIG mode lists its instances with profile, memory and ids; usage
// and processes are read per instance by MIG UUID.
TEST_F(NvmlTest, MigInstancesAreListedAndReadByUuid) {
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake H200", "memory": "141g",
                             "mig": {"instances": [
                               {"uuid": "MIG-1", "profile": "1g.18gb", "memory": "16g", "gpu_instance": 9,
                                "processes": [{"pid": 41, "used_memory": "1g"}]},
                               {"uuid": "MIG-2", "profile": "3g.71gb", "memory": "70g", "gpu_instance": 2}]}},
                            {"uuid": "GPU-b", "name": "Fake H200", "memory": "141g"}]})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  Result<std::vector<GpuInfo>> gpus = (*nvml)->Devices();
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  ASSERT_TRUE((*gpus)[0].mig_enabled);
  ASSERT_EQ((*gpus)[0].mig_instances.size(), 2u);
  EXPECT_EQ((*gpus)[0].mig_instances[0].uuid, "MIG-1");
  EXPECT_EQ((*gpus)[0].mig_instances[0].profile, "1g.18gb");
  EXPECT_EQ((*gpus)[0].mig_instances[0].memory_bytes, 16ull << 30);
  EXPECT_EQ((*gpus)[0].mig_instances[0].gpu_instance_id, 9u);
  EXPECT_EQ((*gpus)[0].mig_instances[1].profile, "3g.71gb");
  EXPECT_FALSE((*gpus)[1].mig_enabled);
  Result<std::vector<GpuProcess>> processes = (*nvml)->Processes("MIG-1");
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  ASSERT_EQ(processes->size(), 1u);
  EXPECT_EQ((*processes)[0].pid, 41u);
  EXPECT_TRUE((*nvml)->Processes("MIG-2")->empty());
  Result<GpuUsage> usage = (*nvml)->Usage("MIG-1");
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->memory_total_bytes, 16ull << 30);
  EXPECT_EQ(usage->memory_used_bytes, 1ull << 30);
}

// An Xid written after the watch began is delivered once, naming the GPU and
// the GPU instance; nothing else comes.
TEST_F(NvmlTest, AnXidIsDeliveredOnceToAWatch) {
  const std::string gpus = R"("gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "1g"},
                                       {"uuid": "GPU-b", "name": "Fake", "memory": "1g"}])";
  Write(file_, "{" + gpus + R"(, "events": [{"id": 1, "gpu": 0, "xid": 13}]})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  Result<std::unique_ptr<XidWatch>> watch = (*nvml)->WatchXids({"GPU-a", "GPU-b"});
  ASSERT_TRUE(watch.ok()) << watch.status().message();
  Result<std::optional<XidEvent>> none = (*watch)->Wait(std::chrono::milliseconds(20));
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->has_value());  // the event from before the watch is not delivered
  Write(file_, "{" + gpus + R"(, "events": [{"id": 1, "gpu": 0, "xid": 13},
                                             {"id": 2, "gpu": "GPU-b", "xid": 79, "gpu_instance": 3}]})");
  Result<std::optional<XidEvent>> event = (*watch)->Wait(std::chrono::seconds(5));
  ASSERT_TRUE(event.ok()) << event.status().message();
  ASSERT_TRUE(event->has_value());
  EXPECT_EQ((*event)->gpu_uuid, "GPU-b");
  EXPECT_EQ((*event)->xid, 79u);
  EXPECT_EQ((*event)->gpu_instance_id, 3u);
  EXPECT_FALSE((*event)->compute_instance_id.has_value());
  EXPECT_FALSE((*watch)->Wait(std::chrono::milliseconds(20))->has_value());
}

TEST(MigProfileTest, IsWhatFollowsMigInNvmlsName) {
  EXPECT_EQ(MigProfileOfName("NVIDIA H100 80GB HBM3 MIG 1g.10gb"), "1g.10gb");
  EXPECT_EQ(MigProfileOfName("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb"), "1c.3g.20gb");
  EXPECT_EQ(MigProfileOfName("odd"), "odd");
}

TEST_F(NvmlTest, InitErrorNamesTheCallAndNvmlsText) {
  Write(file_, R"({"gpus": [], "fail": {"nvmlInit_v2": 9}})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_THAT(nvml.status().message(),
              HasSubstr("nvmlInit_v2 failed (NVML library \"" + std::string(SLOTD_FAKE_NVML_PATH) +
                        "\"): Driver Not Loaded"));
}

TEST_F(NvmlTest, NoGpusIsAnEmptyList) {
  Write(file_, R"({"gpus": []})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_TRUE(nvml.ok()) << nvml.status().message();
  Result<std::vector<GpuInfo>> gpus = (*nvml)->Devices();
  ASSERT_TRUE(gpus.ok()) << gpus.status().message();
  EXPECT_TRUE(gpus->empty());
}

constexpr const char* kBusyGpus = R"({
  "gpus": [
    {"uuid": "GPU-a", "name": "Fake H100", "memory": "80g", "utilization": {"gpu": 37, "memory": 12},
     "processes": [{"pid": 100, "used_memory": "1g"},
                   {"pid": 200, "used_memory": "256m", "type": "G"},
                   {"pid": 300, "used_memory": "2g", "type": "C+G"}]},
    {"uuid": "GPU-b", "name": "Fake H100", "memory": "80g",
     "processes": [{"pid": 400}, {"pid": 100, "used_memory": "512m"}]},
    {"uuid": "GPU-idle", "name": "Fake L4", "memory": "24g"}
  ]
})";

TEST_F(NvmlTest, UsageIsMemoryOfTheProcessesAndUtilisation) {
  Write(file_, kBusyGpus);
  std::unique_ptr<NvmlApi> nvml = Load();
  ASSERT_NE(nvml, nullptr);

  Result<GpuUsage> busy = nvml->Usage("GPU-a");
  ASSERT_TRUE(busy.ok()) << busy.status().message();
  EXPECT_EQ(busy->memory_used_bytes, 3 * kGiB + 256 * kMiB);  // a C+G process counts once
  EXPECT_EQ(busy->memory_total_bytes, 80 * kGiB);
  EXPECT_EQ(busy->gpu_util_percent, 37u);
  EXPECT_EQ(busy->memory_util_percent, 12u);

  Result<GpuUsage> idle = nvml->Usage("GPU-idle");
  ASSERT_TRUE(idle.ok()) << idle.status().message();
  EXPECT_EQ(idle->memory_used_bytes, 0u);
  EXPECT_EQ(idle->memory_total_bytes, 24 * kGiB);
  EXPECT_EQ(idle->gpu_util_percent, 0u);
  EXPECT_EQ(idle->memory_util_percent, 0u);
}

TEST_F(NvmlTest, UtilisationNvmlDoesNotMeasureReadsZero) {
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g",
                             "utilization": {"gpu": 50, "memory": 50},
                             "processes": [{"pid": 7, "used_memory": "1g"}]}],
                   "fail": {"nvmlDeviceGetUtilizationRates": 3}})");
  std::unique_ptr<NvmlApi> nvml = Load();
  ASSERT_NE(nvml, nullptr);
  Result<GpuUsage> usage = nvml->Usage("GPU-a");
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->memory_used_bytes, 1 * kGiB);
  EXPECT_EQ(usage->gpu_util_percent, 0u);
  EXPECT_EQ(usage->memory_util_percent, 0u);
}

TEST_F(NvmlTest, UsageErrorsNameTheCallAndTheGpu) {
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g"}],
                   "fail": {"nvmlDeviceGetUtilizationRates": 15}})");
  std::unique_ptr<NvmlApi> nvml = Load();
  ASSERT_NE(nvml, nullptr);
  Result<GpuUsage> usage = nvml->Usage("GPU-a");
  ASSERT_FALSE(usage.ok());
  EXPECT_EQ(usage.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(usage.status().message(), "nvmlDeviceGetUtilizationRates(GPU-a) failed: GPU is lost");
}

TEST_F(NvmlTest, ProcessesOfEachGpuEachOnceComputeFirst) {
  Write(file_, kBusyGpus);
  std::unique_ptr<NvmlApi> nvml = Load();
  ASSERT_NE(nvml, nullptr);

  // 300 is in both of NVML's lists; 200 only in the graphics one.
  Result<std::vector<GpuProcess>> a = nvml->Processes("GPU-a");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(AsPids(*a), (Pids{{100, 1 * kGiB}, {300, 2 * kGiB}, {200, 256 * kMiB}}));

  // 400's memory is NVML_VALUE_NOT_AVAILABLE; 100 also uses this GPU.
  Result<std::vector<GpuProcess>> b = nvml->Processes("GPU-b");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(AsPids(*b), (Pids{{400, 0}, {100, 512 * kMiB}}));

  Result<std::vector<GpuProcess>> idle = nvml->Processes("GPU-idle");
  ASSERT_TRUE(idle.ok()) << idle.status().message();
  EXPECT_TRUE(idle->empty());
}

TEST_F(NvmlTest, LongProcessListsGrowTheBuffer) {
  // More processes than the loader's first buffer holds (16): NVML answers
  // NVML_ERROR_INSUFFICIENT_SIZE with the count, and the loader asks again.
  std::string processes;
  Pids expected;
  for (unsigned pid = 1000; pid < 1100; ++pid) {
    processes += std::string(processes.empty() ? "" : ",") + R"({"pid": )" + std::to_string(pid) +
                 R"(, "used_memory": )" + std::to_string(pid * kMiB) + (pid % 3 == 0 ? R"(, "type": "C+G"})" : "}");
    expected.push_back({pid, pid * kMiB});
  }
  for (unsigned pid = 2000; pid < 2040; ++pid) {
    processes += R"(,{"pid": )" + std::to_string(pid) + R"(, "type": "G"})";
    expected.push_back({pid, 0});
  }
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "80g", "processes": [)" + processes + "]}]}");
  std::unique_ptr<NvmlApi> nvml = Load();
  ASSERT_NE(nvml, nullptr);
  Result<std::vector<GpuProcess>> listed = nvml->Processes("GPU-a");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_EQ(AsPids(*listed), expected);
}

TEST_F(NvmlTest, ProcessListsUseTheV2EntryPoints) {
  // _v3's layout changed on some drivers: the loader asks _v2, which the fake
  // also exports; an error there is reported, one in _v3 never seen.
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g", "processes": [{"pid": 7}]}],
                   "fail": {"nvmlDeviceGetComputeRunningProcesses_v3": 15,
                            "nvmlDeviceGetGraphicsRunningProcesses_v3": 15,
                            "nvmlDeviceGetComputeRunningProcesses": 15,
                            "nvmlDeviceGetGraphicsRunningProcesses": 15}})");
  std::unique_ptr<NvmlApi> nvml = Load();
  ASSERT_NE(nvml, nullptr);
  Result<std::vector<GpuProcess>> listed = nvml->Processes("GPU-a");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_EQ(AsPids(*listed), (Pids{{7, 0}}));

  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g"}],
                   "fail": {"nvmlDeviceGetGraphicsRunningProcesses_v2": 15}})");
  listed = nvml->Processes("GPU-a");
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), Status::Code::kUnavailable);
  EXPECT_EQ(listed.status().message(), "nvmlDeviceGetGraphicsRunningProcesses(GPU-a) failed: GPU is lost");
}

TEST_F(NvmlTest, FileChangesAreSeenWithoutReloading) {
  // One instance, as a running agent holds it, while the test starts and
  // stops processes by rewriting the file.
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g"}]})");
  fs::last_write_time(file_, fs::file_time_type::clock::now() - std::chrono::seconds(10));  // settled
  std::unique_ptr<NvmlApi> nvml = Load();
  ASSERT_NE(nvml, nullptr);
  Result<std::vector<GpuProcess>> listed = nvml->Processes("GPU-a");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_TRUE(listed->empty());

  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g",
                             "processes": [{"pid": 7, "used_memory": "1g"}]}]})");
  listed = nvml->Processes("GPU-a");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_EQ(AsPids(*listed), (Pids{{7, 1 * kGiB}}));

  // Rewritten at once to the same size, within the same tick of a coarse
  // time stamp: the modification time does not change.
  const fs::file_time_type written = fs::last_write_time(file_);
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g",
                             "processes": [{"pid": 8, "used_memory": "2g"}]}]})");
  fs::last_write_time(file_, written);
  listed = nvml->Processes("GPU-a");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_EQ(AsPids(*listed), (Pids{{8, 2 * kGiB}}));
  Result<GpuUsage> usage = nvml->Usage("GPU-a");
  ASSERT_TRUE(usage.ok()) << usage.status().message();
  EXPECT_EQ(usage->memory_used_bytes, 2 * kGiB);

  // A file caught half-written keeps what was read last.
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memo)");
  listed = nvml->Processes("GPU-a");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_EQ(AsPids(*listed), (Pids{{8, 2 * kGiB}}));

  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g"}]})");
  listed = nvml->Processes("GPU-a");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_TRUE(listed->empty());
}

TEST_F(NvmlTest, UnknownGpuIsNotFoundAndNamed) {
  Write(file_, kBusyGpus);
  std::unique_ptr<NvmlApi> nvml = Load();
  ASSERT_NE(nvml, nullptr);

  Result<GpuUsage> usage = nvml->Usage("GPU-gone");
  ASSERT_FALSE(usage.ok());
  EXPECT_EQ(usage.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(usage.status().message(), HasSubstr("NVML has no GPU GPU-gone"));

  Result<std::vector<GpuProcess>> listed = nvml->Processes("GPU-gone");
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.status().code(), Status::Code::kNotFound);
  EXPECT_THAT(listed.status().message(), HasSubstr("NVML has no GPU GPU-gone"));
}

TEST_F(NvmlTest, BadProcessesAreNamed) {
  Write(file_, R"({"gpus": [{"uuid": "GPU-a", "name": "Fake", "memory": "8g",
                             "processes": [{"pid": 7, "type": "X"}]}]})");
  Result<std::unique_ptr<NvmlApi>> nvml = LoadNvml(SLOTD_FAKE_NVML_PATH);
  ASSERT_FALSE(nvml.ok());
  EXPECT_THAT(nvml.status().message(),
              HasSubstr("SLOTD_FAKE_NVML_FILE \"" + file_ + "\": gpus[0]: each of \"processes\" needs a \"pid\""));
}

}  // namespace
}  // namespace slotd
