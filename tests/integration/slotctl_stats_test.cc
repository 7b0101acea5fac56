// `slotctl stats`, `slotctl top` and `slotctl node --top` through the real
// binaries: real agents measuring real containers, their measures shown as
// tables (and as the agent's JSON with --json).
#include <unistd.h>

#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

using nlohmann::json;

// Agent i of a node sharing `claims_dir` (empty: a claims directory of its
// own): core i, 256m, sweeping every 200 ms.
AgentOptions StatsAgent(const std::string& name, int i, const std::string& claims_dir = "") {
  AgentOptions o;
  o.id = "it-" + RunTag() + "-" + name;
  o.cores = std::to_string(i);
  o.memory = "256m";
  o.claims_dir = claims_dir;
  o.port_first = 35000 + 100 * i;
  o.port_last = o.port_first + 9;
  o.container_toml = "stats-interval = \"200ms\"\n";
  return o;
}

// Creates a kernel of 64m that sleeps, and waits until it runs.
void StartSleeper(const AgentProcess& agent, const std::string& kernel_id) {
  agent.CreateKernel({{"kernel_id", kernel_id},
                      {"image", kTestImage},
                      {"command", {"sleep", "3600"}},
                      {"resources", {{"cpu", 1}, {"mem", "64m"}}}});
  agent.WaitForState(kernel_id, "RUNNING");
}

// Polls the agent's GET /v1/stats until a sweep has measured `kernel_id`;
// false when none did within a generous limit.
bool WaitUntilMeasured(const AgentProcess& agent, const std::string& kernel_id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  do {
    HttpResponse res = agent.Call("GET", "/v1/stats");
    json stats = json::parse(res.body, nullptr, false);
    if (res.status == 200 && stats.is_object())
      for (const auto& k : stats["kernels"])
        if (k.value("kernel_id", "") == kernel_id) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline);
  return false;
}

// The lines of `text`.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The whitespace-separated fields of `line`.
std::vector<std::string> Fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> fields;
  for (std::string f; in >> f;) fields.push_back(f);
  return fields;
}

// The fields of every line of `text` whose first field is `first`.
std::vector<std::vector<std::string>> Rows(const std::string& text, const std::string& first) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& line : Lines(text)) {
    std::vector<std::string> fields = Fields(line);
    if (!fields.empty() && fields[0] == first) rows.push_back(fields);
  }
  return rows;
}

// How many lines of `text` start with `prefix`.
int CountLinesStartingWith(const std::string& text, const std::string& prefix) {
  int n = 0;
  for (const auto& line : Lines(text)) n += line.rfind(prefix, 0) == 0;
  return n;
}

