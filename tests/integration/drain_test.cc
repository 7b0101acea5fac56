// Agent drain end to end: a drained agent refuses new kernels with 503
// draining while its kernels, execs and deletes go on; the drain survives a
// restart; `slotctl drain --wait` returns when no kernel runs; a drain with
// a deadline lets its kernels run until it, warning only those that asked,
// and stops the rest then; a drain that cannot be recorded (a full disk) is
// refused and loses nothing.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <regex>
#include <thread>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

json SleepKernelFor(const std::string& id, const std::string& seconds = "3600") {
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
  agent.CreateKernel(SleepKernelFor("before"));

  CommandResult drained = Slotctl({"--socket", agent.socket_path(), "drain"});
  EXPECT_EQ(drained.exit_code, 0) << drained.err;
  json info = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(info["draining"], true);
  EXPECT_TRUE(info["draining_since"].is_number()) << info.dump();
  HttpResponse refused = agent.Call("POST", "/v1/kernels", SleepKernelFor("after").dump());
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(json::parse(refused.body)["error"]["code"], "draining") << refused.body;
  EXPECT_NE(refused.body.find("slotctl undrain"), std::string::npos) << refused.body;
  // Everything else goes on: the kernel runs, execs, and a repeat of its own create answers it.
  EXPECT_EQ(agent.CallJson("POST", "/v1/kernels/before/exec", {{"command", {"true"}}}, 200)["exit_code"], 0);
  EXPECT_EQ(agent.Call("POST", "/v1/kernels", SleepKernelFor("before").dump()).status, 200);
  EXPECT_NE(agent.Call("GET", "/metrics").body.find("slotd_agent_draining{agent_id=\"" + agent.options().id + "\"} 1"),
            std::string::npos);

  // The drain survives a restart, the kernel is adopted.
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["draining"], true);
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/before", nullptr, 200)["state"], "RUNNING");
  EXPECT_EQ(agent.Call("POST", "/v1/kernels", SleepKernelFor("after").dump()).status, 503);

  ASSERT_EQ(agent.CallJson("POST", "/v1/agent/undrain", nullptr, 200)["draining"], false);
  agent.CallJson("DELETE", "/v1/kernels/before", nullptr, 200);
  agent.CreateKernel(SleepKernelFor("after"));
}

TEST(Drain, DrainWaitReturnsWhenNoKernelRuns) {
  AgentProcess agent(DrainAgent("wait"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepKernelFor("short", "3"));
  auto waited = std::async(std::launch::async,
                           [&] { return Slotctl({"--socket", agent.socket_path(), "drain", "--wait"}); });
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  CommandResult result = waited.get();
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.out.find("waiting for 1 kernel: short"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("drained: no kernel runs"), std::string::npos) << result.out;
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/short", nullptr, 200)["state"], "TERMINATED");
}

// Polls GET /v1/kernels/{id} until its state is TERMINATED, up to 30 s; returns the last record.
json WaitTerminated(const AgentProcess& agent, const std::string& id) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  json k;
  while (std::chrono::steady_clock::now() < until) {
    k = agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200);
    if (k["state"] == "TERMINATED") return k;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "kernel " << id << " did not end: " << k.dump();
  return k;
}

