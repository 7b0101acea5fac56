// bench_multi_restart: one of several agents sharing an engine and a node
// claims directory is restarted; how long until it serves again, and whether
// its start-up touched any container that is not its own.
//
// Four owners of 50 kernels each share the engine at $DOCKER_HOST. Agents on
// one node need disjoint, non-empty allowed-cores within their cpuset, so
// min(4, free cores) of them run as real build/bin/slotd processes (one core
// each, one shared claims directory, their own ipc directories and port
// ranges); the other owners' 50 kernels stay on the engine with their agent
// down, as after a crash, so the engine holds 4 x 50 owned containers either
// way. As in bench_restart, the kernels are made directly through the engine,
// labelled exactly as the agent labels its own, with 16m of memory and no
// core (the API requires cpu >= 1 and there are not 200 cores).
//
// Each agent reaches the engine through an EngineProxy of its own
// (tests/testing/engine_proxy.h), which records every request it makes.
//
// Then kRounds restarts, taking the running agents in turn, alternately
// after SIGTERM and after SIGKILL: the time from the spawn to the first
// GET /v1/kernels that lists exactly its 50 kernels, all RUNNING (Start()
// also waits for /health), and, from the proxy's record of that start (the
// spawn until that listing), N engine requests naming a container and M of
// them naming one that is not the agent's own (by the ids and names of its
// owner's containers on the engine). M must be 0. After every restart each
// other running agent still lists its 50 RUNNING kernels and each owner
// still has 50 running containers on the engine. Exits 1 when any of that
// fails.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>
#include <set>

#include "common.h"
#include "common/units.h"
#include "testing/engine_proxy.h"

