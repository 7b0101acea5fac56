// Agent drain end to end: a drained agent refuses new kernels with 503
// draining while its kernels, execs and deletes go on; the drain survives a
// restart; `slotctl drain --wait` returns when no kernel runs.
#include <signal.h>

#include <gtest/gtest.h>

#include <future>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

json Sleeper(const std::string& id, const std::string& seconds = "3600") {
  return {{"kernel_id", id},
          {"image", kTestImage},
          {"command", {"sleep", seconds}},
          {"resources", {{"cpu", 1}, {"mem", "32m"}}}};
}

AgentOptions DrainAgent(const std::string& name) {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = "0";
  return o;
}

TEST(Drain, ADrainedAgentRefusesNewKernelsKeepsItsOwnAndRemembersTheDrain) {
  AgentProcess agent(DrainAgent("drain"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(Sleeper("before"));

  CommandResult drained = Slotctl({"--socket", agent.socket_path(), "drain"});
  EXPECT_EQ(drained.exit_code, 0) << drained.err;
  json info = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(info["draining"], true);
  EXPECT_TRUE(info["draining_since"].is_number()) << info.dump();
  HttpResponse refused = agent.Call("POST", "/v1/kernels", Sleeper("after").dump());
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(json::parse(refused.body)["error"]["code"], "draining") << refused.body;
  EXPECT_NE(refused.body.find("slotctl undrain"), std::string::npos) << refused.body;
  // Everything else goes on: the kernel runs, execs, and a repeat of its own create answers it.
  EXPECT_EQ(agent.CallJson("POST", "/v1/kernels/before/exec", {{"command", {"true"}}}, 200)["exit_code"], 0);
  EXPECT_EQ(agent.Call("POST", "/v1/kernels", Sleeper("before").dump()).status, 200);
  EXPECT_NE(agent.Call("GET", "/metrics").body.find("slotd_agent_draining{agent_id=\"" + agent.options().id + "\"} 1"),
            std::string::npos);

  // The drain survives a restart, the kernel is adopted.
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["draining"], true);
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/before", nullptr, 200)["state"], "RUNNING");
  EXPECT_EQ(agent.Call("POST", "/v1/kernels", Sleeper("after").dump()).status, 503);

  ASSERT_EQ(agent.CallJson("POST", "/v1/agent/undrain", nullptr, 200)["draining"], false);
  agent.CallJson("DELETE", "/v1/kernels/before", nullptr, 200);
  agent.CreateKernel(Sleeper("after"));
}

TEST(Drain, DrainWaitReturnsWhenNoKernelRuns) {
  AgentProcess agent(DrainAgent("wait"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(Sleeper("short", "3"));
  auto waited = std::async(std::launch::async,
                           [&] { return Slotctl({"--socket", agent.socket_path(), "drain", "--wait"}); });
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  CommandResult result = waited.get();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("waiting for 1 kernel: short"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("drained: no kernel runs"), std::string::npos) << result.out;
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/short", nullptr, 200)["state"], "TERMINATED");
}

}  // namespace
}  // namespace slotd::testing
