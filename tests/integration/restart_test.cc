// Restart policies and the stop contract on the real engine, driven through
// the real agent: a kernel whose PID 1 is killed comes back in its own
// container with its own allocation until its limit, a back-off survives an
// agent SIGKILL, and a stop sends the kernel's own signal after its pre_stop
// command.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "integration/harness.h"
#include "testing/eventually.h"

namespace slotd::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// Polls GET /v1/kernels/{id} until `done` holds, up to `limit`; returns the last record.
json PollKernelUntil(const AgentProcess& agent, const std::string& id, const std::function<bool(const json&)>& done,
                     milliseconds limit = std::chrono::seconds(20)) {
  const auto until = std::chrono::steady_clock::now() + ScaledLimit(limit);
  json k;
  while (std::chrono::steady_clock::now() < until) {
    k = agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200);
    if (done(k)) return k;
    std::this_thread::sleep_for(milliseconds(50));
  }
  ADD_FAILURE() << "kernel " << id << " did not get there in time: " << k.dump();
  return k;
}

// What kernel `kernel_id` of `agent` wrote to /home/work/log (its scratch on the host).
std::string ScratchLog(const AgentProcess& agent, const std::string& kernel_id) {
  std::ifstream log(agent.dir() + "/var/scratch/" + kernel_id + "/log");
  std::stringstream text;
  text << log.rdbuf();
  return text.str();
}

// Kills the host process that is PID 1 of the kernel's container with SIGKILL,
// as a crash (or the kernel OOM killer) would.
void KillPidOne(const json& kernel) {
  Result<ContainerInfo> info = Engine().Inspect(kernel["container_id"].get<std::string>());
  ASSERT_TRUE(info.ok()) << info.status().message();
  ASSERT_GT(info->pid, 0) << kernel.dump();
  ASSERT_EQ(::kill(info->pid, SIGKILL), 0);
}

// A kernel on one core with container port 8080 that sleeps, restarted as `restart` says.
json CrashingKernel(const std::string& id, json restart) {
  json request = SleepKernel(id);
  request["ports"] = {8080};
  request["restart"] = std::move(restart);
  return request;
}

