// `slotd split` through the real binary: on this machine (mock devices from a
// base config) and on the recorded two-socket eight-GPU node
// (tests/fixtures/node-2s-8gpu, GPUs from the fake NVML); what it writes must
// pass `slotd check` as written. No engine needed.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "common/units.h"
#include "config/host_facts.h"
#include "integration/harness.h"
#include "node/split.h"
#include "resources/agent_config.h"
#include "resources/cuda/cuda_kind.h"
#include "resources/mock/mock_kind.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

const std::string kRecorded = std::string(SLOTD_FIXTURES_DIR) + "/node-2s-8gpu";


// The .toml files in `dir`, sorted.
std::vector<std::string> TomlFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".toml") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// A base config in `dir`: every path under `dir`, and `extra` appended.
std::string WriteBase(const std::string& dir, const std::string& extra) {
  const std::string path = dir + "/base.toml";
  WriteFile(path, "[agent]\nid = \"base\"\nnode = \"Split-Node\"\nrpc-listen-addr = \"127.0.0.1:0\"\n"
                  "ipc-base-path = \"" + dir + "/run/base\"\nvar-base-path = \"" + dir + "/var/base\"\n"
                  "[node]\nclaims-dir = \"" + dir + "/claims\"\n"
                  "[container]\nport-range = [41000, 41099]\nauto-pull = \"none\"\n" + extra);
  return path;
}

