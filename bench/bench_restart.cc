// bench_restart: how long an agent with 50 running kernels takes, after a
// SIGKILL, to be back and serving all of them: from spawning build/bin/slotd
// to the first GET /v1/kernels that lists all 50 RUNNING. Restore lists the
// agent's containers (owner-filtered) and parses their labels, so the
// baseline printed in the same run is that list call alone (what `docker ps
// --filter label=ai.backend.owner=<id>` costs).
//
// The 50 containers are made directly through the engine, exactly as the
// agent would write them (name, labels from KernelLabels, environment, memory
// limit), each holding 16m of memory and NO cpu core: the cpu plugin hands
// out whole exclusive cores and this machine has 2, so 50 kernels created
// through the API (which requires cpu >= 1) cannot run at once. Their
// request label still says cpu 1, as every valid request does; restore
// claims what the allocation label holds, an empty cpu list.
#include <csignal>
#include <cstdio>

#include "common.h"

namespace slotd::bench {
namespace {

constexpr int kKernels = 50;       // owned kernels running during the restarts
constexpr int kRestarts = 5;       // measured restarts
constexpr char kMemory[] = "16m";  // each kernel's memory
constexpr auto kRestartLimit = std::chrono::seconds(30);  // a restart slower than this fails the run

// Spawns the (stopped) agent again and returns the milliseconds from the
// spawn to the first list of all kernels.
double TimeRestart(testing::AgentProcess& agent) {
  return TimeSpawnUntilReady(agent, [&] { return ListsAllRunning(agent.socket_path(), kKernels); }, kRestartLimit,
                             "the restarted agent listing all " + std::to_string(kKernels) + " kernels");
}

void Run(const std::string& agent_id) {
  testing::AgentProcess agent(BenchAgentOptions(agent_id));
  PrintHeader("bench_restart", agent.options());
  CreateCorelessKernels(agent_id, "r", kKernels, kMemory);
  StartAgent(agent);
  PollUntil([&] { return ListsAllRunning(agent.socket_path(), kKernels); }, std::chrono::seconds(5),
            "the first agent adopting the " + std::to_string(kKernels) + " kernels");
  std::printf("  %d owned kernels running (16m each, no cpu core: the machine has 2); %d restarts after SIGKILL\n",
              kKernels, kRestarts);

  Samples restart_ms, list_ms;
  for (int round = 0; round < kRestarts; ++round) {
    ThrowIfInterrupted();
    agent.Kill(SIGKILL);
    restart_ms.Add(TimeRestart(agent));
    list_ms.Add(TimeOwnerList(agent_id, kKernels));
  }
  PrintSamples("agent: spawn -> GET /v1/kernels lists all 50", restart_ms);
  PrintSamples("baseline: one owner-filtered engine list (docker ps)", list_ms);
  PrintRatio("restart/list (medians)", restart_ms.Median() / list_ms.Median(), "restart median < 1000 ms");
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("restart");
  return RunBenchmark("bench_restart", {agent_id}, [&] { Run(agent_id); });
}