TEST(Restart, AKernelWhosePidOneIsKilledComesBackWithItsAllocationUntilItsLimit) {
  AgentProcess agent(TwoCoreAgent("crash"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const json created = agent.CreateKernel(
      CrashingKernel("crash", {{"policy", "on-failure"}, {"max", 2}, {"backoff", {{"initial", "1s"}}}}));

  for (int restart = 1; restart <= 2; ++restart) {
    KillPidOne(agent.CallJson("GET", "/v1/kernels/crash", nullptr, 200));
    const json waiting = PollKernelUntil(agent, "crash", [](const json& k) { return k["state"] == "BACKOFF"; });
    EXPECT_EQ(waiting["exit_code"], 137) << waiting.dump();
    EXPECT_EQ(waiting["reason"], "exited with code 137");
    EXPECT_TRUE(waiting["next_restart_at_ms"].is_number()) << waiting.dump();
    // While it waits its core and port are its own: no one else gets them.
    EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu"]["used"], 1);
    const json back = PollKernelUntil(agent, "crash", [&](const json& k) {
      return k["state"] == "RUNNING" && k["restarts"] == restart;
    });
    EXPECT_EQ(back["container_id"], created["container_id"]);
    EXPECT_EQ(back["allocations"], created["allocations"]);
    EXPECT_EQ(back["ports"], created["ports"]);
    Result<ContainerInfo> info = Engine().Inspect(created["container_id"].get<std::string>());
    ASSERT_TRUE(info.ok());
    EXPECT_TRUE(info->running);
    EXPECT_EQ(info->name.rfind("slotd.r" + std::to_string(restart) + "-", 0), 0u) << info->name;
  }
  EXPECT_NE(agent.Call("GET", "/metrics").body.find("slotd_kernel_restarts_total{agent_id=\"" +
                                                    agent.options().id + "\",kernel_id=\"crash\"} 2"),
            std::string::npos);

  KillPidOne(agent.CallJson("GET", "/v1/kernels/crash", nullptr, 200));
  const json ended = PollKernelUntil(agent, "crash", [](const json& k) { return k["state"] == "TERMINATED"; });
  EXPECT_EQ(ended["reason"], "restart limit reached");
  EXPECT_EQ(ended["exit_code"], 137);
  EXPECT_EQ(ended["restarts"], 2);
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu"]["used"], 0);
}

TEST(Restart, AnAgentKilledDuringABackoffKeepsTheCountAndTheWaitAndRestartsItOnce) {
  AgentProcess agent(TwoCoreAgent("backoff"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(CrashingKernel("job", {{"policy", "always"}, {"backoff", {{"initial", "1s"}, {"max", "4s"}}}}));
  KillPidOne(agent.CallJson("GET", "/v1/kernels/job", nullptr, 200));
  PollKernelUntil(agent, "job", [](const json& k) { return k["restarts"] == 1 && k["state"] == "RUNNING"; });
  KillPidOne(agent.CallJson("GET", "/v1/kernels/job", nullptr, 200));
  const json waiting = PollKernelUntil(agent, "job", [](const json& k) { return k["state"] == "BACKOFF"; });
  ASSERT_EQ(waiting["restarts"], 1);

  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const json adopted = agent.CallJson("GET", "/v1/kernels/job", nullptr, 200);
  if (adopted["state"] == "BACKOFF") {  // the two-second wait may be over already
    EXPECT_EQ(adopted["restarts"], 1);
    EXPECT_EQ(adopted["next_restart_at_ms"], waiting["next_restart_at_ms"]);
    EXPECT_EQ(adopted["exit_code"], 137);
  }
  const json back = PollKernelUntil(agent, "job", [](const json& k) { return k["state"] == "RUNNING"; });
  EXPECT_EQ(back["restarts"], 2) << agent.log();
  // Started once: it stays at two restarts while it runs.
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/job", nullptr, 200)["restarts"], 2);
  agent.CallJson("DELETE", "/v1/kernels/job", nullptr, 200);
}

TEST(Restart, ADeleteDuringABackoffWinsAndACleanExitUnderOnFailureIsKept) {
  AgentProcess agent(TwoCoreAgent("wins"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(CrashingKernel("waiting", {{"policy", "always"}, {"backoff", {{"initial", "1h"}}}}));
  KillPidOne(agent.CallJson("GET", "/v1/kernels/waiting", nullptr, 200));
  PollKernelUntil(agent, "waiting", [](const json& k) { return k["state"] == "BACKOFF"; });
  const json deleted = agent.CallJson("DELETE", "/v1/kernels/waiting", nullptr, 200);
  EXPECT_EQ(deleted["state"], "TERMINATED");
  EXPECT_EQ(agent.Call("GET", "/v1/kernels/waiting").status, 404);

  json done = SleepKernel("done");
  done["command"] = {"sh", "-c", "sleep 1; exit 0"};
  done["restart"] = {{"policy", "on-failure"}};
  agent.CreateKernel(done);
  const json ended = PollKernelUntil(agent, "done", [](const json& k) { return k["state"] == "TERMINATED"; });
  EXPECT_EQ(ended["reason"], "exited with code 0");
  EXPECT_EQ(ended["restarts"], 0);
}

TEST(StopContract, AStopRunsThePreStopCommandThenSendsTheKernelsOwnSignal) {
  AgentOptions options = TwoCoreAgent("contract");
  options.stop_timeout = "10s";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json request = SleepKernel("saver");
  // The shell is not PID 1 (the engine's init is), so it gets the signal the init passes on.
  request["command"] = {"sh", "-c",
                        "trap 'echo usr1 >> /home/work/log; exit 0' USR1; "
                        "echo started >> /home/work/log; while :; do sleep 0.1; done"};
  request["stop_signal"] = "SIGUSR1";
  request["stop_timeout"] = "5s";
  request["pre_stop"] = {"sh", "-c", "echo pre-stop >> /home/work/log"};
  request["max_lifetime"] = "2s";
  agent.CreateKernel(request);
  const json ended = PollKernelUntil(agent, "saver", [](const json& k) { return k["state"] == "TERMINATED"; });
  EXPECT_EQ(ended["reason"], "lifetime exceeded");
  EXPECT_EQ(ended["exit_code"], 0) << "SIGUSR1 was trapped, so no SIGKILL was needed";
  EXPECT_EQ(ScratchLog(agent, "saver"), "started\npre-stop\nusr1\n");
  agent.CallJson("DELETE", "/v1/kernels/saver", nullptr, 200);

  json too_long = SleepKernel("patient");
  too_long["stop_timeout"] = "2h";
  HttpResponse refused = agent.Call("POST", "/v1/kernels", too_long.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("stop_timeout: must be at most 1h"), std::string::npos) << refused.body;
}

// The host's processes whose command line holds `mark` (its arguments joined by spaces).
std::vector<pid_t> ProcessesMarked(const std::string& mark) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(mark) != std::string::npos) found.push_back(static_cast<pid_t>(std::stoi(name)));
  }
  return found;
}

TEST(StopContract, AHungPreStopCommandIsBoundedByTheStopTimeout) {
  AgentOptions options = TwoCoreAgent("hung-hook");
  options.stop_timeout = "1h";  // the agent's cap is far: only the kernel's own stop_timeout bounds its stop
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  // A kernel that ignores SIGTERM, with a stop hook that never ends.
  const std::string mark = "hook-" + RunTag();
  json request = SleepKernel("hooked");
  request["command"] = {"sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"};
  request["stop_timeout"] = "1s";
  request["pre_stop"] = {"sh", "-c", "trap '' TERM; sleep 600; : " + mark};
  const json created = agent.CreateKernel(request);
  const std::string container_id = created["container_id"].get<std::string>();

  auto deleted = std::async(std::launch::async, [&] { return agent.Call("DELETE", "/v1/kernels/hooked"); });
  // A bound of waiting, far above the stop timeout and far below the hook's 600 s.
  ASSERT_EQ(deleted.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "the delete waits on its pre_stop command";
  const HttpResponse answer = deleted.get();
  EXPECT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(agent.Call("GET", "/v1/kernels/hooked").status, 404);
  EXPECT_EQ(Engine().Inspect(container_id).status().code(), Status::Code::kNotFound);
  EXPECT_EQ(ProcessesMarked(mark), std::vector<pid_t>{}) << "the pre_stop command outlived its kernel";
}

TEST(StopContract, AKernelIsWarnedOnceBeforeItsLifetimeEnds) {
  AgentProcess agent(TwoCoreAgent("warned"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json request = SleepKernel("job");
  request["command"] = {"sh", "-c",
                        "trap 'echo usr1 >> /home/work/log' USR1; trap 'echo term >> /home/work/log; exit 0' TERM; "
                        "echo started >> /home/work/log; while :; do sleep 0.1; done"};
  request["max_lifetime"] = "4s";
  request["warn_before"] = {{"signal", "SIGUSR1"}, {"before", "2s"}};
  agent.CreateKernel(request);
  const json warned = PollKernelUntil(agent, "job", [](const json& k) { return k["warned"] == true; });
  EXPECT_EQ(warned["state"], "RUNNING");
  const json ended = PollKernelUntil(agent, "job", [](const json& k) { return k["state"] == "TERMINATED"; });
  EXPECT_EQ(ended["reason"], "lifetime exceeded");
  EXPECT_EQ(ScratchLog(agent, "job"), "started\nusr1\nterm\n");
  agent.CallJson("DELETE", "/v1/kernels/job", nullptr, 200);
}

TEST(StopContract, ADrainWithADeadlineWarnsTheKernelThatAskedAndStopsThoseLeftAtItEvenAcrossAnAgentKill) {
  AgentProcess agent(TwoCoreAgent("deadline"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json stubborn = SleepKernel("stubborn");  // ignores SIGTERM: only the deadline's stop ends it
  stubborn["command"] = {"sh", "-c",
                         "trap 'echo term >> /home/work/log' TERM; while :; do sleep 0.1; done"};
  agent.CreateKernel(stubborn);
  json saver = SleepKernel("saver");
  saver["command"] = {"sh", "-c", "trap 'echo usr1 >> /home/work/log' USR1; while :; do sleep 0.1; done"};
  saver["warn_before"] = {{"signal", "SIGUSR1"}, {"before", "10m"}};  // longer than the drain: warned at once
  agent.CreateKernel(saver);

  const json drained = agent.CallJson("POST", "/v1/agent/drain", {{"deadline", "5s"}}, 200);
  ASSERT_TRUE(drained["drain_deadline"].is_number()) << drained.dump();
  PollKernelUntil(agent, "saver", [](const json& k) { return k["warned"] == true; });

  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const json after = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(after["draining"], true);
  EXPECT_EQ(after["drain_deadline"], drained["drain_deadline"]);

  for (const char* id : {"stubborn", "saver"}) {
    const json ended = PollKernelUntil(agent, id, [](const json& k) { return k["state"] == "TERMINATED"; });
    EXPECT_EQ(ended["reason"], "drained") << id;
  }
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels/stubborn", nullptr, 200)["warned"], false);
  EXPECT_EQ(ScratchLog(agent, "stubborn"), "term\n") << "one SIGTERM: the deadline's stop, none before it";
  EXPECT_EQ(ScratchLog(agent, "saver"), "usr1\n");
  agent.CallJson("POST", "/v1/agent/undrain", nullptr, 200);
}

TEST(Idle, AnIdleKernelIsReclaimedWhileABusyOneIsKept) {
  AgentProcess agent(TwoCoreAgent("idle", "stats-interval = \"250ms\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Long enough for a poll to see the idle kernel still running, on a slow host too.
  const std::string window = std::to_string(ScaledLimit(std::chrono::seconds(2)).count() / 1000) + "s";
  json sleeper = SleepKernel("sleeper");
  sleeper["idle"] = {{"for", window}, {"cpu_below", 0.05}};
  agent.CreateKernel(sleeper);
  json worker = SleepKernel("worker");
  worker["command"] = {"sh", "-c", "while :; do :; done"};
  worker["idle"] = {{"for", window}, {"cpu_below", 0.05}};
  agent.CreateKernel(worker);

  const json idle = PollKernelUntil(agent, "sleeper", [](const json& k) { return k["idle_since_ms"].is_number(); });
  EXPECT_EQ(idle["state"], "RUNNING");
  const json ended = PollKernelUntil(agent, "sleeper", [](const json& k) { return k["state"] == "TERMINATED"; });
  EXPECT_EQ(ended["reason"], "idle");
  const json kept = agent.CallJson("GET", "/v1/kernels/worker", nullptr, 200);
  EXPECT_EQ(kept["state"], "RUNNING");
  EXPECT_TRUE(kept["idle_since_ms"].is_null()) << kept.dump();
  agent.CallJson("DELETE", "/v1/kernels/worker", nullptr, 200);
}

}  // namespace
}  // namespace slotd::testing

namespace slotd::testing {
namespace {

// A kernel serving /home/work/www with busybox httpd on container port 8080
// (its own loopback: the test agents' network is "none"), checked over HTTP.
json ServingKernel(const std::string& id, json health) {
  json request = SleepKernel(id);
  request["ports"] = {8080};
  request["command"] = {"sh", "-c",
                        "mkdir -p /home/work/www && echo ok > /home/work/www/healthz && "
                        "exec httpd -f -p 8080 -h /home/work/www"};
  request["health"] = std::move(health);
  return request;
}

TEST(HealthCheck, AnHttpCheckMakesAKernelReadyThenUnhealthyAndItsStopEndsIt) {
  AgentProcess agent(TwoCoreAgent("http-check"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(ServingKernel("web", {{"http", {{"port", 8080}, {"path", "/healthz"}}},
                                           {"interval", "1s"},
                                           {"failures", 2},
                                           {"on_unhealthy", "stop"}}));
  const json ready = PollKernelUntil(agent, "web", [](const json& k) { return k["ready"] == true; });
  EXPECT_EQ(ready["health"]["status"], "healthy") << ready.dump();
  const std::string metrics = agent.Call("GET", "/metrics").body;
  EXPECT_NE(metrics.find("slotd_kernel_health_checks_total{agent_id=\"" + agent.options().id + "\",kernel_id=\"web\"}"),
            std::string::npos)
      << metrics;

  RunIn(agent, "web", "rm /home/work/www/healthz");
  const json ended = PollKernelUntil(agent, "web", [](const json& k) { return k["state"] == "TERMINATED"; });
  EXPECT_EQ(ended["reason"], "unhealthy");
  EXPECT_EQ(ended["ready"], false);
  EXPECT_NE(ended.dump().find("GET /healthz: HTTP 404"), std::string::npos) << ended.dump();
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu"]["used"], 0);
}

TEST(HealthCheck, AnUnhealthyExecCheckRestartsTheKernelThroughItsRestartPolicy) {
  AgentProcess agent(TwoCoreAgent("exec-check"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json request = SleepKernel("worker");
  request["command"] = {"sh", "-c", "touch /tmp/alive; sleep 3600"};
  request["health"] = {{"exec", {"test", "-f", "/tmp/alive"}},
                       {"interval", "1s"},
                       {"failures", 1},
                       {"on_unhealthy", "restart"}};
  request["restart"] = {{"policy", "on-failure"}, {"backoff", {{"initial", "1s"}}}};
  agent.CreateKernel(request);
  PollKernelUntil(agent, "worker", [](const json& k) { return k["ready"] == true; });

  RunIn(agent, "worker", "rm /tmp/alive");
  const json waiting = PollKernelUntil(agent, "worker", [](const json& k) { return k["state"] == "BACKOFF"; });
  EXPECT_EQ(waiting["reason"], "unhealthy") << waiting.dump();
  // The restart runs the command again, which makes the check pass. On a slow
  // host a probe can come before the new command's `touch`: one more restart.
  const json back = PollKernelUntil(agent, "worker", [](const json& k) {
    return k["state"] == "RUNNING" && k["restarts"].get<int>() >= 1 && k["ready"] == true;
  });
  EXPECT_EQ(back["health"]["status"], "healthy");
  agent.CallJson("DELETE", "/v1/kernels/worker", nullptr, 200);
}

}  // namespace
}  // namespace slotd::testing
