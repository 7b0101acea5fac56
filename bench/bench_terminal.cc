// bench_terminal: the round trip of one keystroke through `slotctl exec -it`
// (slotctl -> the agent's upgraded connection -> the engine's exec -> the
// kernel's terminal, which echoes it, and back) compared with `docker exec
// -it` into the same container: the time from typing a key on a
// pseudo-terminal to its echo on that terminal. Both sessions stay open;
// they take turns, a burst of keys each.
#include <cstdio>
#include <string>

#include "common.h"
#include "integration/pty_session.h"

namespace slotd::bench {
namespace {

constexpr int kRounds = 20;       // turns of each session
constexpr int kKeysPerRound = 20; // keystrokes per turn, the first of each turn not counted

// Types keys one by one on `session`, each after the echo of the last; adds
// each round trip (but the first) to `samples`.
void TypeBurst(testing::PtySession& session, Samples& samples, const std::string& what) {
  for (int i = 0; i < kKeysPerRound; ++i) {
    const std::string key(1, static_cast<char>('a' + i % 26));
    auto start = Clock::now();
    if (!session.Type(key) || !session.WaitFor(key, std::chrono::seconds(10)))
      throw BenchFailure(what + ": no echo of a keystroke within 10 s; the terminal showed: " + session.shown());
    if (i > 0) samples.Add(Millis(start, Clock::now()));
  }
}

void Run(const std::string& agent_id) {
  testing::AgentProcess agent(BenchAgentOptions(agent_id));
  StartAgent(agent);
  PrintHeader("bench_terminal", agent.options());
  CallAgent(agent, "POST", "/v1/kernels", KernelRequestBody("tty", "64m"), 201);
  testing::PtySession through_agent({std::string(SLOTD_BIN_DIR) + "/slotctl", "--socket", agent.socket_path(), "exec",
                                     "-it", "tty", "--", "cat"},
                                    24, 80);
  testing::PtySession direct({"docker", "exec", "-it", ContainerName(agent_id, "tty"), "cat"}, 24, 80);
  if (!through_agent.started() || !direct.started()) throw BenchFailure("cannot start the two terminal sessions");
  // Until a client has its terminal in raw mode, keys are echoed locally and held back.
  if (!through_agent.WaitForRawMode() || !direct.WaitForRawMode())
    throw BenchFailure("a terminal session did not start: " + through_agent.shown() + " / " + direct.shown());
  std::printf("  %d turns of %d keystrokes each way, into `cat` on the kernel's terminal\n", kRounds, kKeysPerRound);
  Samples agent_ms, direct_ms;
  for (int round = 0; round < kRounds; ++round) {
    ThrowIfInterrupted();
    if (round % 2) {
      TypeBurst(direct, direct_ms, "docker exec -it");
      TypeBurst(through_agent, agent_ms, "slotctl exec -it");
    } else {
      TypeBurst(through_agent, agent_ms, "slotctl exec -it");
      TypeBurst(direct, direct_ms, "docker exec -it");
    }
  }
  PrintSamples("agent:  slotctl exec -it, key to echo", agent_ms);
  PrintSamples("direct: docker exec -it, key to echo", direct_ms);
  PrintRatio("agent/direct (medians)", agent_ms.Median() / direct_ms.Median(), "none; printed");
  CallAgent(agent, "DELETE", "/v1/kernels/tty", nullptr, 200);
}

}  // namespace
}  // namespace slotd::bench

int main() {
  using namespace slotd::bench;
  const std::string agent_id = UniqueAgentId("tty");
  return RunBenchmark("bench_terminal", {agent_id}, [&] { Run(agent_id); });
}