TEST(Split, ThisMachineWithMockDevicesPassesTheCheck) {
  TempDir dir;
  // Two agents, or one on a machine of one whole core (hardware threads of one core go to one agent).
  const std::vector<int> cpuset = HostFacts::Detect().cpuset;
  auto layout = ReadNodeLayout("/", cpuset);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  std::set<int> whole_cores;
  for (int core : cpuset)
    whole_cores.insert(layout->thread_sibling_of.count(core) ? layout->thread_sibling_of.at(core) : core);
  const int agents = std::min<int>(static_cast<int>(whole_cores.size()), 2);
  const std::string base = WriteBase(dir.path(), "[resource]\nreserved-cpu = 0\nreserved-mem = \"256m\"\n"
                                                 "[resource.mock]\ndevices = [{ id = \"m0\", memory = \"1g\" }, "
                                                 "{ id = \"m1\", memory = \"1g\" }, { id = \"m2\", memory = \"1g\" }]\n");
  const std::string out = dir.path() + "/out";
  CommandResult r = Slotd({"split", "--agents", std::to_string(agents), "--out", out, "--base-config", base});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("slotd check: " + std::to_string(agents) + " config"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("split-node-0"), std::string::npos) << r.out;
  const std::vector<std::string> files = TomlFiles(out);
  ASSERT_EQ(files.size(), static_cast<size_t>(agents));
  EXPECT_EQ(files[0], out + "/split-node-0.toml");
  const std::string text = ReadFile(files[0]);
  EXPECT_EQ(text.rfind("# Written by slotd split: slotd split --agents", 0), 0u) << text;

  CommandResult check = Slotd([&] {
    std::vector<std::string> args = {"check"};
    args.insert(args.end(), files.begin(), files.end());
    return args;
  }());
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  // Every core and device went to one agent; the claims directory is one.
  std::set<int> all_cores;
  std::set<std::string> all_devices;
  for (const std::string& file : files) {
    auto config = LoadConfig(file);
    ASSERT_TRUE(config.ok()) << config.status().message();
    all_cores.insert(config->resource.allowed_cores.begin(), config->resource.allowed_cores.end());
    EXPECT_EQ(config->node.claims_dir, dir.path() + "/claims");
    EXPECT_EQ(config->agent.ipc_base_path, dir.path() + "/run/" + config->agent.id);
    EXPECT_EQ(config->agent.rpc_port, 0);
    EXPECT_EQ(config->container.auto_pull, PullPolicy::kNone);  // the base's own key
    const auto& by_kind = config->resource.devices.by_kind;
    ASSERT_TRUE(by_kind.count("mock"));
    const auto* mock = config->resource.devices.Of<MockConfig>("mock");
    ASSERT_NE(mock, nullptr);
    all_devices.insert(mock->allowed_devices.begin(), mock->allowed_devices.end());
  }
  EXPECT_EQ(all_cores.size(), HostFacts::Detect().cpuset.size());
  EXPECT_EQ(all_devices, (std::set<std::string>{"m0", "m1", "m2"}));

  // Written files are not overwritten without --force.
  r = Slotd({"split", "--agents", std::to_string(agents), "--out", out, "--base-config", base});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("these files exist and would be overwritten:\n  " + files[0]), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pass --force"), std::string::npos) << r.err;
  r = Slotd({"split", "--agents", std::to_string(agents), "--out", out, "--base-config", base, "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;

  // A config of an earlier split that this one does not rewrite is pointed out.
  WriteFile(out + "/split-node-9.toml", "[agent]\nid = \"split-node-9\"\n");
  r = Slotd({"split", "--agents", std::to_string(agents), "--out", out, "--base-config", base, "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("note: " + out + " also has split-node-9.toml, not written by this run"), std::string::npos)
      << r.out;
}

// The GPUs of the recorded node: UUID -> NUMA node.
std::map<std::string, int> RecordedGpus() {
  std::ifstream in(kRecorded + "/nvml.json");
  const json nvml = json::parse(in);
  std::map<std::string, int> gpus;
  for (const json& gpu : nvml["gpus"]) gpus[gpu["uuid"]] = gpu["numa_node"];
  return gpus;
}

class SplitRecorded : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SLOTD_FAKE_NVML_FILE", (kRecorded + "/nvml.json").c_str(), 1);
    base_ = WriteBase(dir_.path(), "[resource.cuda]\nnvml-library = \"" + std::string(SLOTD_FAKE_NVML_PATH) + "\"\n");
  }
  void TearDown() override { unsetenv("SLOTD_FAKE_NVML_FILE"); }

  // `slotd check` of `files` for the recorded node's cores and memory.
  CommandResult CheckRecorded(const std::vector<std::string>& files) {
    std::vector<std::string> args = {"check", "--node-cores", "0-191", "--node-memory", "2113160332k"};
    args.insert(args.end(), files.begin(), files.end());
    return Slotd(args);
  }

  // Runs `slotd split --agents 4 --by numa` of the recorded node into
  // <dir>/out and `slotd check` of what it wrote; returns the files written.
  std::vector<std::string> SplitFourByNuma() {
    const std::string out = dir_.path() + "/out";
    CommandResult r = Slotd({"split", "--agents", "4", "--by", "numa", "--out", out, "--base-config", base_,
                             "--sysfs-root", kRecorded});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::vector<std::string> files = TomlFiles(out);
    CommandResult check = CheckRecorded(files);
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    return files;
  }

  TempDir dir_;
  std::string base_;
};

TEST_F(SplitRecorded, ByNumaPlacesEachAgentsCoresAndGpusOnOneNode) {
  const std::vector<std::string> files = SplitFourByNuma();
  ASSERT_EQ(files.size(), 4u);

  HostFacts node;
  node.hostname = "recorded";
  node.cpuset = *ParseCoreList("0-191");
  node.memory_bytes = 2113160332ull * 1024;
  const std::map<int, std::vector<int>> numa_cores = {{0, *ParseCoreList("0-47,96-143")},
                                                      {1, *ParseCoreList("48-95,144-191")}};
  const std::map<std::string, int> gpus = RecordedGpus();
  std::set<std::string> every_gpu;
  std::map<int, int> agents_per_numa;
  for (const std::string& file : files) {
    auto config = LoadConfig(file, node);
    ASSERT_TRUE(config.ok()) << config.status().message();
    const auto* cuda = config->resource.devices.Of<CudaConfig>("cuda");
    ASSERT_NE(cuda, nullptr) << file;
    ASSERT_EQ(cuda->allowed_devices.size(), 2u) << file;
    const int numa = gpus.at(cuda->allowed_devices[0]);
    ++agents_per_numa[numa];
    for (const std::string& uuid : cuda->allowed_devices) {
      EXPECT_EQ(gpus.at(uuid), numa) << file << ": " << uuid;
      every_gpu.insert(uuid);
    }
    const std::vector<int>& on_node = numa_cores.at(numa);
    for (int core : config->resource.allowed_cores)
      EXPECT_TRUE(std::binary_search(on_node.begin(), on_node.end(), core)) << file << ": core " << core;
    EXPECT_GE(config->resource.allowed_cores.size(), 46u) << file;
    // Whole cores: a thread's sibling (96 apart) is the same agent's, unless reserved.
    for (int core : config->resource.allowed_cores) {
      const int sibling = core < 96 ? core + 96 : core - 96;
      if (sibling < 190) {
        EXPECT_TRUE(std::binary_search(config->resource.allowed_cores.begin(), config->resource.allowed_cores.end(),
                                       sibling))
            << file << ": core " << core;
      }
    }
    EXPECT_GT(config->resource.memory_size, 500ull << 30) << file;
  }
  EXPECT_EQ(every_gpu.size(), 8u);
  EXPECT_EQ(agents_per_numa, (std::map<int, int>{{0, 2}, {1, 2}}));

  // Three agents do not divide over two NUMA nodes.
  CommandResult r = Slotd({"split", "--agents", "3", "--by", "numa", "--out", dir_.path() + "/three", "--base-config", base_,
             "--sysfs-root", kRecorded});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--agents must be a multiple of 2 (2, 4 or 6), not 3"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/three"));
}

