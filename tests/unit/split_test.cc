// PlanSplit on synthetic nodes (uneven divisions, --by numa, MIG instances,
// too many agents), ReadNodeLayout on the recorded two-socket node, and the
// rendered files read back by LoadConfig and compared by slotd check.
#include "node/split.h"

#include <fstream>

#include <gtest/gtest.h>

#include "common/units.h"
#include "node/check.h"
#include "resources/agent_config.h"
#include "testing/temp_tree.h"
#include "testing/test_host.h"

namespace slotd {
namespace {


// The cores of `list` ("0-3,8"); none for "".
std::vector<int> Cores(const std::string& list) {
  if (list.empty()) return {};
  auto cores = ParseCoreList(list);
  EXPECT_TRUE(cores.ok()) << list << ": " << cores.status().message();
  return cores.ok() ? *cores : std::vector<int>{};
}

// One NUMA node 0 with `cores` and `memory`.
NodeLayout OneNode(const std::string& cores, uint64_t memory) {
  return NodeLayout{{NumaDomain{0, Cores(cores), memory}}, memory, {}};
}

// Node 0 (cores 0-3,8-11, 64 GiB) and node 1 (4-7,12-15, 32 GiB), two
// threads to a physical core, the second 8 above the first as Linux numbers them.
NodeLayout TwoSockets() {
  NodeLayout layout{{NumaDomain{0, Cores("0-3,8-11"), 64 * kGiB}, NumaDomain{1, Cores("4-7,12-15"), 32 * kGiB}},
                    96 * kGiB,
                    {}};
  for (int core = 0; core < 16; ++core) layout.thread_sibling_of[core] = core % 8;
  return layout;
}

SplitRequest Request(int agents, const std::string& cores, uint64_t memory) {
  SplitRequest request;
  request.agents = agents;
  request.cores = Cores(cores);
  request.memory_bytes = memory;
  request.node_name = "gpu1";
  request.ipc_parent = "/run/slotd";
  request.var_parent = "/var/lib/slotd";
  return request;
}

std::vector<SplitDevice> Mocks(int count, int numa_node = 0) {
  std::vector<SplitDevice> devices;
  for (int i = 0; i < count; ++i)
    devices.push_back({"mock", "m" + std::to_string(i), "mock.device", numa_node});
  return devices;
}

std::vector<std::string> Ids(const std::vector<std::string>& ids) { return ids; }

TEST(PlanSplit, UnevenDivisionsGiveTheSpareUnitsToTheFirstAgents) {
  SplitRequest request = Request(3, "0-9", 9 * kGiB + 5);
  request.devices = Mocks(5);
  request.port_first = 30000;
  request.port_last = 30009;
  auto plans = PlanSplit(OneNode("0-9", 10 * kGiB), request);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  ASSERT_EQ(plans->size(), 3u);
  const std::vector<AgentPlan>& p = *plans;
  EXPECT_EQ(p[0].id, "gpu1-0");
  EXPECT_EQ(p[2].id, "gpu1-2");
  EXPECT_EQ(p[0].cores, Cores("0-3"));
  EXPECT_EQ(p[1].cores, Cores("4-6"));
  EXPECT_EQ(p[2].cores, Cores("7-9"));
  for (const AgentPlan& plan : p) EXPECT_EQ(plan.memory_bytes, 3 * kGiB);  // rounded down to a MiB
  EXPECT_EQ(p[0].devices.at("mock"), Ids({"m0", "m1"}));
  EXPECT_EQ(p[1].devices.at("mock"), Ids({"m2", "m3"}));
  EXPECT_EQ(p[2].devices.at("mock"), Ids({"m4"}));
  EXPECT_EQ(p[0].port_first, 30000);
  EXPECT_EQ(p[0].port_last, 30003);
  EXPECT_EQ(p[1].port_first, 30004);
  EXPECT_EQ(p[1].port_last, 30006);
  EXPECT_EQ(p[2].port_first, 30007);
  EXPECT_EQ(p[2].port_last, 30009);
  EXPECT_EQ(p[0].rpc_port, 6001);
  EXPECT_EQ(p[2].rpc_port, 6003);
  EXPECT_EQ(p[1].ipc_base_path, "/run/slotd/gpu1-1");
  EXPECT_EQ(p[1].var_base_path, "/var/lib/slotd/gpu1-1");
  EXPECT_EQ(p[1].scratch_root, "");
  EXPECT_FALSE(p[1].numa_node.has_value());
}

TEST(PlanSplit, AnAgentWithoutADeviceOfAKindHasNoEntryForIt) {
  SplitRequest request = Request(3, "0-5", 6 * kGiB);
  request.devices = Mocks(2);
  request.rpc_port = 0;
  request.scratch_parent = "/scratch";
  auto plans = PlanSplit(OneNode("0-5", 8 * kGiB), request);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  EXPECT_EQ((*plans)[0].devices.at("mock"), Ids({"m0"}));
  EXPECT_EQ((*plans)[1].devices.at("mock"), Ids({"m1"}));
  EXPECT_TRUE((*plans)[2].devices.empty());
  EXPECT_EQ((*plans)[2].rpc_port, 0);
  EXPECT_EQ((*plans)[2].scratch_root, "/scratch/gpu1-2");
}

TEST(PlanSplit, ByNumaKeepsEachAgentsCoresMemoryAndDevicesOnOneNode) {
  SplitRequest request = Request(4, "0-15", 90 * kGiB);
  request.by_numa = true;
  for (int i = 0; i < 8; ++i) request.devices.push_back({"cuda", "GPU-" + std::to_string(i), "cuda.device", i / 4});
  auto plans = PlanSplit(TwoSockets(), request);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  const std::vector<AgentPlan>& p = *plans;
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].numa_node, 0);
  EXPECT_EQ(p[1].numa_node, 0);
  EXPECT_EQ(p[2].numa_node, 1);
  EXPECT_EQ(p[3].numa_node, 1);
  // A physical core's two threads go to one agent.
  EXPECT_EQ(p[0].cores, Cores("0-1,8-9"));
  EXPECT_EQ(p[1].cores, Cores("2-3,10-11"));
  EXPECT_EQ(p[2].cores, Cores("4-5,12-13"));
  EXPECT_EQ(p[3].cores, Cores("6-7,14-15"));
  // 90 GiB in proportion to 64 and 32 GiB: 60 and 30, two agents each.
  EXPECT_EQ(p[0].memory_bytes, 30 * kGiB);
  EXPECT_EQ(p[2].memory_bytes, 15 * kGiB);
  EXPECT_EQ(p[0].devices.at("cuda"), Ids({"GPU-0", "GPU-1"}));
  EXPECT_EQ(p[1].devices.at("cuda"), Ids({"GPU-2", "GPU-3"}));
  EXPECT_EQ(p[2].devices.at("cuda"), Ids({"GPU-4", "GPU-5"}));
  EXPECT_EQ(p[3].devices.at("cuda"), Ids({"GPU-6", "GPU-7"}));
}