namespace slotd::bench {
namespace {

constexpr int kOwners = 4;         // owners of kernels on the engine
constexpr int kKernels = 50;       // kernels of each owner
constexpr int kRounds = 10;        // measured restarts, SIGTERM and SIGKILL alternately
constexpr char kKernelMemory[] = "16m";
constexpr char kAgentMemory[] = "1g";  // 50 x 16m fit; 4 agents fit in any node the tests run on
constexpr auto kRestartLimit = std::chrono::seconds(30);  // a restart slower than this fails the run

// The kernels one GET /v1/kernels on `agent` lists, and how many are RUNNING;
// {-1, -1} when the agent does not answer (yet).
struct Listed {
  int total = -1;
  int running = -1;
};
Listed ListKernels(const testing::AgentProcess& agent) {
  auto res = HttpClient::Unix(agent.socket_path()).Request("GET", "/v1/kernels", "", std::chrono::seconds(5));
  if (!res.ok() || res->status != 200) return {};
  nlohmann::json body = nlohmann::json::parse(res->body, nullptr, false);
  if (body.is_discarded() || !body.contains("kernels")) return {};
  Listed listed{0, 0};
  for (const auto& kernel : body["kernels"]) {
    ++listed.total;
    listed.running += kernel.value("state", "") == "RUNNING";
  }
  return listed;
}

// Whether `agent` lists exactly its kKernels kernels, all RUNNING.
bool ListsItsOwn(const testing::AgentProcess& agent) {
  Listed listed = ListKernels(agent);
  return listed.total == kKernels && listed.running == kKernels;
}

// The engine requests of one start that named a container.
struct StartupCalls {
  int naming = 0;   // N: requests that named a container
  int foreign = 0;  // M: of those, requests naming a container not the agent's own
};

// The ids and names of `owner`'s containers on the engine.
std::set<std::string> ContainersOf(const std::string& owner) {
  std::set<std::string> own;
  for (const auto& info : Check(testing::Engine().List({std::string(label::kOwner) + "=" + owner}),
                                "listing the containers of " + owner)) {
    own.insert(info.id);
    own.insert(info.name);
  }
  return own;
}

// One restart of `agent` after `signal`: the milliseconds from the spawn to
// the first full listing of its own kernels, and the requests naming a
// container that `proxy`, its way to the engine, saw in between.
struct Restart {
  double ms = 0;
  StartupCalls calls;
};
Restart RestartAgent(testing::AgentProcess& agent, const EngineProxy& proxy, int signal) {
  agent.Kill(signal);
  const size_t first_request = proxy.Requests().size();
  const double ms = TimeSpawnUntilReady(agent, [&] { return ListsItsOwn(agent); }, kRestartLimit,
                                       "restarted agent " + agent.options().id + " listing its " +
                                           std::to_string(kKernels) + " kernels");
  const std::vector<EngineProxy::Request> requests = proxy.Requests();
  const std::set<std::string> own = ContainersOf(agent.options().id);
  Restart restart{ms, {}};
  for (size_t i = first_request; i < requests.size(); ++i) {
    if (requests[i].container.empty()) continue;
    ++restart.calls.naming;
    if (!own.count(requests[i].container)) {
      ++restart.calls.foreign;
      std::printf("  agent %s at start-up: %s %s names a container not its own\n", agent.options().id.c_str(),
                  requests[i].method.c_str(), requests[i].target.c_str());
    }
  }
  return restart;
}

// Throws unless every running agent lists its kKernels RUNNING kernels and
// every owner has kKernels running containers on the engine.
void CheckEveryOwner(const std::vector<std::unique_ptr<testing::AgentProcess>>& agents,
                     const std::vector<std::string>& owners) {
  for (const auto& agent : agents) {
    Listed listed = ListKernels(*agent);
    if (listed.total != kKernels || listed.running != kKernels)
      throw BenchFailure("agent " + agent->options().id + " lists " + std::to_string(listed.total) + " kernels, " +
                         std::to_string(listed.running) + " RUNNING; expected " + std::to_string(kKernels));
  }
  for (const auto& owner : owners) {
    int running = 0;
    for (const auto& info : Check(testing::Engine().List({std::string(label::kOwner) + "=" + owner}),
                                  "listing the containers of " + owner))
      running += info.running;
    if (running != kKernels)
      throw BenchFailure("owner " + owner + " has " + std::to_string(running) + " running containers on the engine; "
                         "expected " + std::to_string(kKernels));
  }
}

void Run(const std::vector<std::string>& owners) {
  // The cores no other owner's container holds, one per running agent.
  testing::AgentOptions base = BenchAgentOptions(owners[0]);
  std::vector<int> cores = Check(ParseCoreList(base.cores), "the free cores");
  const int running_agents = std::min<int>(kOwners, static_cast<int>(cores.size()));
  testing::TempDir claims;  // the node claims directory all the agents share

  std::vector<std::unique_ptr<EngineProxy>> proxies;  // agents[i] talks to the engine through proxies[i]
  std::vector<std::unique_ptr<testing::AgentProcess>> agents;
  for (int i = 0; i < running_agents; ++i) {
    proxies.push_back(std::make_unique<EngineProxy>(testing::DockerHost()));
    testing::AgentOptions options = base;
    options.id = owners[i];
    options.cores = std::to_string(cores[i]);
    options.memory = kAgentMemory;
    options.port_first = base.port_first + 10 * i;
    options.port_last = options.port_first + 9;
    options.claims_dir = claims.path();
    options.docker_host = proxies[i]->docker_host();
    agents.push_back(std::make_unique<testing::AgentProcess>(options));
  }
  std::printf("bench_multi_restart: %d owners x %d kernels (%s, no core each) on engine %s, image %s\n", kOwners,
              kKernels, kKernelMemory, testing::DockerHost().c_str(), testing::kTestImage);
  for (int i = 0; i < kOwners; ++i) {
    if (i < running_agents)
      std::printf("  agent %s: allowed-cores %s, ports %d-%d, shared claims dir, engine through a counting proxy\n",
                  owners[i].c_str(),
                  agents[i]->options().cores.c_str(), agents[i]->options().port_first,
                  agents[i]->options().port_last);
    else
      std::printf("  owner %s: its kernels only, no agent running (this machine has %zu free cores; agents need "
                  "disjoint ones)\n", owners[i].c_str(), cores.size());
  }
  std::fflush(stdout);

  for (int i = 0; i < kOwners; ++i) CreateCorelessKernels(owners[i], "m" + std::to_string(i), kKernels, kKernelMemory);
  for (auto& agent : agents) {
    StartAgent(*agent);
    PollUntil([&] { return ListsItsOwn(*agent); }, std::chrono::seconds(5),
              "agent " + agent->options().id + " adopting its " + std::to_string(kKernels) + " kernels");
  }
  CheckEveryOwner(agents, owners);

  Samples all_ms, term_ms, kill_ms;
  int max_naming = 0, total_foreign = 0;
  for (int round = 0; round < kRounds; ++round) {
    ThrowIfInterrupted();
    testing::AgentProcess& agent = *agents[round % running_agents];
    const int signal = round % 2 == 0 ? SIGTERM : SIGKILL;
    Restart restart = RestartAgent(agent, *proxies[round % running_agents], signal);
    std::printf("  restart %2d: %s after %s: ready and listing its %d in %7.2f ms; start-up engine requests naming a "
                "container: %d, naming one not its own: %d\n",
                round + 1, agent.options().id.c_str(), signal == SIGTERM ? "SIGTERM" : "SIGKILL", kKernels, restart.ms,
                restart.calls.naming, restart.calls.foreign);
    std::fflush(stdout);
    if (restart.calls.foreign != 0)
      throw BenchFailure("restarted agent " + agent.options().id + " made " + std::to_string(restart.calls.foreign) +
                         " engine requests naming containers not its own at start-up");
    all_ms.Add(restart.ms);
    (signal == SIGTERM ? term_ms : kill_ms).Add(restart.ms);
    max_naming = std::max(max_naming, restart.calls.naming);
    total_foreign += restart.calls.foreign;
    CheckEveryOwner(agents, owners);
  }
  PrintSamples("spawn -> ready, lists its 50 (after SIGTERM)", term_ms);
  PrintSamples("spawn -> ready, lists its 50 (after SIGKILL)", kill_ms);
  PrintSamples("spawn -> ready, lists its 50 (all restarts)", all_ms);
  std::printf("  start-up engine requests naming a container (counted by the proxy): at most %d per start; naming "
              "one not its own: %d in all (must be 0)\n", max_naming, total_foreign);
  std::printf("  after every restart: each running agent lists its %d RUNNING, each of the %d owners has %d running "
              "containers\n", kKernels, kOwners, kKernels);
  std::fflush(stdout);

  // The kernels of the owners without an agent; the agents' own go with them
  // (AgentProcess), anything left after a failure with RunBenchmark's clean-up.
  for (size_t i = agents.size(); i < owners.size(); ++i)
    for (const auto& info : Check(testing::Engine().List({std::string(label::kOwner) + "=" + owners[i]}),
                                  "listing the containers of " + owners[i]))
      Check(testing::Engine().Remove(info.id, /*force=*/true), "removing container " + info.name);
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  std::vector<std::string> owners;
  for (int i = 0; i < kOwners; ++i) owners.push_back(UniqueAgentId("multi" + std::to_string(i)));
  return RunBenchmark("bench_multi_restart", owners, [&] { Run(owners); });
}
