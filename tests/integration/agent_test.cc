// The agent end to end: real slotd processes, real containers.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "model/kernel.h"
#include "common/units.h"
#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

AgentOptions CoresAgent(const std::string& name, const std::string& cores = "0-1") {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = cores;
  return o;
}

json SleepOnCores(const std::string& id, int cpu = 1, const std::string& mem = "64m") {
  return {{"kernel_id", id},
          {"image", kTestImage},
          {"command", {"sleep", "3600"}},
          {"resources", {{"cpu", cpu}, {"mem", mem}}}};
}

TEST(Agent, KernelContainerCarriesLabelsCpusetAndMemoryLimit) {
  AgentProcess agent(CoresAgent("labels"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel(SleepOnCores("k1", 2, "96m"));
  EXPECT_EQ(k["state"], "RUNNING");
  EXPECT_EQ(k["allocations"]["cpu"], json({0, 1}));

  auto info = Engine().Inspect(k["container_id"].get<std::string>());
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->name, ContainerName(agent.options().id, "k1"));
  EXPECT_EQ(info->labels.at("ai.backend.owner"), agent.options().id);
  EXPECT_EQ(info->labels.at("ai.backend.agent-id"), agent.options().id);
  EXPECT_EQ(info->labels.at("ai.backend.kernel-id"), "k1");
  EXPECT_EQ(info->labels.at("ai.backend.session-id"), "k1");
  EXPECT_EQ(json::parse(info->labels.at("ai.backend.allocations")), k["allocations"]);
  EXPECT_EQ(info->cpuset_cpus, "0-1");
  EXPECT_EQ(info->memory_bytes, 96ll << 20);
  EXPECT_EQ(info->pids_limit, 4096);  // [container] pids-limit's default
  CommandResult log = RunCommand({"docker", "inspect", "-f",
                                  "{{.HostConfig.LogConfig.Type}} {{index .HostConfig.LogConfig.Config \"max-size\"}}",
                                  k["container_id"].get<std::string>()});
  // [container] log-max-size's default, 50m. Podman keeps it (conmon's
  // --log-size-max) but its inspect does not show it.
  EXPECT_EQ(log.out, EngineIsPodman() ? "json-file \n" : "json-file 52428800\n") << log.err;

  json out = agent.CallJson("POST", "/v1/kernels/k1/exec",
                            {{"command", {"sh", "-c", "grep Cpus_allowed_list /proc/self/status; env"}}}, 200);
  std::string stdout_text = out["stdout"];
  EXPECT_NE(stdout_text.find("Cpus_allowed_list:\t0-1\n"), std::string::npos) << stdout_text;
  EXPECT_NE(stdout_text.find("SLOTD_KERNEL_ID=k1"), std::string::npos) << stdout_text;
  EXPECT_NE(stdout_text.find("SLOTD_AGENT_ID=" + agent.options().id), std::string::npos) << stdout_text;
}

TEST(Agent, ExecReturnsStdoutStderrAndExitCodeAndLogsReturnOutput) {
  AgentProcess agent(CoresAgent("exec"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel({{"kernel_id", "talker"},
                      {"image", kTestImage},
                      {"command", {"sh", "-c", "echo hello-out; echo hello-err >&2; sleep 3600"}}});
  json out = agent.CallJson("POST", "/v1/kernels/talker/exec",
                            {{"command", {"sh", "-c", "echo to-out; echo to-err >&2; exit 7"}}}, 200);
  EXPECT_EQ(out["stdout"], "to-out\n");
  EXPECT_EQ(out["stderr"], "to-err\n");
  EXPECT_EQ(out["exit_code"], 7);

  std::string logs;
  for (int i = 0; i < 100 && logs.find("hello-err") == std::string::npos; ++i) {
    logs = agent.Call("GET", "/v1/kernels/talker/logs").body;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_NE(logs.find("hello-out"), std::string::npos) << logs;
  EXPECT_NE(logs.find("hello-err"), std::string::npos) << logs;

  // The same through slotctl.
  CommandResult r = Slotctl({"--socket", agent.socket_path(), "exec", "talker", "--", "sh", "-c", "echo hi; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "hi\n");
  r = Slotctl({"--socket", agent.socket_path(), "logs", "talker"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("hello-out"), std::string::npos);
}

TEST(Agent, BadRequestsAreRefusedWithTheirReasonAndLeaveNothingAllocated) {
  AgentProcess agent(CoresAgent("errors"));
  ASSERT_TRUE(agent.Start()) << agent.log();

  HttpResponse res = agent.Call("POST", "/v1/kernels", "{not json");
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("malformed JSON"), std::string::npos) << res.body;

  res = agent.Call("POST", "/v1/kernels", SleepOnCores("bad", 1, "lots").dump());
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("resources.mem"), std::string::npos) << res.body;

  res = agent.Call("POST", "/v1/kernels", json{{"command", {"true"}}}.dump());
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("image"), std::string::npos) << res.body;

  json with_device_env = SleepOnCores("bad2");
  with_device_env["env"] = {{"CUDA_VISIBLE_DEVICES", "all"}};
  res = agent.Call("POST", "/v1/kernels", with_device_env.dump());
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("env.CUDA_VISIBLE_DEVICES"), std::string::npos) << res.body;

  json reserved_label = SleepOnCores("bad3");
  reserved_label["labels"] = {{"ai.backend.owner", "someone"}};
  res = agent.Call("POST", "/v1/kernels", reserved_label.dump());
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("labels.ai.backend.owner"), std::string::npos) << res.body;

  res = agent.Call("POST", "/v1/kernels", SleepOnCores("big", 3).dump());
  EXPECT_EQ(res.status, 422);
  EXPECT_NE(res.body.find("insufficient cpu: requested 3, free 2 of 2"), std::string::npos) << res.body;

  json unknown_image = SleepOnCores("ghost");
  unknown_image["image"] = "slotd-test/does-not-exist:" + RunTag();
  res = agent.Call("POST", "/v1/kernels", unknown_image.dump());
  EXPECT_EQ(res.status, 400);
  EXPECT_NE(res.body.find("slotd-test/does-not-exist"), std::string::npos) << res.body;
  EXPECT_NE(res.body.find("not found"), std::string::npos) << res.body;

  json info = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(info["resources"]["cpu"]["used"], 0) << info.dump();
  EXPECT_EQ(info["resources"]["mem"]["used"], 0) << info.dump();
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);
  auto leftovers = Engine().List({"ai.backend.owner=" + agent.options().id});
  ASSERT_TRUE(leftovers.ok());
  EXPECT_TRUE(leftovers->empty());

  EXPECT_EQ(agent.Call("GET", "/v1/kernels/nope").status, 404);
  EXPECT_EQ(agent.Call("DELETE", "/v1/kernels/nope").status, 404);
}

TEST(Agent, CreateIsIdempotentByKernelId) {
  AgentProcess agent(CoresAgent("idem"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json first = agent.CreateKernel(SleepOnCores("same"));
  json again = agent.CallJson("POST", "/v1/kernels", SleepOnCores("same"), 200);
  EXPECT_EQ(again["container_id"], first["container_id"]);
  json different = SleepOnCores("same");
  different["command"] = {"sleep", "7"};
  HttpResponse res = agent.Call("POST", "/v1/kernels", different.dump());
  EXPECT_EQ(res.status, 409);
  EXPECT_NE(res.body.find("different request"), std::string::npos) << res.body;

  // Still true after a restart: the request is recovered from the labels.
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("POST", "/v1/kernels", SleepOnCores("same"), 200)["container_id"], first["container_id"]);
  EXPECT_EQ(agent.Call("POST", "/v1/kernels", different.dump()).status, 409);

  json deleted = agent.CallJson("DELETE", "/v1/kernels/same", nullptr, 200);
  EXPECT_EQ(deleted["state"], "TERMINATED");
  EXPECT_EQ(agent.Call("DELETE", "/v1/kernels/same").status, 404);
}

TEST(Agent, TokenIsRequiredOnTcpButNotForHealth) {
  AgentOptions o = CoresAgent("token");
  o.token = "s3cret-" + RunTag();
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.Call("GET", "/health", "", /*tcp=*/true).status, 200);
  HttpResponse res = agent.Call("GET", "/v1/kernels", "", /*tcp=*/true);
  EXPECT_EQ(res.status, 401);
  EXPECT_NE(res.body.find("no credential: send"), std::string::npos) << res.body;
  EXPECT_EQ(agent.Call("GET", "/v1/kernels", "", /*tcp=*/true, "wrong").status, 401);
  EXPECT_EQ(agent.Call("GET", "/v1/kernels", "", /*tcp=*/true, o.token).status, 200);
  // The unix socket is guarded by its mode (0600), not by the token.
  EXPECT_EQ(agent.Call("GET", "/v1/kernels").status, 200);
  EXPECT_EQ(std::filesystem::status(agent.socket_path()).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  // slotctl --config finds the socket and the token itself.
  CommandResult r = Slotctl({"--agent", "http://127.0.0.1:" + std::to_string(agent.port()), "kernels"});
  EXPECT_EQ(r.exit_code, 7);  // refused: docs/cli.md "Exit status"
  EXPECT_NE(r.err.find("HTTP 401"), std::string::npos) << r.err;
  r = Slotctl({"--agent", "http://127.0.0.1:" + std::to_string(agent.port()), "--token-file",
               agent.dir() + "/token", "kernels"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(Agent, WithoutATokenFileTheAgentMakesItsOwnTokenAndTcpNeedsIt) {
  AgentOptions o = CoresAgent("own-token");
  o.rpc_port = FreeLoopbackPort();  // in the config, for slotctl --config to find
  AgentProcess agent(o);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const std::string path = agent.dir() + "/var/api.token";
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0) << agent.log();
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_NE(agent.log().find("requests on TCP need the token in " + path), std::string::npos) << agent.log();
  const std::string token = agent.GeneratedToken();
  EXPECT_GE(token.size(), 32u);

  EXPECT_EQ(agent.Call("GET", "/health", "", /*tcp=*/true).status, 200);
  const HttpClient anonymous = HttpClient::Tcp("http://127.0.0.1:" + std::to_string(agent.port()));
  auto refused = anonymous.Request("POST", "/v1/agent/drain", "", std::chrono::seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_EQ(refused->status, 401) << refused->body;
  EXPECT_EQ(agent.Call("GET", "/v1/kernels", "", /*tcp=*/true, token).status, 200);

  // The same token after a restart; slotctl --config finds it when only TCP is left.
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.GeneratedToken(), token);
  ASSERT_EQ(::unlink(agent.socket_path().c_str()), 0);
  CommandResult r = Slotctl({"--config", agent.config_path(), "kernels"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(Agent, SigkillAndRestartKeepsKernelsAndAllocations) {
  AgentProcess agent(CoresAgent("restore", "0-1"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(SleepOnCores("a"));
  agent.CreateKernel(SleepOnCores("b", 1, "128m"));
  json before = agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"];

  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json after = agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"];
  ASSERT_EQ(after.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(after[i]["kernel_id"], before[i]["kernel_id"]);
    EXPECT_EQ(after[i]["container_id"], before[i]["container_id"]);
    EXPECT_EQ(after[i]["allocations"], before[i]["allocations"]);
    EXPECT_EQ(after[i]["state"], "RUNNING");
  }
  json info = agent.CallJson("GET", "/v1/agent", nullptr, 200);
  EXPECT_EQ(info["resources"]["cpu"]["used"], 2);
  EXPECT_EQ(info["resources"]["mem"]["used"], (64 + 128) << 20);

  // Nothing is free until b goes; then exactly b's core is.
  HttpResponse res = agent.Call("POST", "/v1/kernels", SleepOnCores("c").dump());
  EXPECT_EQ(res.status, 422);
  EXPECT_NE(res.body.find("free 0 of 2"), std::string::npos) << res.body;
  agent.CallJson("DELETE", "/v1/kernels/b", nullptr, 200);
  json c = agent.CreateKernel(SleepOnCores("c"));
  EXPECT_EQ(c["allocations"]["cpu"], before[1]["allocations"]["cpu"]);
}

TEST(Agent, WhenAKernelEndedIsTheEnginesAndSurvivesASigkillOfTheAgent) {
  AgentProcess agent(CoresAgent("ended", "0"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json running = agent.CreateKernel(SleepOnCores("ends"));
  EXPECT_TRUE(running["terminated_at"].is_null()) << running.dump();
  ASSERT_TRUE(Engine().Kill(running["container_id"].get<std::string>()).ok());
  json ended = agent.WaitForState("ends", "TERMINATED");
  ASSERT_TRUE(ended["terminated_at"].is_number_integer()) << ended.dump();
  Result<ContainerInfo> info = Engine().Inspect(running["container_id"].get<std::string>());
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(ended["terminated_at"], info->finished_ms / 1000) << "the engine's FinishedAt " << info->finished_at;
  EXPECT_GE(ended["terminated_at"].get<int64_t>(), ended["created_at"].get<int64_t>());

  // Rebuilt from the container after a SIGKILL: the same end.
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json adopted = agent.CallJson("GET", "/v1/kernels/ends", nullptr, 200);
  EXPECT_EQ(adopted["state"], "TERMINATED");
  EXPECT_EQ(adopted["terminated_at"], ended["terminated_at"]);
}

TEST(Agent, AContainerKilledBehindItsBackIsTerminatedAndItsCoresFreed) {
  AgentProcess agent(CoresAgent("death", "0"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel(SleepOnCores("victim"));
  ASSERT_TRUE(Engine().Kill(k["container_id"].get<std::string>()).ok());
  json dead = agent.WaitForState("victim", "TERMINATED");
  EXPECT_EQ(dead["exit_code"], 137);
  // Its only core is free for the next kernel.
  agent.CreateKernel(SleepOnCores("next"));

  // A container removed behind the agent's back is reported and forgotten.
  json next = agent.CallJson("GET", "/v1/kernels/next", nullptr, 200);
  ASSERT_TRUE(Engine().Remove(next["container_id"].get<std::string>(), true).ok());
  for (int i = 0; i < 500 && agent.Call("GET", "/v1/kernels/next").status != 404; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(agent.Call("GET", "/v1/kernels/next").status, 404) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu"]["used"], 0);
}

TEST(Agent, ForeignContainersAreNeverListedTouchedOrFreed) {
  AgentOptions o = CoresAgent("foreign", "0");
  AgentProcess agent(o);
  // A running container of another owner, named like one of ours. (Were its
  // label to claim one of the agent's cores, the agent would refuse to start.)
  ContainerSpec spec;
  spec.name = "slotd-" + o.id + "-intruder";
  spec.image = kTestImage;
  spec.command = {"sleep", "3600"};
  spec.labels = {{"ai.backend.owner", "someone-else-" + RunTag()},
                 {"ai.backend.kernel-id", "intruder"},
                 {"ai.backend.allocations", R"({"cpu":[1],"mem":1048576})"}};
  auto id = Engine().Create(spec);
  ASSERT_TRUE(id.ok()) << id.status().message();
  struct Cleanup {
    std::string id;
    ~Cleanup() { (void)Engine().Remove(id, true); }
  } cleanup{*id};
  ASSERT_TRUE(Engine().Start(*id).ok());

  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);
  EXPECT_EQ(agent.Call("GET", "/v1/kernels/intruder").status, 404);
  EXPECT_EQ(agent.Call("DELETE", "/v1/kernels/intruder").status, 404);
  agent.CreateKernel(SleepOnCores("mine"));
  // Its death is not ours to notice.
  ASSERT_TRUE(Engine().Kill(*id).ok());
  ASSERT_TRUE(Engine().Start(*id).ok());
  agent.Kill(SIGKILL);
  ASSERT_TRUE(agent.Start()) << agent.log();
  json kernels = agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"];
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels[0]["kernel_id"], "mine");
  auto info = Engine().Inspect(*id);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->running);
  EXPECT_EQ(info->labels.at("ai.backend.owner"), "someone-else-" + RunTag());
  EXPECT_EQ(agent.log().find("intruder"), std::string::npos) << agent.log();
}

TEST(Agent, SecondAgentOnTheSameIpcPathRefusesNamingTheHolder) {
  AgentProcess first(CoresAgent("lock"));
  ASSERT_TRUE(first.Start()) << first.log();
  // The same config again: the same ipc-base-path.
  CommandResult r = RunCommand({std::string(SLOTD_BIN_DIR) + "/slotd", "--config", first.config_path()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("pid " + std::to_string(first.pid())), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ipc-base-path"), std::string::npos) << r.err;
}

TEST(Agent, InvalidConfigStopsTheStartWithFileLineAndKey) {
  TempDir dir;
  std::string path = dir.path() + "/agent.toml";
  WriteFile(path, "[agent]\nid = \"x\"\n[container]\nport-range = [31000, 30000]\n");
  CommandResult r = RunCommand({std::string(SLOTD_BIN_DIR) + "/slotd", "--config", path});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path + ":4: container.port-range: start 31000 is above end 30000"), std::string::npos) << r.err;
}

TEST(Agent, SlotctlRunsListsAndRemovesKernels) {
  AgentProcess agent(CoresAgent("ctl"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  CommandResult r = Slotctl({"--config", agent.config_path(), "--json", "run", "--id", "c1", "--cpu", "1", "--mem",
                             "32m", "--env", "GREETING=hi", "--port", "8080", kTestImage, "--", "sleep", "3600"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json k = json::parse(r.out);
  EXPECT_EQ(k["state"], "RUNNING");
  EXPECT_EQ(k["allocations"]["mem"], 32 << 20);
  EXPECT_EQ(k["ports"][0]["container"], 8080);
  EXPECT_EQ(k["ports"][0]["host"], agent.options().port_first);

  r = Slotctl({"--config", agent.config_path(), "exec", "c1", "--", "sh", "-c", "echo $GREETING"});
  EXPECT_EQ(r.out, "hi\n");
  r = Slotctl({"--config", agent.config_path(), "kernels"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("c1"), std::string::npos);
  EXPECT_NE(r.out.find("RUNNING"), std::string::npos);
  r = Slotctl({"--config", agent.config_path(), "--json", "info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["resources"]["cpu"]["used"], 1);
  // The engine is named as it names itself.
  auto identity = Engine().Identify();
  ASSERT_TRUE(identity.ok()) << identity.status().message();
  EXPECT_EQ(json::parse(r.out)["engine"]["name"], identity->name);
  r = Slotctl({"--config", agent.config_path(), "info"});
  EXPECT_NE(r.out.find("engine " + identity->name + " " + identity->version + " (API " + identity->api_version +
                       ") at " + DockerHost() + "\n"),
            std::string::npos)
      << r.out;
  r = Slotctl({"--config", agent.config_path(), "run", "--cpu", "5", kTestImage, "--", "true"});
  EXPECT_EQ(r.exit_code, 6);  // no room
  EXPECT_NE(r.err.find("insufficient cpu: requested 5, free 1 of 2 (HTTP 422)"), std::string::npos) << r.err;
  r = Slotctl({"--config", agent.config_path(), "rm", "c1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Slotctl({"--config", agent.config_path(), "--json", "kernels"});
  EXPECT_EQ(json::parse(r.out).size(), 0u);
}

}  // namespace
}  // namespace slotd::testing

namespace slotd::testing {
namespace {

// Polls the kernel until `done` holds for its record, up to 10 s; the last record.
json WaitForKernel(const AgentProcess& agent, const std::string& id, const std::function<bool(const json&)>& done) {
  json k;
  for (int i = 0; i < 100; ++i) {
    k = agent.CallJson("GET", "/v1/kernels/" + id, nullptr, 200);
    if (done(k)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return k;
}

TEST(Agent, APauseOrAnUpdateBehindTheAgentsBackIsReportedAsTheKernelsCondition) {
  AgentProcess agent(CoresAgent("drift", "0-1"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json k = agent.CreateKernel(SleepOnCores("k1", 1, "64m"));
  const std::string container = k["container_id"];
  EXPECT_TRUE(k["condition"].is_null());

  ASSERT_EQ(RunCommand({"docker", "pause", container}).exit_code, 0);
  json paused = WaitForKernel(agent, "k1", [](const json& r) { return r["condition"].is_string(); });
  ASSERT_TRUE(paused["condition"].is_string()) << paused.dump();
  EXPECT_NE(paused["condition"].get<std::string>().find("paused outside slotd"), std::string::npos);
  const std::string metrics = agent.Call("GET", "/metrics").body;
  EXPECT_NE(metrics.find("slotd_kernels_with_condition{agent_id=\"" + agent.options().id + "\"} 1"),
            std::string::npos)
      << metrics;
  ASSERT_EQ(RunCommand({"docker", "unpause", container}).exit_code, 0);
  json clear = WaitForKernel(agent, "k1", [](const json& r) { return r["condition"].is_null(); });
  EXPECT_TRUE(clear["condition"].is_null()) << clear.dump();

  if (EngineIsPodman()) {
    // Podman's compatible API has no update (404). `podman update` moves the
    // kernel with no event, and its inspect keeps the old cpuset: the agent
    // sees it in the cgroup, at its next stats sweep. A service that
    // scripts/podman-start made has its storage and run roots in its
    // directory; the system's own (scripts/test --vm's guest) needs none.
    EXPECT_NE(RunCommand({"docker", "update", "--cpuset-cpus", "1", container}).exit_code, 0);
    const std::string host = DockerHost();
    const std::string dir = host.substr(std::string("unix://").size(), host.rfind('/') - std::string("unix://").size());
    const std::string run_root = ReadFile(dir + "/run-root");
    const CommandResult update =
        run_root.empty()
            ? RunCommand({"podman", "update", "--cpuset-cpus", "1", container})
            : RunCommand({"env", "CONTAINERS_CONF=" + dir + "/containers.conf", "podman", "--root", dir + "/storage",
                          "--runroot", run_root.substr(0, run_root.find('\n')), "update", "--cpuset-cpus", "1",
                          container});
    ASSERT_EQ(update.exit_code, 0) << update.out << update.err;
  } else {
    ASSERT_EQ(RunCommand({"docker", "update", "--cpuset-cpus", "1", container}).exit_code, 0);
  }
  json moved = WaitForKernel(agent, "k1", [](const json& r) { return r["condition"].is_string(); });
  ASSERT_TRUE(moved["condition"].is_string()) << moved.dump();
  EXPECT_NE(moved["condition"].get<std::string>().find("cpuset was changed outside slotd to \"1\" (allocated: 0)"),
            std::string::npos)
      << moved.dump();
  EXPECT_EQ(moved["state"], "RUNNING");
}

}  // namespace
}  // namespace slotd::testing