TEST(PlanSplit, SharesOf8GiBAndMoreAreRoundedDownToAGiB) {
  auto plans = PlanSplit(TwoSockets(), Request(2, "0-15", 17 * kGiB + 5 * (1ull << 20)));
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  EXPECT_EQ((*plans)[0].memory_bytes, 8 * kGiB);
  plans = PlanSplit(TwoSockets(), Request(2, "0-15", 15 * kGiB + 5 * (1ull << 20)));
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  EXPECT_EQ((*plans)[0].memory_bytes, 7 * kGiB + 514 * (1ull << 20));
}

TEST(PlanSplit, ByNumaGivesANodesMemoryAtMostToItsAgents) {
  // The memory to divide is more than the NUMA nodes' sum (a node's meminfo
  // can count less than MemTotal): each node's agents get at most its memory.
  SplitRequest request = Request(2, "0-15", 200 * kGiB);
  request.by_numa = true;
  auto plans = PlanSplit(TwoSockets(), request);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  EXPECT_EQ((*plans)[0].memory_bytes, 64 * kGiB);
  EXPECT_EQ((*plans)[1].memory_bytes, 32 * kGiB);
}

TEST(PlanSplit, ByNumaDividesDevicesOnNoNodeWithCoresOverEveryAgent) {
  SplitRequest request = Request(2, "0-15", 90 * kGiB);
  request.by_numa = true;
  request.devices = Mocks(1, 0);
  std::vector<SplitDevice> far = Mocks(3, 5);
  for (size_t i = 0; i < far.size(); ++i) far[i].id = "far" + std::to_string(i);
  request.devices.insert(request.devices.end(), far.begin(), far.end());
  auto plans = PlanSplit(TwoSockets(), request);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  // The spare far device goes to agent 1, which had fewer.
  EXPECT_EQ((*plans)[0].devices.at("mock"), Ids({"m0", "far0"}));
  EXPECT_EQ((*plans)[1].devices.at("mock"), Ids({"far1", "far2"}));
}