TEST_F(SplitRecorded, AGpuInMigModeIsDividedByItsInstances) {
  std::ifstream in(kRecorded + "/nvml.json");
  json nvml = json::parse(in);
  json instances = json::array();
  for (int i = 0; i < 3; ++i)
    instances.push_back({{"uuid", "MIG-7000000" + std::to_string(i)}, {"profile", "2g.35gb"}, {"memory", "35g"},
                         {"gpu_instance", i + 1}});
  nvml["gpus"][7]["mig"] = {{"enabled", true}, {"instances", instances}};
  const std::string nvml_file = dir_.path() + "/nvml.json";
  WriteFile(nvml_file, nvml.dump());
  setenv("SLOTD_FAKE_NVML_FILE", nvml_file.c_str(), 1);

  const std::vector<std::string> files = SplitFourByNuma();
  ASSERT_EQ(files.size(), 4u);
  // NUMA node 1 has GPUs 4-6 whole and GPU 7's three instances, divided
  // slot by slot, each spare to the agent with fewer: 4, 5 and an instance
  // to the one agent, 6 and two instances to the other; GPU 7 is not listed whole.
  const std::string gpu7 = nvml["gpus"][7]["uuid"];
  const std::string text2 = ReadFile(files[2]), text3 = ReadFile(files[3]);
  EXPECT_NE(text2.find("allowed-devices = [ \"" + nvml["gpus"][4]["uuid"].get<std::string>() + "\", \"" +
                       nvml["gpus"][5]["uuid"].get<std::string>() + "\", \"MIG-70000000\" ]"),
            std::string::npos)
      << text2;
  EXPECT_NE(text3.find("allowed-devices = [ \"" + nvml["gpus"][6]["uuid"].get<std::string>() +
                       "\", \"MIG-70000001\", \"MIG-70000002\" ]"),
            std::string::npos)
      << text3;
  EXPECT_EQ(text2.find(gpu7), std::string::npos) << text2;
  EXPECT_EQ(text3.find(gpu7), std::string::npos) << text3;
}

TEST_F(SplitRecorded, AnyAgentCountWithoutByNumaPassesTheCheck) {
  for (int agents : {1, 3, 8, 12}) {
    const std::string out = dir_.path() + "/out" + std::to_string(agents);
    CommandResult r = Slotd({"split", "--agents", std::to_string(agents), "--out", out, "--base-config", base_,
                             "--sysfs-root", kRecorded});
    ASSERT_EQ(r.exit_code, 0) << agents << " agents: " << r.out << r.err;
    const std::vector<std::string> files = TomlFiles(out);
    ASSERT_EQ(files.size(), static_cast<size_t>(agents));
    CommandResult check = CheckRecorded(files);
    EXPECT_EQ(check.exit_code, 0) << agents << " agents: " << check.out << check.err;
  }
}

TEST_F(SplitRecorded, RefusesWhatItCannotDoAndWritesNothing) {
  const std::string out = dir_.path() + "/out";
  CommandResult r = Slotd({"split", "--agents", "0", "--out", out, "--sysfs-root", kRecorded});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("give at least 1 agent"), std::string::npos) << r.err;

  r = Slotd({"split", "--agents", "500", "--out", out, "--sysfs-root", kRecorded});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--agents 500 needs a whole core for each agent, and there are 96 whole cores to divide"),
            std::string::npos)
      << r.err;

  const std::string bad = dir_.path() + "/bad.toml";
  WriteFile(bad, "[agent]\nid = \"Bad Id\"\n");
  r = Slotd({"split", "--agents", "2", "--out", out, "--base-config", bad, "--sysfs-root", kRecorded});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("the base config " + bad + " does not load:\n" + bad + ":2: agent.id"), std::string::npos)
      << r.err;

  r = Slotd({"--config", base_, "split", "--agents", "2", "--out", out});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("split excludes --config"), std::string::npos) << r.err;

  r = Slotd({"split", "--agents", "2", "--out", out, "--sysfs-root", dir_.path()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("no NUMA nodes in " + dir_.path() + "/sys/devices/system/node"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace slotd::testing
