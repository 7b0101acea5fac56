// Stats end to end: real agents measuring real containers through their
// cgroups (and the engine, with stats-type docker), the JSON routes, the
// Prometheus text checked by promtool, and GPU processes (from the fake NVML)
// attributed to their kernels or reported as foreign usage.
#include <unistd.h>

#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "common/units.h"
#include "integration/harness.h"
#include "testing/eventually.h"

namespace slotd::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;


// Options for an agent that sweeps every 200 ms.
AgentOptions StatsAgent(const std::string& name, const std::string& cores = "0") {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = cores;
  o.memory = "1g";
  o.container_toml = "stats-interval = \"200ms\"\n";
  return o;
}

json Kernel(const std::string& id, const std::vector<std::string>& command, const std::string& mem = "64m") {
  return {{"kernel_id", id}, {"image", kTestImage}, {"command", command}, {"resources", {{"cpu", 1}, {"mem", mem}}}};
}

// Polls `agent`'s GET `path` until `done(body)` holds, up to `limit`; returns
// the last body (the caller asserts on it).
json PollJson(const AgentProcess& agent, const std::string& path, const std::function<bool(const json&)>& done,
              milliseconds limit = seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + ScaledLimit(limit);
  json body;
  do {
    body = agent.CallJson("GET", path, nullptr, 200);
    if (done(body)) break;
    std::this_thread::sleep_for(milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline);
  return body;
}

// The ids of the kernels in a GET /v1/stats body.
std::set<std::string> KernelIds(const json& stats) {
  std::set<std::string> ids;
  for (const auto& k : stats["kernels"]) ids.insert(k["kernel_id"].get<std::string>());
  return ids;
}

// GET /metrics as text.
std::string Metrics(const AgentProcess& agent) {
  HttpResponse res = agent.Call("GET", "/metrics");
  EXPECT_EQ(res.status, 200) << res.body;
  return res.body;
}

// The lines of `text` that contain `part`.
std::string LinesWith(const std::string& text, const std::string& part) {
  std::istringstream in(text);
  std::string found;
  for (std::string line; std::getline(in, line);)
    if (line.find(part) != std::string::npos) found += line + "\n";
  return found;
}

// Polls a kernel's stats until it is measured with a cpu percent.
json MeasuredKernel(const AgentProcess& agent, const std::string& id) {
  return PollJson(agent, "/v1/kernels/" + id + "/stats",
                  [](const json& b) { return b.value("measured", false) && !b["cpu"]["percent"].is_null(); });
}

TEST(Stats, ASpinningKernelUsesAboutOneCore) {
  AgentProcess agent(StatsAgent("spin"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(Kernel("spin", {"sh", "-c", "while :; do :; done"}));
  json k = MeasuredKernel(agent, "spin");
  ASSERT_TRUE(k.value("measured", false)) << k.dump();
  // Let it run a few sweeps; the percent is over the last interval only.
  std::this_thread::sleep_for(milliseconds(1000));
  k = agent.CallJson("GET", "/v1/kernels/spin/stats", nullptr, 200);
  EXPECT_EQ(k["state"], "RUNNING");
  const double percent = k["cpu"]["percent"].get<double>();
  // Loose bounds: other processes of a busy machine may share its core.
  EXPECT_GT(percent, 40.0) << k.dump();
  EXPECT_LT(percent, 130.0) << k.dump();
  EXPECT_GT(k["cpu"]["usage_ns"].get<uint64_t>(), 100'000'000u) << k.dump();
  EXPECT_GE(k["pids"].get<int>(), 1);

  json all = agent.CallJson("GET", "/v1/stats", nullptr, 200);
  EXPECT_EQ(all["agent_id"], agent.options().id);
  EXPECT_EQ(all["stats_type"], "cgroup");
  ASSERT_EQ(all["agent"]["cores"].size(), 1u);
  EXPECT_EQ(all["agent"]["cores"][0]["core"], 0);
  // The agent's one core runs the spinning kernel.
  EXPECT_GT(all["agent"]["cores"][0]["utilization_percent"].get<double>(), 50.0) << all.dump();
  EXPECT_EQ(all["agent"]["memory"]["capacity_bytes"], 1ull << 30);
}

TEST(Stats, AKernelHolding100MiBReportsIt) {
  AgentProcess agent(StatsAgent("mem"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  // The shell keeps 100 MiB in a variable, and lives on in `sleep`'s wait.
  agent.CreateKernel(
      Kernel("mem", {"sh", "-c", "a=$(head -c 104857600 /dev/zero | tr '\\000' a); sleep 3600; echo ${#a}"}, "512m"));
  json k = PollJson(agent, "/v1/kernels/mem/stats", [](const json& b) {
    return b.value("measured", false) && b["memory"]["used_bytes"].get<uint64_t>() >= 100 * kMiB;
  });
  EXPECT_GE(k["memory"]["used_bytes"].get<uint64_t>(), 100 * kMiB) << k.dump();
  EXPECT_LT(k["memory"]["used_bytes"].get<uint64_t>(), 400 * kMiB) << k.dump();
  EXPECT_EQ(k["memory"]["limit_bytes"].get<uint64_t>(), 512 * kMiB) << k.dump();
  json all = agent.CallJson("GET", "/v1/stats", nullptr, 200);
  EXPECT_GE(all["agent"]["memory"]["used_bytes"].get<uint64_t>(), 100 * kMiB) << all.dump();
}

TEST(Stats, AnEndedKernelsSeriesDisappear) {
  AgentProcess agent(StatsAgent("end"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(Kernel("gone", {"sleep", "3600"}));
  ASSERT_TRUE(MeasuredKernel(agent, "gone").value("measured", false));
  const std::string series = "kernel_id=\"gone\"";
  EXPECT_NE(Metrics(agent).find(series), std::string::npos);

  agent.CallJson("DELETE", "/v1/kernels/gone", nullptr, 200);
  json all = PollJson(agent, "/v1/stats", [](const json& b) { return b["kernels"].empty(); });
  EXPECT_TRUE(all["kernels"].empty()) << all.dump();
  EXPECT_EQ(Metrics(agent).find(series), std::string::npos);
  EXPECT_EQ(agent.Call("GET", "/v1/kernels/gone/stats").status, 404);
}

TEST(Stats, AKernelThatIsNotRunningHasNoMeasures) {
  AgentProcess agent(StatsAgent("exited"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(Kernel("short", {"true"}));
  agent.WaitForState("short", "TERMINATED");
  json k = agent.CallJson("GET", "/v1/kernels/short/stats", nullptr, 200);
  EXPECT_EQ(k["measured"], false) << k.dump();
  EXPECT_EQ(k["state"], "TERMINATED");
  EXPECT_FALSE(k["reason"].get<std::string>().empty());
}

TEST(Stats, AContainerRemovedBehindTheAgentsBackCostsAtMostOneSample) {
  AgentProcess agent(StatsAgent("vanish", "0-1"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(Kernel("stays", {"sleep", "3600"}));
  json doomed = agent.CreateKernel(Kernel("doomed", {"sleep", "3600"}));
  PollJson(agent, "/v1/stats", [](const json& b) { return b["kernels"].size() == 2; });
  const uint64_t skipped_before =
      agent.CallJson("GET", "/v1/stats", nullptr, 200)["skipped_samples_total"].get<uint64_t>();

  ASSERT_TRUE(Engine().Remove(doomed["container_id"], /*force=*/true).ok());
  // Several sweeps later: the other kernel is still measured, the agent healthy.
  json all = PollJson(agent, "/v1/stats", [](const json& b) { return KernelIds(b) == std::set<std::string>{"stays"}; });
  std::this_thread::sleep_for(milliseconds(1000));
  all = agent.CallJson("GET", "/v1/stats", nullptr, 200);
  EXPECT_EQ(KernelIds(all), std::set<std::string>{"stays"}) << all.dump();
  EXPECT_LE(all["skipped_samples_total"].get<uint64_t>(), skipped_before + 1) << all.dump() << "\nthe skips:\n"
                                                                             << LinesWith(agent.log(), "sample skipped");
  EXPECT_EQ(agent.Call("GET", "/health").status, 200);
}

TEST(Stats, DockerStatsTypeMeasuresThroughTheEngine) {
  AgentOptions options = StatsAgent("docker");
  options.container_toml = "stats-type = \"docker\"\nstats-interval = \"500ms\"\n";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  agent.CreateKernel(Kernel("viaengine", {"sh", "-c", "while :; do :; done"}, "128m"));
  json k = MeasuredKernel(agent, "viaengine");
  ASSERT_TRUE(k.value("measured", false)) << k.dump() << agent.log();
  EXPECT_EQ(k["memory"]["limit_bytes"].get<uint64_t>(), 128 * kMiB);
  EXPECT_GT(k["cpu"]["usage_ns"].get<uint64_t>(), 0u);
  EXPECT_GE(k["pids"].get<int>(), 1);
  EXPECT_EQ(agent.CallJson("GET", "/v1/stats", nullptr, 200)["stats_type"], "docker");
  // The API answers while the slow engine sweeps run.
  EXPECT_EQ(agent.Call("GET", "/health").status, 200);
}

TEST(Stats, TwoAgentsEachReportOnlyTheirOwnAndPromtoolAcceptsBoth) {
  TempDir claims;
  AgentOptions a_options = StatsAgent("owna", "0");
  AgentOptions b_options = StatsAgent("ownb", sysconf(_SC_NPROCESSORS_ONLN) > 1 ? "1" : "0");
  a_options.claims_dir = b_options.claims_dir = claims.path();
  a_options.memory = b_options.memory = "256m";
  b_options.port_first = 32100;
  b_options.port_last = 32109;
  if (b_options.cores == a_options.cores) GTEST_SKIP() << "needs two cores: each agent owns one";
  AgentProcess a(a_options), b(b_options);
  ASSERT_TRUE(a.Start()) << a.log();
  ASSERT_TRUE(b.Start()) << b.log();
  a.CreateKernel(Kernel("a1", {"sleep", "3600"}));
  b.CreateKernel(Kernel("b1", {"sleep", "3600"}));

  json sa = PollJson(a, "/v1/stats", [](const json& s) { return s["kernels"].size() >= 1; });
  json sb = PollJson(b, "/v1/stats", [](const json& s) { return s["kernels"].size() >= 1; });
  EXPECT_EQ(KernelIds(sa), std::set<std::string>{"a1"}) << sa.dump();
  EXPECT_EQ(KernelIds(sb), std::set<std::string>{"b1"}) << sb.dump();
  EXPECT_EQ(sa["agent"]["cores"][0]["core"], 0);
  EXPECT_EQ(sb["agent"]["cores"][0]["core"], 1);
  EXPECT_EQ(a.Call("GET", "/v1/kernels/b1/stats").status, 404);

  TempDir scratch;
  for (const AgentProcess* agent : {&a, &b}) {
    const std::string text = Metrics(*agent);
    const std::string own = "agent_id=\"" + agent->options().id + "\"";
    const std::string other = "agent_id=\"" + (agent == &a ? b : a).options().id + "\"";
    EXPECT_NE(text.find(own), std::string::npos) << text;
    EXPECT_EQ(text.find(other), std::string::npos) << text;
    EXPECT_EQ(text.find(agent == &a ? "kernel_id=\"b1\"" : "kernel_id=\"a1\""), std::string::npos) << text;
    // Every series line names this agent.
    size_t lines = 0, named = 0;
    for (size_t start = 0; start < text.size();) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(start, end - start);
      if (!line.empty() && line[0] != '#') {
        ++lines;
        if (line.find(own) != std::string::npos) ++named;
      }
      start = end + 1;
    }
    EXPECT_GT(lines, 0u);
    EXPECT_EQ(named, lines) << text;

    const std::string file = scratch.path() + "/" + agent->options().id + ".prom";
    WriteFile(file, text);
    CommandResult check = RunCommand({"/bin/sh", "-c", "command -v promtool >/dev/null || { echo 'promtool not found: "
                                                  "run scripts/setup (Debian package prometheus)'; exit 127; }; "
                                                  "promtool check metrics < '" + file + "' 2>&1"});
    EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
    EXPECT_EQ(check.out, "") << "promtool has remarks:\n" << check.out;
  }
}

// Agents on the fake NVML: GPU processes whose pids are real containers' init
// processes, of this agent's kernels, another agent's, and no container.
class GpuStats : public ::testing::Test {
 protected:
  static constexpr const char* kGpu0 = "GPU-5a5a5a5a-1111-2222-3333-000000000000";
  static constexpr const char* kGpu1 = "GPU-6b6b6b6b-1111-2222-3333-000000000001";

  void SetUp() override {
    file_ = dir_.path() + "/nvml.json";
    WriteGpus(json::array(), json::array());
    setenv("SLOTD_FAKE_NVML_FILE", file_.c_str(), 1);
  }

  // Writes the two GPUs with these process lists.
  void WriteGpus(const json& processes0, const json& processes1) {
    json gpus = json::array();
    gpus.push_back({{"uuid", kGpu0}, {"name", "Fake H200"}, {"memory", "141g"}, {"processes", processes0},
                    {"utilization", {{"gpu", 40}, {"memory", 10}}}});
    gpus.push_back({{"uuid", kGpu1}, {"name", "Fake H200"}, {"memory", "141g"}, {"processes", processes1}});
    // A new file replaces the old at once, so the fake never reads half of it.
    WriteFile(file_ + ".new", json{{"gpus", gpus}}.dump());
    ASSERT_EQ(rename((file_ + ".new").c_str(), file_.c_str()), 0);
  }

  static AgentOptions GpuAgent(const std::string& name, const std::string& claims, int gpu, const std::string& core) {
    AgentOptions o = StatsAgent(name, core);
    o.claims_dir = claims;
    o.memory = "256m";
    o.port_first = 32200 + 100 * gpu;
    o.port_last = o.port_first + 9;
    o.extra_toml = "[resource.cuda]\nnvml-library = \"" + std::string(SLOTD_FAKE_NVML_PATH) +
                   "\"\nattach = \"env\"\nallowed-devices = [\"" + std::to_string(gpu) + "\"]\n";
    return o;
  }

  TempDir dir_;
  std::string file_;
};

// The device entry `id` of a GET /v1/stats body.
json Device(const json& stats, const std::string& id) {
  for (const auto& d : stats["agent"]["devices"])
    if (d["device"] == id) return d;
  return nullptr;
}

TEST_F(GpuStats, EachAgentAttributesItsOwnProcessesAndFlagsTheOthersAsForeign) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two cores: each agent owns one";
  TempDir claims;
  AgentProcess a(GpuAgent("gpua", claims.path(), 0, "0")), b(GpuAgent("gpub", claims.path(), 1, "1"));
  ASSERT_TRUE(a.Start()) << a.log();
  ASSERT_TRUE(b.Start()) << b.log();
  json ka = a.CreateKernel({{"kernel_id", "ga"}, {"image", kTestImage}, {"command", {"sleep", "3600"}},
                            {"resources", {{"cpu", 1}, {"mem", "32m"}, {"cuda.device", 1}}}});
  json kb = b.CreateKernel({{"kernel_id", "gb"}, {"image", kTestImage}, {"command", {"sleep", "3600"}},
                            {"resources", {{"cpu", 1}, {"mem", "32m"}, {"cuda.device", 1}}}});
  auto pa = Engine().Inspect(ka["container_id"]);
  auto pb = Engine().Inspect(kb["container_id"]);
  ASSERT_TRUE(pa.ok() && pb.ok());
  const int pid_a = pa->pid, pid_b = pb->pid, pid_none = static_cast<int>(getpid());
  ASSERT_GT(pid_a, 0);
  ASSERT_GT(pid_b, 0);

  // GPU 0 (agent a's): a's kernel 1g, b's kernel 2g, this test process 512m.
  // GPU 1 (agent b's): b's kernel 1g, a's kernel 3g.
  WriteGpus(json::array({{{"pid", pid_a}, {"used_memory", "1g"}},
                         {{"pid", pid_b}, {"used_memory", "2g"}},
                         {{"pid", pid_none}, {"used_memory", "512m"}}}),
            json::array({{{"pid", pid_b}, {"used_memory", "1g"}}, {{"pid", pid_a}, {"used_memory", "3g"}}}));

  auto has_foreign = [](const char* gpu, size_t n) {
    return [gpu, n](const json& s) {
      json d = Device(s, gpu);
      return !d.is_null() && d["foreign"].size() == n && !s["kernels"].empty() &&
             !s["kernels"][0]["devices"].empty();
    };
  };
  json sa = PollJson(a, "/v1/stats", has_foreign(kGpu0, 2));
  json sb = PollJson(b, "/v1/stats", has_foreign(kGpu1, 1));
  ASSERT_TRUE(sa["attribution_unavailable"].is_null()) << sa.dump();

  // Agent a: its kernel's process on GPU 0; b's and the loose process are foreign.
  ASSERT_EQ(sa["agent"]["devices"].size(), 1u) << sa.dump();
  json d0 = Device(sa, kGpu0);
  ASSERT_FALSE(d0.is_null()) << sa.dump();
  EXPECT_TRUE(d0["measured"].get<bool>()) << d0.dump();
  EXPECT_EQ(d0["memory_used_bytes"].get<uint64_t>(), 3584 * kMiB) << d0.dump();
  EXPECT_EQ(d0["utilization_percent"], 40);
  EXPECT_EQ(d0["foreign_memory_bytes"].get<uint64_t>(), 2560 * kMiB) << d0.dump();
  std::map<int, json> foreign;
  for (const auto& p : d0["foreign"]) foreign[p["host_pid"].get<int>()] = p;
  ASSERT_EQ(foreign.count(pid_b), 1u) << d0.dump();
  EXPECT_EQ(foreign[pid_b]["container_id"], kb["container_id"]) << d0.dump();
  ASSERT_EQ(foreign.count(pid_none), 1u) << d0.dump();
  EXPECT_TRUE(foreign[pid_none]["container_id"].is_null()) << d0.dump();
  ASSERT_EQ(sa["kernels"].size(), 1u);
  json use = sa["kernels"][0]["devices"];
  ASSERT_EQ(use.size(), 1u) << sa.dump();
  EXPECT_EQ(use[0]["device"], kGpu0);
  EXPECT_EQ(use[0]["memory_used_bytes"].get<uint64_t>(), 1024 * kMiB);
  ASSERT_EQ(use[0]["processes"].size(), 1u);
  EXPECT_EQ(use[0]["processes"][0]["host_pid"], pid_a);
  EXPECT_EQ(use[0]["processes"][0]["kernel_pid"], 1);  // the container's init process

  // Agent b: the mirror image on GPU 1; it never reports GPU 0.
  ASSERT_EQ(sb["agent"]["devices"].size(), 1u) << sb.dump();
  json d1 = Device(sb, kGpu1);
  ASSERT_FALSE(d1.is_null()) << sb.dump();
  ASSERT_EQ(d1["foreign"].size(), 1u) << d1.dump();
  EXPECT_EQ(d1["foreign"][0]["host_pid"], pid_a);
  EXPECT_EQ(d1["foreign"][0]["container_id"], ka["container_id"]);
  EXPECT_EQ(d1["foreign_memory_bytes"].get<uint64_t>(), 3072 * kMiB);
  EXPECT_EQ(sb["kernels"][0]["devices"][0]["memory_used_bytes"].get<uint64_t>(), 1024 * kMiB);

  // The foreign usage is a metric and a warning.
  const std::string text = Metrics(a);
  EXPECT_NE(text.find("slotd_device_foreign_memory_bytes{"), std::string::npos) << text;
  EXPECT_NE(a.log().find("foreign usage"), std::string::npos) << a.log();
  EXPECT_NE(a.log().find(std::to_string(pid_b)), std::string::npos) << a.log();
}

}  // namespace
}  // namespace slotd::testing
