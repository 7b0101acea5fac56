// bench_death: how soon the agent notices that a kernel's container died:
// from a kill through the engine (`docker kill`) to GET /v1/kernels/{id}
// showing TERMINATED, polled every millisecond. The baseline, in the same
// run, is how soon the engine itself reports the container as no longer
// running (inspect polled every millisecond). Rounds alternate between the
// two observers; every kernel is created through the agent.
#include <cstdio>

#include "common.h"

namespace slotd::bench {
namespace {

constexpr int kWarmUpRounds = 2;     // rounds per observer run first and not counted
constexpr int kMeasuredRounds = 20;  // rounds per observer counted
constexpr char kMemory[] = "64m";    // each kernel's memory
constexpr auto kNoticeLimit = std::chrono::seconds(10);  // a death noticed later than this fails the run

// Who watches for the death in a round.
enum class Observer { kAgent, kEngine };

// Whether the agent reports kernel `kernel_id` as TERMINATED.
bool AgentShowsTerminated(const testing::AgentProcess& agent, const std::string& kernel_id) {
  HttpResponse res = agent.Call("GET", "/v1/kernels/" + kernel_id);
  if (res.status != 200) throw BenchFailure("GET /v1/kernels/" + kernel_id + ": HTTP " + std::to_string(res.status) + ": " + res.body);
  return nlohmann::json::parse(res.body, nullptr, false).value("state", "") == "TERMINATED";
}

// Whether the engine reports container `container_id` as not running.
bool EngineShowsExited(const std::string& container_id) {
  return !Check(testing::Engine().Inspect(container_id), "inspecting container " + container_id).running;
}

// Creates kernel `kernel_id` through the agent, kills its container through
// the engine and returns the milliseconds until `observer` reports the
// death; then waits for the agent to notice (untimed) and deletes the kernel.
double TimeDeath(const testing::AgentProcess& agent, const std::string& kernel_id, Observer observer) {
  nlohmann::json kernel = CallAgent(agent, "POST", "/v1/kernels", KernelRequestBody(kernel_id, kMemory), 201);
  const std::string container_id = kernel.value("container_id", "");
  if (kernel.value("state", "") != "RUNNING" || container_id.empty())
    throw BenchFailure("kernel " + kernel_id + " is not RUNNING after its create: " + kernel.dump());
  auto agent_noticed = [&] { return AgentShowsTerminated(agent, kernel_id); };

  auto kill = Clock::now();
  Check(testing::Engine().Kill(container_id), "killing container " + container_id);
  Clock::time_point noticed =
      observer == Observer::kAgent
          ? PollUntil(agent_noticed, kNoticeLimit, "the agent showing kernel " + kernel_id + " TERMINATED")
          : PollUntil([&] { return EngineShowsExited(container_id); }, kNoticeLimit,
                      "the engine showing container " + container_id + " exited");
  PollUntil(agent_noticed, kNoticeLimit, "the agent showing kernel " + kernel_id + " TERMINATED");
  CallAgent(agent, "DELETE", "/v1/kernels/" + kernel_id, nullptr, 200);
  return Millis(kill, noticed);
}

void Run(const std::string& agent_id) {
  testing::AgentProcess agent(BenchAgentOptions(agent_id));
  StartAgent(agent);
  PrintHeader("bench_death", agent.options());
  std::printf("  %d warm-up + %d measured rounds per observer, alternating; polling every 1 ms\n", kWarmUpRounds,
              kMeasuredRounds);

  Samples agent_ms, engine_ms;
  for (int round = 0; round < 2 * (kWarmUpRounds + kMeasuredRounds); ++round) {
    ThrowIfInterrupted();
    const Observer observer = round % 2 ? Observer::kEngine : Observer::kAgent;
    double ms = TimeDeath(agent, "d-" + std::to_string(round), observer);
    if (round < 2 * kWarmUpRounds) continue;
    (observer == Observer::kAgent ? agent_ms : engine_ms).Add(ms);
  }
  PrintSamples("agent:  kill -> GET /v1/kernels/{id} TERMINATED", agent_ms);
  PrintSamples("engine: kill -> inspect shows not running", engine_ms);
  PrintRatio("agent/engine (medians)", agent_ms.Median() / engine_ms.Median(), "agent median < 100 ms");
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("death");
  return RunBenchmark("bench_death", {agent_id}, [&] { Run(agent_id); });
}