TEST(PlanSplit, ByNumaNeedsAMultipleOfTheNodesWithCores) {
  SplitRequest request = Request(3, "0-15", 90 * kGiB);
  request.by_numa = true;
  auto plans = PlanSplit(TwoSockets(), request);
  ASSERT_FALSE(plans.ok());
  EXPECT_NE(plans.status().message().find("--agents must be a multiple of 2 (2, 4 or 6), not 3"), std::string::npos)
      << plans.status().message();

  // A NUMA node whose cores are all reserved does not count.
  request = Request(3, "0-3,8-11", 90 * kGiB);
  request.by_numa = true;
  plans = PlanSplit(TwoSockets(), request);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  for (const AgentPlan& plan : *plans) EXPECT_EQ(plan.numa_node, 0);

  request = Request(6, "0-5,8-13", 90 * kGiB);
  request.by_numa = true;
  plans = PlanSplit(TwoSockets(), request);
  ASSERT_FALSE(plans.ok());
  EXPECT_NE(plans.status().message().find("NUMA node 1 has 2 whole cores to divide (4-5,12-13), fewer than its 3 "
                                          "agents"),
            std::string::npos)
      << plans.status().message();
}

TEST(PlanSplit, MigInstancesAreDividedProfileByProfile) {
  SplitRequest request = Request(2, "0-7", 16 * kGiB);
  request.devices = {{"cuda", "GPU-a", "cuda.device", 0},
                     {"cuda", "MIG-1", "cuda.mig-1c18g", 0},
                     {"cuda", "MIG-2", "cuda.mig-1c18g", 0},
                     {"cuda", "MIG-3", "cuda.mig-1c18g", 0},
                     {"cuda", "MIG-4", "cuda.mig-3c71g", 0}};
  auto plans = PlanSplit(OneNode("0-7", 32 * kGiB), request);
  ASSERT_TRUE(plans.ok()) << plans.status().message();
  // The whole GPU to agent 0; the spare 1g instance to agent 1, which had
  // fewer devices; the 3g instance to agent 0 on a tie.
  EXPECT_EQ((*plans)[0].devices.at("cuda"), Ids({"GPU-a", "MIG-1", "MIG-4"}));
  EXPECT_EQ((*plans)[1].devices.at("cuda"), Ids({"MIG-2", "MIG-3"}));
}

