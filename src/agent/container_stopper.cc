#include "agent/container_stopper.h"

#include <algorithm>

#include <spdlog/spdlog.h>

namespace slotd {

ContainerStopper::ContainerStopper(ContainerEngine& engine, const Clock& clock, std::chrono::milliseconds cap)
    : engine_(engine), clock_(clock), cap_(std::chrono::duration_cast<std::chrono::seconds>(cap)) {}

std::chrono::seconds ContainerStopper::TimeoutOf(const StopContract& contract) const {
  return std::min(contract.timeout.value_or(cap_), cap_);
}

ContainerStopper::Outcome ContainerStopper::Stop(const std::string& container_id, const StopContract& contract) const {
  // One budget for the whole stop, counted from here: what the pre_stop
  // command spends is taken from the stop signal's wait.
  const std::chrono::seconds timeout = TimeoutOf(contract);
  std::chrono::seconds signal_wait = timeout;
  if (!contract.pre_stop.empty() && timeout.count() > 0) {
    const Clock::TimePoint began = clock_.Now();
    Result<ExecResult> ran = engine_.Exec(container_id, contract.pre_stop, timeout, nullptr, nullptr);
    if (!ran.ok()) {
      spdlog::info("container {}: its pre_stop command did not run to its end: {}", container_id,
                   ran.status().message());
    } else if (ran->exit_code != 0) {
      spdlog::info("container {}: its pre_stop command exited with code {}", container_id, ran->exit_code);
    }
    // The whole seconds left, rounded down, so that SIGKILL comes no later
    // than `timeout` after the start; none left: at once.
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - began);
    signal_wait = std::chrono::duration_cast<std::chrono::seconds>(
        std::max(std::chrono::milliseconds(0), std::chrono::milliseconds(timeout) - spent));
  }
  Outcome outcome{engine_.Stop(container_id, signal_wait), std::nullopt, std::nullopt};
  if (outcome.stopped.ok()) {
    if (auto info = engine_.Inspect(container_id); info.ok()) {
      outcome.exit_code = info->exit_code;
      if (info->finished_ms > 0) outcome.ended_at = info->finished_ms / 1000;
    }
  }
  return outcome;
}

}  // namespace slotd
