// bench_warm: how long a create takes when a warm pool serves it
// (POST /v1/kernels matching a [[pool]] entry, answered with a kernel
// started ahead of the request) compared with what a user would otherwise
// do: create + start the same container directly through the Docker Engine
// API. The two alternate, one of each per round; before each agent create
// the pool is full again, so the refill is never inside the timed part.
// Then the agent is SIGKILLed and started again: the kernel it gave is
// adopted as given, the pool's kernels as WARM, none twice.
#include <signal.h>

#include <cstdio>
#include <set>
#include <thread>

#include "model/create_request.h"
#include "common.h"

namespace slotd::bench {
namespace {

constexpr int kWarmUpRounds = 2;     // rounds run first and not counted
constexpr int kMeasuredRounds = 20;  // rounds counted
constexpr int kPoolCount = 2;        // kernels the pool keeps
constexpr char kCpu[] = "100m";      // each kernel's share of the shared pool
constexpr char kMemory[] = "64m";
// Pause after each clean-up so that the engine's and the agent's work on the
// removal does not fall into the next timed part.
constexpr auto kSettle = std::chrono::milliseconds(200);

// The create the pool serves: no kernel id, the pool's image, command and shape.
nlohmann::json MatchingBody(const std::string& session) {
  nlohmann::json body = KernelRequestBody("unused", kMemory);
  body.erase("kernel_id");
  body["resources"] = {{"cpu", kCpu}, {"mem", kMemory}};
  body["session_id"] = session;
  return body;
}

// The WARM kernels of the agent's pool, by id.
std::set<std::string> WarmKernels(const testing::AgentProcess& agent) {
  std::set<std::string> ids;
  const nlohmann::json list = CallAgent(agent, "GET", "/v1/kernels?warm=1", nullptr, 200);
  for (const nlohmann::json& k : list["kernels"])
    if (k["state"] == "WARM") ids.insert(k["kernel_id"].get<std::string>());
  return ids;
}

// Waits until the pool is full again and nothing is being made.
void WaitForFullPool(const testing::AgentProcess& agent) {
  PollUntil(
      [&] {
        const nlohmann::json pool = CallAgent(agent, "GET", "/v1/agent", nullptr, 200)["warm"]["pools"][0];
        return pool["warm"] == kPoolCount && pool["making"] == 0;
      },
      std::chrono::seconds(60), "the warm pool refilled");
}

// Creates a matching kernel through the agent and returns the milliseconds
// until the answer; checks it was one of the pool's WARM kernels; deletes
// it afterwards, untimed.
double TimeAgentCreate(const testing::AgentProcess& agent, int round) {
  WaitForFullPool(agent);
  const std::set<std::string> warm = WarmKernels(agent);
  std::this_thread::sleep_for(kSettle);
  const auto start = Clock::now();
  const nlohmann::json kernel = CallAgent(agent, "POST", "/v1/kernels", MatchingBody("s" + std::to_string(round)), 201);
  const double ms = Millis(start, Clock::now());
  const std::string id = kernel.value("kernel_id", "");
  if (kernel.value("state", "") != "RUNNING" || !warm.count(id))
    throw BenchFailure("the create was not given a WARM kernel of the pool: " + kernel.dump());
  CallAgent(agent, "DELETE", "/v1/kernels/" + id, nullptr, 200);
  return ms;
}

// Creates and starts, through the engine, the container a pool's kernel is
// (its image, command, labels, the shared pool's cores and its quota),
// owned by DirectOwner, and returns the milliseconds the two calls took;
// removes it afterwards, untimed.
double TimeDirectCreate(const std::string& agent_id, const std::string& cores, int round) {
  nlohmann::json body = MatchingBody("direct");
  body["kernel_id"] = "direct-" + std::to_string(round);
  const CreateRequest request = Check(ParseCreateRequest(body), "the create request");
  Allocation allocation;
  allocation.shared_cpu_millis = request.resources.shared_cpu_millis;
  allocation.mem_bytes = request.resources.mem_bytes;
  ContainerSpec spec = KernelContainerSpec(DirectOwner(agent_id), request, allocation);
  spec.cpuset_cpus = cores;
  spec.cpu_period_us = 100'000;
  spec.cpu_quota_us = 100'000 * allocation.shared_cpu_millis / 1000;
  DockerEngine& engine = testing::Engine();
  const auto start = Clock::now();
  const std::string id = Check(engine.Create(spec), "creating container " + spec.name);
  const Status started = engine.Start(id);
  const double ms = Millis(start, Clock::now());
  const Status removed = engine.Remove(id, /*force=*/true);
  Check(started, "starting container " + spec.name);
  Check(removed, "removing container " + spec.name);
  return ms;
}

// SIGKILLs the agent after it gave one kernel and starts it again: prints
// what it adopted, and fails when the given kernel is WARM again or a WARM
// kernel was lost.
void CheckAdoption(testing::AgentProcess& agent) {
  WaitForFullPool(agent);
  const nlohmann::json given = CallAgent(agent, "POST", "/v1/kernels", MatchingBody("kept"), 201);
  const std::string id = given.value("kernel_id", "");
  WaitForFullPool(agent);
  const std::set<std::string> warm_before = WarmKernels(agent);
  agent.Kill(SIGKILL);
  StartAgent(agent);
  const std::set<std::string> warm_after = WarmKernels(agent);
  const nlohmann::json adopted = CallAgent(agent, "GET", "/v1/kernels/" + id, nullptr, 200);
  std::printf("restart: the given kernel adopted %s (session %s); WARM kernels %zu before the SIGKILL, %zu after, "
              "the same: %s\n",
              adopted.value("state", "").c_str(), adopted.value("session_id", "").c_str(), warm_before.size(),
              warm_after.size(), warm_before == warm_after ? "yes" : "no");
  if (adopted["state"] != "RUNNING" || adopted["session_id"] != "kept" || warm_after.count(id) ||
      warm_before != warm_after)
    throw BenchFailure("the restart did not adopt the warm pool exactly: " + adopted.dump());
  CallAgent(agent, "DELETE", "/v1/kernels/" + id, nullptr, 200);
}

void Run(const std::string& agent_id) {
  testing::AgentOptions options = BenchAgentOptions(agent_id);
  options.extra_toml = std::string("[[pool]]\nname = \"bench\"\nimage = \"") + testing::kTestImage +
                       "\"\ncommand = [\"sleep\", \"3600\"]\ncpu = \"" + kCpu + "\"\nmem = \"" + kMemory +
                       "\"\ncount = " + std::to_string(kPoolCount) + "\n";
  testing::AgentProcess agent(options);
  StartAgent(agent);
  PrintHeader("bench_warm", agent.options());
  std::printf("  a pool of %d (%s, %s, sleep 3600); %d warm-up + %d measured rounds: one agent create, one direct\n",
              kPoolCount, kCpu, kMemory, kWarmUpRounds, kMeasuredRounds);
  Samples agent_ms, direct_ms;
  for (int round = 0; round < kWarmUpRounds + kMeasuredRounds; ++round) {
    ThrowIfInterrupted();
    const double a = TimeAgentCreate(agent, round);
    std::this_thread::sleep_for(kSettle);
    const double d = TimeDirectCreate(agent_id, options.cores, round);
    std::this_thread::sleep_for(kSettle);
    if (round < kWarmUpRounds) continue;
    agent_ms.Add(a);
    direct_ms.Add(d);
  }
  PrintSamples("agent:  POST /v1/kernels -> RUNNING, given from the warm pool", agent_ms);
  PrintSamples("direct: engine create + start, same container", direct_ms);
  PrintRatio("agent/direct (medians)", agent_ms.Median() / direct_ms.Median(), "<= 0.05");
  CheckAdoption(agent);
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("warm");
  return RunBenchmark("bench_warm", {agent_id, DirectOwner(agent_id)}, [&] { Run(agent_id); });
}