TEST(SlotctlStats, StatsShowsTheRunningKernelsAndTheAgentsSliceAndOneKernelsMeasures) {
  AgentProcess agent(StatsAgent("stats", 0));
  ASSERT_TRUE(agent.Start()) << agent.log();
  // A kernel that ended first, so that its core is free again for the one that runs.
  agent.CreateKernel({{"kernel_id", "ended"}, {"image", kTestImage}, {"command", {"true"}}});
  agent.WaitForState("ended", "TERMINATED");
  StartSleeper(agent, "watched");
  ASSERT_TRUE(WaitUntilMeasured(agent, "watched")) << agent.log();
  const std::string socket = agent.socket_path();

  CommandResult r = Slotctl({"--socket", socket, "stats"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Fields(Lines(r.out).at(0)),
            (std::vector<std::string>{"KERNEL", "CPU%", "MEM", "PIDS", "IO", "R/W", "GPU", "MEM"}))
      << r.out;
  auto rows = Rows(r.out, "watched");
  ASSERT_EQ(rows.size(), 1u) << r.out;
  ASSERT_EQ(rows[0].size(), 6u) << r.out;
  EXPECT_TRUE(rows[0][2].ends_with("/64m")) << r.out;  // memory used of its limit
  EXPECT_GE(std::stoi(rows[0][3]), 1) << r.out;       // pids: at least sleep
  EXPECT_EQ(rows[0][5], "-") << r.out;                 // no GPU
  EXPECT_EQ(CountLinesStartingWith(r.out, "cores:  0 "), 1) << r.out;
  EXPECT_EQ(CountLinesStartingWith(r.out, "memory: "), 1) << r.out;
  EXPECT_NE(r.out.find(" used of 256m\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("warning:"), std::string::npos) << r.out;

  r = Slotctl({"--socket", socket, "stats", "watched"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("kernel watched: RUNNING, container ", 0), 0u) << r.out;
  EXPECT_EQ(CountLinesStartingWith(r.out, "cpu     "), 1) << r.out;
  EXPECT_NE(r.out.find(" used of 64m, cache "), std::string::npos) << r.out;
  EXPECT_EQ(CountLinesStartingWith(r.out, "pids    "), 1) << r.out;
  EXPECT_EQ(CountLinesStartingWith(r.out, "io      "), 1) << r.out;

  // --json prints the agent's own objects.
  r = Slotctl({"--socket", socket, "--json", "stats"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json all = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(all.is_object()) << r.out;
  EXPECT_EQ(all["agent_id"], agent.options().id);
  std::set<std::string> ids;
  for (const auto& k : all["kernels"]) ids.insert(k["kernel_id"].get<std::string>());
  EXPECT_EQ(ids, std::set<std::string>{"watched"}) << r.out;
  r = Slotctl({"--socket", socket, "--json", "stats", "watched"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json one = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(one.is_object()) << r.out;
  EXPECT_EQ(one["measured"], true) << r.out;
  EXPECT_EQ(one["memory"]["limit_bytes"], 64ull << 20) << r.out;

  // A kernel that is not running has the agent's reason instead of measures.
  r = Slotctl({"--socket", socket, "stats", "ended"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("kernel ended: TERMINATED, not measured: ", 0), 0u) << r.out;
  EXPECT_EQ(Lines(r.out).size(), 1u) << r.out;

  r = Slotctl({"--socket", socket, "stats", "nosuch"});
  EXPECT_EQ(r.exit_code, 4) << r.out;  // not found: docs/cli.md "Exit status"
  EXPECT_NE(r.err.find("(HTTP 404)"), std::string::npos) << r.err;
}

TEST(SlotctlStats, TopPrintsOneFramePerIterationAndStops) {
  AgentProcess agent(StatsAgent("top", 0));
  ASSERT_TRUE(agent.Start()) << agent.log();
  StartSleeper(agent, "watched");
  ASSERT_TRUE(WaitUntilMeasured(agent, "watched")) << agent.log();
  const std::string socket = agent.socket_path();

  CommandResult r = Slotctl({"--socket", socket, "top", "--iterations", "2", "--interval", "200ms"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Not a terminal: frames follow each other, nothing clears the screen.
  EXPECT_EQ(r.out.find("\033["), std::string::npos) << r.out;
  EXPECT_EQ(CountLinesStartingWith(r.out, "agent " + agent.options().id + "  "), 2) << r.out;
  EXPECT_EQ(CountLinesStartingWith(r.out, "KERNEL "), 2) << r.out;
  EXPECT_EQ(Rows(r.out, "watched").size(), 2u) << r.out;
  EXPECT_EQ(CountLinesStartingWith(r.out, "cores:  0 "), 2) << r.out;
  // The second frame starts after a blank line.
  EXPECT_NE(r.out.find("\n\nagent " + agent.options().id + "  "), std::string::npos) << r.out;

  r = Slotctl({"--socket", socket, "--json", "top", "--iterations", "2", "--interval", "200ms"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  int frames = 0;
  for (const auto& line : Lines(r.out)) {
    if (line.empty()) continue;
    json frame = json::parse(line, nullptr, false);
    ASSERT_TRUE(frame.is_object()) << line;
    EXPECT_EQ(frame["agent_id"], agent.options().id);
    ++frames;
  }
  EXPECT_EQ(frames, 2) << r.out;

  r = Slotctl({"--socket", socket, "top", "--interval", "soon"});
  EXPECT_EQ(r.exit_code, 2) << r.out;  // usage
  EXPECT_NE(r.err.find("--interval: invalid duration \"soon\""), std::string::npos) << r.err;
}

TEST(SlotctlStats, NodeTopShowsEachLiveAgentsKernelsUnderThatAgent) {
  TempDir claims;
  AgentProcess first(StatsAgent("topa", 0, claims.path())), second(StatsAgent("topb", 1, claims.path()));
  ASSERT_TRUE(first.Start()) << first.log();
  ASSERT_TRUE(second.Start()) << second.log();
  StartSleeper(first, "ka");
  StartSleeper(second, "kb");
  ASSERT_TRUE(WaitUntilMeasured(first, "ka")) << first.log();
  ASSERT_TRUE(WaitUntilMeasured(second, "kb")) << second.log();

  CommandResult r = Slotctl({"node", "--claims-dir", claims.path(), "--top", "--iterations", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // agent id -> the kernel rows below its header line.
  std::map<std::string, std::set<std::string>> kernels_of;
  std::string current;
  for (const auto& line : Lines(r.out)) {
    std::vector<std::string> fields = Fields(line);
    if (fields.empty() || fields[0] == "KERNEL") continue;
    if (fields[0] == "agent" && fields.size() > 1) {
      current = fields[1];
      kernels_of[current];
    } else if (!current.empty()) {
      kernels_of[current].insert(fields[0]);
    }
  }
  EXPECT_EQ(kernels_of, (std::map<std::string, std::set<std::string>>{{first.options().id, {"ka"}},
                                                                      {second.options().id, {"kb"}}}))
      << r.out;

  r = Slotctl({"node", "--claims-dir", claims.path(), "--top", "--iterations", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json agents = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(agents.is_array()) << r.out;
  ASSERT_EQ(agents.size(), 2u) << r.out;
  for (const auto& a : agents) {
    ASSERT_TRUE(a["stats"].is_object()) << r.out;
    EXPECT_EQ(a["stats"]["agent_id"], a["agent"]) << r.out;
  }

  // Without --top, `slotctl node` is the table of agents, and the refresh options need --top.
  r = Slotctl({"node", "--claims-dir", claims.path()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("AGENT", 0), 0u) << r.out;
  r = Slotctl({"node", "--claims-dir", claims.path(), "--iterations", "1"});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("--iterations requires --top"), std::string::npos) << r.err;
}

TEST(SlotctlStats, NodeTopShowsAnAgentThatNeedsATokenAsUnknown) {
  TempDir claims;
  AgentOptions options = StatsAgent("toptoken", 0, claims.path());
  options.token = "s3cret";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  // Without its socket, slotctl can only reach the agent over TCP, where it needs the token.
  ASSERT_EQ(::unlink(agent.socket_path().c_str()), 0);
  CommandResult r = Slotctl({"node", "--claims-dir", claims.path(), "--top", "--iterations", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "? " + options.id + ": http://127.0.0.1:" + std::to_string(agent.port()) +
                       " requires a token (HTTP 401); run slotctl --config " + agent.config_path() +
                       " stats as a user who can read its token-file\n")
      << r.out;
}

}  // namespace
}  // namespace slotd::testing
