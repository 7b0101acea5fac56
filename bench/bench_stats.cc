// bench_stats: what stats cost with 100 running kernels.
//
//  - Sweep: the agent's own sweep of all 100 kernels (its cgroup reads, as
//    GET /v1/stats reports in sweep_us, over several sweeps) against what a
//    user would otherwise do: GET /containers/{id}/stats?stream=false through
//    the Engine API for the same 100 containers, one after another, in the
//    same run. Prints both and the ratio. Target: the sweep under 10 ms, at
//    least 1,000 times faster.
//  - Footprint: the agent's resident memory (VmRSS) and CPU (utime + stime
//    from /proc/<pid>/stat, per second of wall time) with 0 and with 100
//    kernels at a 1-second stats interval. Target: under 30 MiB and under 2 %
//    of one core with 100 kernels.
//
// The 100 containers are made directly through the engine exactly as the
// agent would write them (see bench_restart: no cpu core each, because the
// cpu plugin hands out whole exclusive cores), and the agent adopts them.
#include <cstdio>

#include "common.h"

namespace slotd::bench {
namespace {

constexpr int kKernels = 100;
constexpr char kMemory[] = "16m";
constexpr int kSweeps = 10;                                  // agent sweeps sampled
constexpr auto kFootprintWindow = std::chrono::seconds(20);  // CPU is averaged over this

// Reads the engine's stats of every kernel container, one after another;
// returns the total milliseconds.
double EngineSweep(const std::string& agent_id) {
  DockerEngine& engine = testing::Engine();
  auto containers = Check(engine.List({std::string(label::kOwner) + "=" + agent_id}), "listing the containers");
  if (static_cast<int>(containers.size()) != kKernels)
    throw BenchFailure("the engine lists " + std::to_string(containers.size()) + " containers, expected " +
                       std::to_string(kKernels));
  const auto start = Clock::now();
  for (const auto& c : containers) {
    ThrowIfInterrupted();
    Check(engine.Stats(c.id), "GET /containers/" + c.id + "/stats?stream=false");
  }
  return Millis(start, Clock::now());
}

void Run(const std::string& agent_id) {
  testing::AgentOptions options = BenchAgentOptions(agent_id);
  options.container_toml = "stats-interval = \"1s\"\n";
  testing::AgentProcess agent(options);
  PrintHeader("bench_stats", agent.options());
  StartAgent(agent);
  const Usage idle = MeasureUsage(agent.pid(), "0 kernels", kFootprintWindow);

  CreateCorelessKernels(agent_id, "s", kKernels, kMemory);
  PollUntil([&] { return CallAgent(agent, "GET", "/v1/kernels", nullptr, 200)["kernels"].size() == kKernels; },
            std::chrono::seconds(30), "the agent adopting the " + std::to_string(kKernels) + " kernels");
  std::printf("  %d owned kernels running (16m each, no cpu core); stats-interval 1s, stats-type cgroup\n", kKernels);

  const Samples sweeps = AgentSweeps(agent, kKernels, kSweeps);
  const Usage busy = MeasureUsage(agent.pid(), "100 kernels", kFootprintWindow);
  std::printf("  engine route: GET /containers/{id}/stats?stream=false for %d containers, one after another...\n",
              kKernels);
  std::fflush(stdout);
  const double engine_ms = EngineSweep(agent_id);

  PrintSamples("agent: one stats sweep of 100 kernels (sweep_us)", sweeps);
  std::printf("  %-52s %10.1f ms  (%.1f ms per container)\n", "engine: stats of the same 100 containers", engine_ms,
              engine_ms / kKernels);
  PrintRatio("engine/agent sweep (median)", engine_ms / sweeps.Median(), ">= 1000, sweep < 10 ms");
  std::printf("  footprint with 0 kernels: %.1f MiB resident, %.2f %% of one core\n", idle.resident_mib, idle.core_percent);
  std::printf("  footprint with 100 kernels: %.1f MiB resident (target < 30), %.2f %% of one core (target < 2)\n",
              busy.resident_mib, busy.core_percent);
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("stats");
  return RunBenchmark("bench_stats", {agent_id}, [&] { Run(agent_id); });
}
