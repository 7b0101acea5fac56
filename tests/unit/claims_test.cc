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
}

}  // namespace
}  // namespace slotd
