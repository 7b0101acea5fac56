// ClaimsOf: what an agent claims on its node, taken from its config.
#include "node/claims.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace slotd {
namespace {

Config AgentConfig(const std::string& path) {
  Config config;
  config.path = path;
  config.agent.id = "a1";
  config.agent.rpc_host = "127.0.0.1";
  config.agent.rpc_port = 6001;
  config.agent.ipc_base_path = "/run/slotd/a1";
  config.agent.var_base_path = "/var/lib/slotd/a1";
  config.container.port_range_start = 30000;
  config.container.port_range_end = 30009;
  config.resource.allowed_cores = {2, 3};
  config.resource.memory_size = 1ull << 30;
  return config;
}

TEST(Claims, RecordTheConfigPathAbsoluteSoAdviceWorksFromAnyDirectory) {
  const AgentClaims claims = ClaimsOf(AgentConfig("conf/../a1.toml"), {});
  EXPECT_EQ(claims.config_path, (std::filesystem::current_path() / "a1.toml").string());
  EXPECT_EQ(ClaimsOf(AgentConfig("/etc/slotd/a1.toml"), {}).config_path, "/etc/slotd/a1.toml");
}

TEST(Claims, TakeIdPortsPathsCoresMemoryAndDevicesFromTheConfig) {
  const AgentClaims claims = ClaimsOf(AgentConfig("/etc/slotd/a1.toml"), {{"mock", {"mock0", "mock1"}}});
  EXPECT_EQ(claims.agent_id, "a1");
  EXPECT_EQ(claims.pid, static_cast<int>(::getpid()));
  EXPECT_EQ(claims.api_port, 6001);
  EXPECT_EQ(claims.ipc_base_path, "/run/slotd/a1");
  EXPECT_EQ(claims.var_base_path, "/var/lib/slotd/a1");
  EXPECT_EQ(claims.port_first, 30000);
  EXPECT_EQ(claims.port_last, 30009);
  EXPECT_EQ(claims.cores, (std::vector<int>{2, 3}));
  EXPECT_EQ(claims.memory_bytes, 1ull << 30);
  EXPECT_EQ(claims.devices.at("mock"), (std::vector<std::string>{"mock0", "mock1"}));
  EXPECT_EQ(claims.scratch_root, "/var/lib/slotd/a1/scratch");  // the default, under var-base-path
}

// Two agents' claims, b's paths under /b, with a's scratch root at `scratch`.
std::vector<Clash> ScratchClashes(const std::string& scratch) {
  Config a = AgentConfig("/etc/slotd/a.toml");
  a.container.scratch_root = scratch;
  Config b = AgentConfig("/etc/slotd/b.toml");
  b.agent.id = "b";
  b.agent.rpc_port = 6002;
  b.agent.ipc_base_path = "/b/run";
  b.agent.var_base_path = "/b/var";
  b.container.port_range_start = 31000;
  b.container.port_range_end = 31009;
  b.resource.allowed_cores = {4};
  return FindClashes(ClaimsOf(a, {}), ClaimsOf(b, {}));
}

// An agent removes what is in its scratch root and is no kernel's, so no
// other agent's path may be, hold or lie in it.
TEST(Claims, AScratchRootClashesWithAnyOtherAgentsPathItMeets) {
  EXPECT_TRUE(ScratchClashes("/scratch/a").empty());
  EXPECT_TRUE(ScratchClashes("/b/varnish").empty());  // a neighbour by name only
  for (const char* meets : {"/b/var/scratch", "/b/var", "/b", "/", "/b/run/x", "/b/var/"}) {
    SCOPED_TRACE(meets);
    const std::vector<Clash> clashes = ScratchClashes(meets);
    ASSERT_FALSE(clashes.empty());
    EXPECT_EQ(clashes[0].what, "container.scratch-root");
  }
}

TEST(Claims, AClaimFileWithoutAScratchRootIsReadAsNone) {
  nlohmann::json j = ClaimsOf(AgentConfig("/etc/slotd/a1.toml"), {}).ToJson();
  j.erase("scratch_root");
  Result<AgentClaims> claims = AgentClaims::FromJson(j);
  ASSERT_TRUE(claims.ok()) << claims.status().message();
  EXPECT_EQ(claims->scratch_root, "");
}

}  // namespace
}  // namespace slotd

namespace slotd {
namespace {

// A whole GPU meets each of its MIG instances; two instances of one GPU do
// not meet; an instance named without its GPU (a container's label) meets
// the same instance named with it.
TEST(DevicesOverlapTest, FollowsTheGpuAndMigHierarchy) {
  EXPECT_TRUE(DevicesOverlap("GPU-a", "GPU-a"));
  EXPECT_TRUE(DevicesOverlap("GPU-a", "GPU-a/MIG-1"));
  EXPECT_TRUE(DevicesOverlap("GPU-a/MIG-1", "GPU-a"));
  EXPECT_TRUE(DevicesOverlap("GPU-a/MIG-1", "MIG-1"));
  EXPECT_FALSE(DevicesOverlap("GPU-a/MIG-1", "GPU-a/MIG-2"));
  EXPECT_FALSE(DevicesOverlap("GPU-a", "GPU-b/MIG-1"));
  EXPECT_FALSE(DevicesOverlap("GPU-a", "GPU-ab"));
  AgentClaims a, b;
  a.agent_id = "a", b.agent_id = "b";
  a.ipc_base_path = "/a", b.ipc_base_path = "/b";
  a.var_base_path = "/va", b.var_base_path = "/vb";
  a.port_first = a.port_last = 1, b.port_first = b.port_last = 2;
  a.devices["cuda"] = {"GPU-b", "GPU-a/MIG-1"};
  b.devices["cuda"] = {"GPU-a/MIG-2", "GPU-a/MIG-3"};
  EXPECT_TRUE(FindClashes(a, b).empty());
  b.devices["cuda"].push_back("GPU-a");
  std::vector<Clash> clashes = FindClashes(a, b);
  ASSERT_EQ(clashes.size(), 1u);
  EXPECT_EQ(clashes[0].what, "cuda device");
  EXPECT_EQ(clashes[0].value, "GPU-a/MIG-1 and GPU-a");
}

}  // namespace
}  // namespace slotd
