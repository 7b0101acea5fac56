// bench_crash: how soon a crashed kernel runs again. A kernel has its PID 1
// killed (SIGKILL from the host, as a crash would); the time is from the
// container's end to its next start, both as the engine records them
// (State.FinishedAt, then State.StartedAt of the run that follows), so no
// poll adds to it. Measured: the kernel's restart policy ("always", no
// back-off). Baseline, in the same run and on the same kind of container:
// a kernel without a policy whose container is given the engine's own
// restart policy (`docker update --restart always`), killed the same way.
// The engine waits 100 ms before its first restart, which the first ratio
// leaves out. Rounds alternate between the two.
#include <signal.h>

#include <cstdio>

#include "common.h"

namespace slotd::bench {
namespace {

constexpr int kWarmUpRounds = 2;     // rounds per restarter run first and not counted
constexpr int kMeasuredRounds = 15;  // rounds per restarter counted
constexpr double kEngineBackoffMs = 100;  // the engine's wait before a container's first restart
constexpr auto kRestartLimit = std::chrono::seconds(20);

// Who restarts the crashed container in a round.
enum class Restarter { kAgent, kEngine };

// SIGKILLs the host process that is PID 1 of `container_id`; returns when it ended.
void KillPidOne(const std::string& container_id) {
  const ContainerInfo info = Check(testing::Engine().Inspect(container_id), "inspecting " + container_id);
  if (!info.running || info.pid <= 0) throw BenchFailure("container " + container_id + " is not running");
  if (::kill(info.pid, SIGKILL) != 0) throw BenchFailure("kill -9 " + std::to_string(info.pid) + " failed");
}

// The container's last end and the start after it, in unix milliseconds,
// once the engine shows it running again after `min_finished_ms`.
double GapAfterCrash(const std::string& container_id, int64_t min_finished_ms) {
  ContainerInfo info;
  PollUntil(
      [&] {
        info = Check(testing::Engine().Inspect(container_id), "inspecting " + container_id);
        return info.running && info.finished_ms >= min_finished_ms && info.started_ms > info.finished_ms;
      },
      kRestartLimit, "container " + container_id + " running again");
  return static_cast<double>(info.started_ms - info.finished_ms);
}

// One round: a fresh container restarted by `restarter`; the milliseconds
// from its end to its next start, as the engine recorded them.
double TimeRestart(const testing::AgentProcess& agent, const std::string& name, Restarter restarter) {
  nlohmann::json body = KernelRequestBody(name, "32m");
  if (restarter == Restarter::kAgent)
    body["restart"] = {{"policy", "always"}, {"backoff", {{"initial", "0s"}, {"max", "0s"}}}};
  const std::string container_id = CallAgent(agent, "POST", "/v1/kernels", body, 201).value("container_id", "");
  if (restarter == Restarter::kEngine) {
    const testing::CommandResult update = testing::RunCommand({"docker", "update", "--restart", "always", container_id});
    if (update.exit_code != 0) throw BenchFailure("docker update --restart always: " + update.err);
  }
  const int64_t before_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  KillPidOne(container_id);
  const double gap = GapAfterCrash(container_id, before_ms - 1000);
  // The agent sees the kernel RUNNING again either way (restarted, or resumed: started outside slotd).
  PollUntil([&] { return CallAgent(agent, "GET", "/v1/kernels/" + name, nullptr, 200).value("state", "") == "RUNNING"; },
            kRestartLimit, "kernel " + name + " RUNNING again");
  if (restarter == Restarter::kEngine) testing::RunCommand({"docker", "update", "--restart", "no", container_id});
  CallAgent(agent, "DELETE", "/v1/kernels/" + name, nullptr, 200);
  return gap;
}

void Run(const std::string& agent_id) {
  testing::AgentProcess agent(BenchAgentOptions(agent_id));
  StartAgent(agent);
  PrintHeader("bench_crash", agent.options());
  std::printf("  %d warm-up + %d measured rounds per restarter, alternating; kill -9 of PID 1 from the host\n",
              kWarmUpRounds, kMeasuredRounds);
  Samples agent_ms, engine_ms;
  for (int round = 0; round < 2 * (kWarmUpRounds + kMeasuredRounds); ++round) {
    ThrowIfInterrupted();
    const Restarter restarter = round % 2 ? Restarter::kEngine : Restarter::kAgent;
    const double ms = TimeRestart(agent, "c-" + std::to_string(round), restarter);
    if (round < 2 * kWarmUpRounds) continue;
    (restarter == Restarter::kAgent ? agent_ms : engine_ms).Add(ms);
  }
  PrintSamples("agent:  end -> start again (restart always, back-off 0s)", agent_ms);
  PrintSamples("engine: end -> start again (docker update --restart always)", engine_ms);
  PrintRatio("agent / (engine - its 100 ms wait), medians", agent_ms.Median() / (engine_ms.Median() - kEngineBackoffMs),
             "<= 1.10");
  PrintRatio("agent / engine, medians", agent_ms.Median() / engine_ms.Median(), "printed");
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("crash");
  return RunBenchmark("bench_crash", {agent_id}, [&] { Run(agent_id); });
}