TEST(PlanSplit, RefusesWhatCannotBeDivided) {
  auto plans = PlanSplit(OneNode("0-3", 8 * kGiB), Request(5, "0-3", 8 * kGiB));
  ASSERT_FALSE(plans.ok());
  EXPECT_NE(plans.status().message().find("--agents 5 needs a whole core for each agent, and there are 4 whole "
                                          "cores to divide"),
            std::string::npos)
      << plans.status().message();

  // Eight threads are four whole cores.
  plans = PlanSplit(TwoSockets(), Request(5, "0-3,8-11", 8 * kGiB));
  ASSERT_FALSE(plans.ok());
  EXPECT_NE(plans.status().message().find("there are 4 whole cores"), std::string::npos) << plans.status().message();

  plans = PlanSplit(OneNode("0-3", 8 * kGiB), Request(0, "0-3", 8 * kGiB));
  ASSERT_FALSE(plans.ok());
  EXPECT_NE(plans.status().message().find("give at least 1 agent"), std::string::npos);

  SplitRequest narrow = Request(3, "0-3", 8 * kGiB);
  narrow.port_first = 31000;
  narrow.port_last = 31001;
  plans = PlanSplit(OneNode("0-3", 8 * kGiB), narrow);
  ASSERT_FALSE(plans.ok());
  EXPECT_NE(plans.status().message().find("has 2 ports, fewer than the 3 agents"), std::string::npos)
      << plans.status().message();

  SplitRequest high = Request(3, "0-3", 8 * kGiB);
  high.rpc_port = 65534;
  EXPECT_FALSE(PlanSplit(OneNode("0-3", 8 * kGiB), high).ok());

  plans = PlanSplit(OneNode("0-3", 8 * kGiB), Request(3, "0-3", 2 * (1ull << 20)));
  ASSERT_FALSE(plans.ok());
  EXPECT_NE(plans.status().message().find("less than 1m each"), std::string::npos) << plans.status().message();
}

TEST(SplitAgentId, MakesTheNodeNameFitForAnId) {
  EXPECT_EQ(SplitAgentId("GPU-Node_01.Example.com", 3), "gpu-node_01.example.com-3");
  EXPECT_EQ(SplitAgentId("--x y", 0), "x-y-0");
  EXPECT_EQ(SplitAgentId("", 1), "node-1");
  const std::string id = SplitAgentId(std::string(100, 'a'), 12);
  EXPECT_EQ(id.size(), 64u);
  EXPECT_EQ(id.substr(61), "-12");
}

const std::string kRecorded = std::string(SLOTD_FIXTURES_DIR) + "/node-2s-8gpu";

TEST(ReadNodeLayout, ReadsTheRecordedTwoSocketNode) {
  auto layout = ReadNodeLayout(kRecorded, std::nullopt);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  ASSERT_EQ(layout->numa.size(), 2u);
  EXPECT_EQ(layout->numa[0].node, 0);
  EXPECT_EQ(layout->numa[0].cores, Cores("0-47,96-143"));
  EXPECT_EQ(layout->numa[1].cores, Cores("48-95,144-191"));
  EXPECT_EQ(layout->numa[0].memory_bytes, 1056195724ull * 1024);
  EXPECT_EQ(layout->numa[1].memory_bytes, 1056964608ull * 1024);
  EXPECT_EQ(layout->memory_bytes, 2113160332ull * 1024);
  EXPECT_EQ(layout->thread_sibling_of.at(100), 4);
  EXPECT_EQ(layout->thread_sibling_of.at(4), 4);

  // Only the cores of a given cpuset count.
  layout = ReadNodeLayout(kRecorded, Cores("40-55"));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  EXPECT_EQ(layout->numa[0].cores, Cores("40-47"));
  EXPECT_EQ(layout->numa[1].cores, Cores("48-55"));

  const HostFacts facts = layout->AsHostFacts(TestHost());
  EXPECT_EQ(facts.hostname, "testnode");
  EXPECT_EQ(facts.cpuset, Cores("40-55"));
  EXPECT_EQ(facts.core_numa_node.at(50), 1);
  EXPECT_EQ(facts.memory_bytes, 2113160332ull * 1024);
}

TEST(ReadNodeLayout, AMissingTreeSaysWhatItLookedFor) {
  TempTree tree("split-test");
  auto layout = ReadNodeLayout(tree.root(), std::nullopt);
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("no NUMA nodes in " + tree.root() + "/sys/devices/system/node"),
            std::string::npos)
      << layout.status().message();

  // Without NUMA directories the live node is one node of its cpuset.
  tree.Write("proc/meminfo", "MemTotal:       8388608 kB\n");
  layout = ReadNodeLayout(tree.root(), Cores("0-3"));
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  ASSERT_EQ(layout->numa.size(), 1u);
  EXPECT_EQ(layout->numa[0].cores, Cores("0-3"));
  EXPECT_EQ(layout->memory_bytes, 8 * kGiB);

  tree.Write("sys/devices/system/node/node0/cpulist", "0-3\n");
  layout = ReadNodeLayout(tree.root(), std::nullopt);
  ASSERT_FALSE(layout.ok());
  EXPECT_NE(layout.status().message().find("node0/meminfo"), std::string::npos) << layout.status().message();
}