TEST(Drain, ADeadlineLetsKernelsRunUntilItWarningOnlyThoseThatAskedAndStopsTheRestThen) {
  AgentOptions options = DrainAgent("deadline");
  options.cores = "0-1";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Both log the signals they get to their scratch; the first asked for no warning.
  json plain = SleepKernelFor("plain");
  plain["command"] = {"sh", "-c", "trap 'echo term >> /home/work/log; exit 0' TERM; while :; do sleep 0.1; done"};
  agent.CreateKernel(plain);
  json asked = SleepKernelFor("asked");
  asked["command"] = {"sh", "-c", "trap 'echo usr1 >> /home/work/log' USR1; while :; do sleep 0.1; done"};
  asked["warn_before"] = {{"signal", "SIGUSR1"}, {"before", "2s"}};
  agent.CreateKernel(asked);

  CommandResult drained = Slotctl({"--socket", agent.socket_path(), "drain", "--deadline", "4s"});
  ASSERT_EQ(drained.exit_code, 0) << drained.err;
  // The deadline to the second, its zone named.
  const std::string stamp = "\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC";
  EXPECT_TRUE(std::regex_search(drained.out, std::regex("kernels still running at " + stamp + " are stopped")))
      << drained.out;
  CommandResult info = Slotctl({"--socket", agent.socket_path(), "info"});
  EXPECT_TRUE(std::regex_search(
      info.out, std::regex("draining since " + stamp + "; kernels still running at " + stamp + " are stopped")))
      << info.out;

  for (const char* id : {"plain", "asked"}) EXPECT_EQ(WaitTerminated(agent, id)["reason"], "drained") << id;
  const json plain_end = agent.CallJson("GET", "/v1/kernels/plain", nullptr, 200);
  EXPECT_EQ(plain_end["warned"], false) << plain_end.dump();
  EXPECT_EQ(plain_end["exit_code"], 0) << "it ended on the deadline's SIGTERM: " << plain_end.dump();
  EXPECT_EQ(ReadFile(agent.dir() + "/var/scratch/plain/log"), "term\n") << "one SIGTERM, the deadline's stop";
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/asked", nullptr, 200)["warned"], true);
  EXPECT_EQ(ReadFile(agent.dir() + "/var/scratch/asked/log"), "usr1\n");
}

TEST(Drain, ADrainOnAFullDiskIsRefusedAndTheRecordedStateStaysIntact) {
  AgentProcess agent(DrainAgent("full"));
  SmallTmpfs var(agent.dir() + "/var", "256k");  // declared after the agent: unmounted before its directory goes
  if (!var.mounted()) GTEST_SKIP() << "needs a small filesystem for var-base-path: " << var.error();
  ASSERT_TRUE(agent.Start()) << agent.log();
  const std::string record = agent.dir() + "/var/state.json";
  const std::string before = ReadFile(record);
  ASSERT_FALSE(before.empty());

  var.Fill("filler");
  HttpResponse refused = agent.Call("POST", "/v1/agent/drain");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("cannot write " + record), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("free space"), std::string::npos) << refused.body;
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["draining"], false);
  EXPECT_EQ(ReadFile(record), before);

  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["draining"], false);
  EXPECT_EQ(agent.log().find("is not an agent state record"), std::string::npos) << agent.log();

  // With room again, the drain is made and kept.
  ASSERT_EQ(::unlink((agent.dir() + "/var/filler").c_str()), 0);
  EXPECT_EQ(agent.CallJson("POST", "/v1/agent/drain", nullptr, 200)["draining"], true);
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["draining"], true);
}

TEST(Drain, AStateRecordThatCannotBeReadIsKeptAsideAndReported) {
  AgentProcess agent(DrainAgent("bad-record"));
  std::filesystem::create_directories(agent.dir() + "/var");
  WriteFile(agent.dir() + "/var/state.json", "{\"draining\": tru");
  ASSERT_TRUE(agent.Start()) << agent.log();
  std::vector<std::string> aside;
  for (const auto& entry : std::filesystem::directory_iterator(agent.dir() + "/var"))
    if (entry.path().filename().string().rfind("state.json.bad-", 0) == 0) aside.push_back(entry.path().string());
  ASSERT_EQ(aside.size(), 1u) << agent.log();
  EXPECT_EQ(ReadFile(aside[0]), "{\"draining\": tru");
  EXPECT_NE(agent.log().find("kept it aside as " + aside[0]), std::string::npos) << agent.log();
  EXPECT_FALSE(json::parse(ReadFile(agent.dir() + "/var/state.json"), nullptr, false).is_discarded());
}

}  // namespace
}  // namespace slotd::testing
