// ContainerStopper: the one way the agent stops a kernel's container, as
// its stop contract says: its pre_stop command, then its stop signal, then
// SIGKILL once its stop_timeout (at most the agent's [container]
// stop-timeout) has passed since the stop began, pre_stop included; then
// the exit code the engine recorded. Deletes, lifetime and idle ends,
// drains, failed health checks, device stops and intruders all stop
// through it.
//
// Thread-safety: holds no state; call it from any thread, never under the
// store's lock (it waits on the engine for up to the stop timeout).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/status.h"
#include "engine/container_engine.h"
#include "model/kernel_policy.h"

namespace slotd {

class ContainerStopper {
 public:
  // `engine` and `clock` must outlive it; `cap`: [container] stop-timeout.
  ContainerStopper(ContainerEngine& engine, const Clock& clock, std::chrono::milliseconds cap);

  // How long a kernel of `contract` gets to stop: its stop_timeout, at most
  // the cap (its default), in whole seconds as the engine takes it.
  std::chrono::seconds TimeoutOf(const StopContract& contract) const;

  // What stopping a container came to: the engine's answer and, when it
  // stopped, its exit code and when it ended (unset when the inspect after
  // it failed).
  struct Outcome {
    Status stopped;
    std::optional<int> exit_code;
    std::optional<int64_t> ended_at;
  };
  // Stops `container_id` as `contract` says and reads its exit code. The
  // stop signal waits for what pre_stop left of TimeoutOf(contract),
  // rounded down to whole seconds, so SIGKILL comes no later than that
  // after the start.
  Outcome Stop(const std::string& container_id, const StopContract& contract) const;

 private:
  ContainerEngine& engine_;
  const Clock& clock_;
  const std::chrono::seconds cap_;
};

}  // namespace slotd