TEST(RenderAgentConfig, WritesThePlanOverTheBaseAndTheFilesPassTheCheck) {
  TempTree tree("split-render");
  const std::string base_text =
      "[agent]\nid = \"base\"\nscaling-group = \"gpu\"\nipc-base-path = \"" + tree.root() + "/run/base\"\n"
      "[node]\nclaims-dir = \"" + tree.root() + "/claims\"\n"
      "[container]\nport-range = [40000, 40099]\nstop-timeout = \"3s\"\n"
      "[resource]\nreserved-cpu = 2\n"
      "[resource.mock]\ndevices = [{ id = \"m0\", memory = \"1g\" }, { id = \"m1\", memory = \"1g\", numa-node = 1 },"
      " { id = \"m2\", memory = \"1g\" }]\n";
  auto layout = ReadNodeLayout(kRecorded, std::nullopt);
  ASSERT_TRUE(layout.ok()) << layout.status().message();
  const HostFacts node = layout->AsHostFacts(TestHost());
  auto base = ParseConfig(base_text, "base.toml", node);
  ASSERT_TRUE(base.ok()) << base.status().message();
  auto devices = ListSplitDevices(*base);
  ASSERT_TRUE(devices.ok()) << devices.status().message();
  ASSERT_EQ(devices->size(), 3u);
  EXPECT_EQ((*devices)[1], (SplitDevice{"mock", "m1", "mock.device", 1}));

  SplitRequest request = Request(4, "", base->resource.memory_size);
  request.cores = base->resource.allowed_cores;  // every core but the last 2
  request.by_numa = true;
  request.devices = *devices;
  request.ipc_parent = tree.root() + "/run";
  request.var_parent = tree.root() + "/var";
  request.port_first = 40000;
  request.port_last = 40099;
  auto plans = PlanSplit(*layout, request);
  ASSERT_TRUE(plans.ok()) << plans.status().message();

  auto tables = toml::parse(base_text);
  std::vector<std::string> paths;
  for (const AgentPlan& plan : *plans) {
    const std::string text = RenderAgentConfig(tables, plan, base->node.claims_dir, "# a header\n");
    EXPECT_EQ(text.rfind("# a header\n", 0), 0u) << text;
    auto config = ParseConfig(text, plan.id + ".toml", node);
    ASSERT_TRUE(config.ok()) << config.status().message() << "\n" << text;
    EXPECT_EQ(config->agent.id, plan.id);
    EXPECT_EQ(config->agent.rpc_port, plan.rpc_port);
    EXPECT_EQ(config->agent.ipc_base_path, plan.ipc_base_path);
    EXPECT_EQ(config->agent.scaling_group, "gpu");
    EXPECT_EQ(config->container.stop_timeout, std::chrono::seconds(3));
    EXPECT_EQ(config->container.port_range_start, plan.port_first);
    EXPECT_EQ(config->resource.allowed_cores, plan.cores);
    EXPECT_EQ(config->resource.memory_size, plan.memory_bytes);
    const bool has_mock = config->resource.devices.by_kind.count("mock") > 0;
    EXPECT_EQ(has_mock, plan.devices.count("mock") > 0) << text;
    tree.Write(plan.id + ".toml", text);
    paths.push_back(tree.root() + "/" + plan.id + ".toml");
  }
  EXPECT_EQ((*plans)[0].cores, Cores("0-23,96-119"));
  EXPECT_EQ((*plans)[2].cores, Cores("48-71,144-167"));
  EXPECT_EQ((*plans)[3].cores, Cores("72-95,168-189"));  // the last 2 cores, 190-191, reserved
  EXPECT_EQ((*plans)[2].devices.at("mock"), Ids({"m1"}));
  const CheckReport report = CheckNodeConfigs(paths, node);
  EXPECT_EQ(report.ExitCode(), 0) << report.Text();
}

}  // namespace
}  // namespace slotd
