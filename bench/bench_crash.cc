// bench_crash: how soon a crashed kernel runs again. A kernel has its PID 1
// killed (SIGKILL from the host, as a crash would); the time is from the
// kill to the container's next start as the engine records it
// (State.StartedAt). The death is timed by the kill, not by the engine's
// State.FinishedAt: when the engine restarts a container itself it stamps
// FinishedAt only after it has cleaned up the ended task, tens of
// milliseconds after the death, while for a container it does not restart
// FinishedAt is the death itself; both offsets are printed. Measured: the
// kernel's restart policy ("always", no back-off). Baseline, in the same run
// and on the same kind of container: a kernel without a policy whose
// container is given the engine's own restart policy (`docker update
// --restart always`), killed the same way. The engine waits 100 ms before a
// container's first restart, which the first ratio leaves out. Rounds
// alternate between the two.
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

// Unix time in milliseconds, with the microseconds as a fraction.
double UnixMs() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(now).count()) / 1000.0;
}

// SIGKILLs the host process that is PID 1 of `container_id`; returns the
// unix milliseconds at which the kill was sent.
double KillPidOne(const std::string& container_id) {
  const ContainerInfo info = Check(testing::Engine().Inspect(container_id), "inspecting " + container_id);
  if (!info.running || info.pid <= 0) throw BenchFailure("container " + container_id + " is not running");
  const double killed_ms = UnixMs();
  if (::kill(info.pid, SIGKILL) != 0) throw BenchFailure("kill -9 " + std::to_string(info.pid) + " failed");
  return killed_ms;
}

// What the engine recorded of a crash: its end and the start after it.
struct CrashRecord {
  double finished_ms = 0;
  double started_ms = 0;
};

// Once the engine shows `container_id` running again after `killed_ms`.
CrashRecord RecordAfterCrash(const std::string& container_id, double killed_ms) {
  ContainerInfo info;
  PollUntil(
      [&] {
        info = Check(testing::Engine().Inspect(container_id), "inspecting " + container_id);
        return info.running && info.finished_ms + 1 >= killed_ms && info.started_ms > info.finished_ms;
      },
      kRestartLimit, "container " + container_id + " running again");
  return {static_cast<double>(info.finished_ms), static_cast<double>(info.started_ms)};
}

// The times of one round.
struct RoundTimes {
  double kill_to_start_ms = 0;   // from the kill to the next start
  double kill_to_finish_ms = 0;  // from the kill to the end the engine recorded
};

// One round: a fresh container restarted by `restarter`, killed once.
RoundTimes TimeRestart(const testing::AgentProcess& agent, const std::string& name, Restarter restarter) {
  nlohmann::json body = KernelRequestBody(name, "32m");
  if (restarter == Restarter::kAgent)
    body["restart"] = {{"policy", "always"}, {"backoff", {{"initial", "0s"}, {"max", "0s"}}}};
  const std::string container_id = CallAgent(agent, "POST", "/v1/kernels", body, 201).value("container_id", "");
  if (restarter == Restarter::kEngine) {
    const testing::CommandResult update = testing::RunCommand({"docker", "update", "--restart", "always", container_id});
    if (update.exit_code != 0) throw BenchFailure("docker update --restart always: " + update.err);
  }
  const double killed_ms = KillPidOne(container_id);
  const CrashRecord record = RecordAfterCrash(container_id, killed_ms);
  // The agent sees the kernel RUNNING again either way (restarted, or resumed: started outside slotd).
  PollUntil([&] { return CallAgent(agent, "GET", "/v1/kernels/" + name, nullptr, 200).value("state", "") == "RUNNING"; },
            kRestartLimit, "kernel " + name + " RUNNING again");
  if (restarter == Restarter::kEngine) testing::RunCommand({"docker", "update", "--restart", "no", container_id});
  CallAgent(agent, "DELETE", "/v1/kernels/" + name, nullptr, 200);
  return {record.started_ms - killed_ms, record.finished_ms - killed_ms};
}

void Run(const std::string& agent_id) {
  testing::AgentProcess agent(BenchAgentOptions(agent_id));
  StartAgent(agent);
  PrintHeader("bench_crash", agent.options());
  std::printf("  %d warm-up + %d measured rounds per restarter, alternating; kill -9 of PID 1 from the host\n",
              kWarmUpRounds, kMeasuredRounds);
  Samples agent_ms, engine_ms, agent_finish_ms, engine_finish_ms;
  for (int round = 0; round < 2 * (kWarmUpRounds + kMeasuredRounds); ++round) {
    ThrowIfInterrupted();
    const Restarter restarter = round % 2 ? Restarter::kEngine : Restarter::kAgent;
    const RoundTimes times = TimeRestart(agent, "c-" + std::to_string(round), restarter);
    if (round < 2 * kWarmUpRounds) continue;
    (restarter == Restarter::kAgent ? agent_ms : engine_ms).Add(times.kill_to_start_ms);
    (restarter == Restarter::kAgent ? agent_finish_ms : engine_finish_ms).Add(times.kill_to_finish_ms);
  }
  PrintSamples("agent:  kill -> FinishedAt (as the engine stamps it)", agent_finish_ms);
  PrintSamples("engine: kill -> FinishedAt (as the engine stamps it)", engine_finish_ms);
  PrintSamples("agent:  kill -> started again (restart always, back-off 0s)", agent_ms);
  PrintSamples("engine: kill -> started again (docker update --restart always)", engine_ms);
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
