// bench_create: how long a kernel takes to be RUNNING through the agent
// (POST /v1/kernels over its unix socket; the answer comes after the start)
// compared with what a user would otherwise do: create + start the same
// container directly through the Docker Engine API. The two alternate, one
// of each per round, in swapped order every other round; clean-up of each is
// outside the timed part.
#include <cstdio>
#include <functional>
#include <thread>

#include "common.h"

namespace slotd::bench {
namespace {

constexpr int kWarmUpRounds = 2;     // rounds run first and not counted
constexpr int kMeasuredRounds = 20;  // rounds counted
constexpr char kMemory[] = "64m";    // each kernel's memory
// Pause after each clean-up so that the engine's and the agent's work on the
// removal (events, relists) does not fall into the next timed part.
constexpr auto kSettle = std::chrono::milliseconds(200);

// Creates kernel `kernel_id` through the agent and returns the milliseconds
// until the answer; stores what the agent allocated in `allocation`; deletes
// the kernel afterwards, untimed.
double TimeAgentCreate(const testing::AgentProcess& agent, const std::string& kernel_id, Allocation& allocation) {
  nlohmann::json body = KernelRequestBody(kernel_id, kMemory);
  auto start = Clock::now();
  nlohmann::json kernel = CallAgent(agent, "POST", "/v1/kernels", body, 201);
  double ms = Millis(start, Clock::now());
  if (kernel.value("state", "") != "RUNNING")
    throw BenchFailure("kernel " + kernel_id + " is not RUNNING after its create: " + kernel.dump());
  allocation = Check(Allocation::FromJson(kernel.value("allocations", nlohmann::json())), "the kernel's allocations");
  CallAgent(agent, "DELETE", "/v1/kernels/" + kernel_id, nullptr, 200);
  return ms;
}

// Creates and starts, through the engine, the container the agent would make
// for `kernel_id` with `allocation` (owned by DirectOwner) and returns the
// milliseconds the two calls took; removes it afterwards, untimed.
double TimeDirectCreate(const std::string& agent_id, const std::string& kernel_id, const Allocation& allocation) {
  CreateRequest request = Check(ParseCreateRequest(KernelRequestBody(kernel_id, kMemory)), "the create request");
  ContainerSpec spec = KernelContainerSpec(DirectOwner(agent_id), request, allocation);
  DockerEngine& engine = testing::Engine();

  auto start = Clock::now();
  std::string id = Check(engine.Create(spec), "creating container " + spec.name);
  Status started = engine.Start(id);
  double ms = Millis(start, Clock::now());
  Status removed = engine.Remove(id, /*force=*/true);
  Check(started, "starting container " + spec.name);
  Check(removed, "removing container " + spec.name);
  return ms;
}

void Run(const std::string& agent_id) {
  testing::AgentProcess agent(BenchAgentOptions(agent_id));
  StartAgent(agent);
  PrintHeader("bench_create", agent.options());
  std::printf("  %d warm-up + %d measured rounds; each round: one agent create, one direct create\n", kWarmUpRounds,
              kMeasuredRounds);

  Samples agent_ms, direct_ms;
  // What the agent gave its last kernel; the direct containers get the same.
  // Round 0 starts with the agent, so it is known before the first direct create.
  Allocation allocation;
  for (int round = 0; round < kWarmUpRounds + kMeasuredRounds; ++round) {
    ThrowIfInterrupted();
    const std::string kernel_id = "c-" + std::to_string(round);
    double a = 0, d = 0;
    std::function<void()> turns[] = {[&] { a = TimeAgentCreate(agent, kernel_id, allocation); },
                                     [&] { d = TimeDirectCreate(agent_id, kernel_id, allocation); }};
    if (round % 2) std::swap(turns[0], turns[1]);  // so that neither side always goes first
    for (const auto& turn : turns) {
      turn();
      std::this_thread::sleep_for(kSettle);
    }
    if (round >= kWarmUpRounds) {
      agent_ms.Add(a);
      direct_ms.Add(d);
    }
  }
  PrintSamples("agent:  POST /v1/kernels -> RUNNING", agent_ms);
  PrintSamples("direct: engine create + start (same spec)", direct_ms);
  PrintRatio("agent/direct (medians)", agent_ms.Median() / direct_ms.Median(), "<= 1.10");
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("create");
  return RunBenchmark("bench_create", {agent_id, DirectOwner(agent_id)}, [&] { Run(agent_id); });
}
