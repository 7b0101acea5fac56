// The kernel's state machine as data: every legal change of a kernel's
// state (a transition), the states it leaves and may reach, and the event
// it publishes. KernelTable (agent/kernel_table.h) refuses any change these
// rows do not allow; tests walk every row from every place.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/event_type.h"
#include "model/kernel.h"

namespace slotd {

// The changes of a kernel's state. "(none)": the kernel is not in the table.
enum class KernelTransition {
  kReserve,     // (none) -> PULLING | PREPARING: a create allocates what it asked for
  kPrepared,    // PULLING -> PREPARING: its image is on the node
  kAdopt,       // (none) -> PREPARING | WARM | RUNNING | BACKOFF (claims its allocation) | TERMINATED | ERROR: from the engine
  kStarted,     // PREPARING -> RUNNING: its container started
  kWarmed,      // PREPARING -> WARM: its container, made for a warm pool, started
  kGiven,       // WARM -> RUNNING: a create was given it
  kResumed,     // BACKOFF | TERMINATED | ERROR -> RUNNING (claims again): its container runs again
  kRefused,     // TERMINATED | ERROR -> ERROR: its container runs again on resources it cannot claim
  kRestartHeld,    // RUNNING | BACKOFF | TERMINATED | ERROR -> the same (claims): a restart holds it (KernelHold)
  kRestartUnheld,  // RUNNING | BACKOFF | TERMINATED | ERROR -> the same (frees unless RUNNING | BACKOFF): the restart failed
  kRestarted,   // RUNNING | BACKOFF | TERMINATED | ERROR -> RUNNING: RestartKernel restarted its container
  kBackedOff,   // RUNNING | BACKOFF -> BACKOFF (keeps its resources): it ended and its restart policy waits
  kPolicyRestarted,  // BACKOFF -> RUNNING: its restart policy started it again
  kStopping,    // WARM | RUNNING | BACKOFF | TERMINATED | ERROR -> TERMINATING: a call stops its container
  kStopFailed,  // TERMINATING -> the state before it: the container could not be stopped
  kTerminated,  // PREPARING | WARM | RUNNING | BACKOFF | TERMINATING | ERROR -> TERMINATED (frees): it ended
  kDeleted,     // TERMINATING -> (none) (frees): DeleteKernel removed its container
  kForgotten,   // any -> (none) (frees): its container is gone
  kAbandoned,   // PULLING | PREPARING -> (none) (frees): a create failed before announcing it
};
using KernelPlace = std::optional<KernelState>;  // a state, or nullopt: not in the table
// One row of the table: a transition, the places it leaves and may reach,
// and the event it publishes (nullopt: none).
struct KernelRule {
  KernelTransition transition;
  const char* name;
  std::vector<KernelPlace> from;
  std::vector<KernelPlace> to;
  std::optional<EventType> event;
};
// The legal transitions, one row each.
const std::vector<KernelRule>& KernelRules();
// The row of `transition`.
const KernelRule& RuleOf(KernelTransition transition);
// Every place: nullopt and each state.
std::vector<KernelPlace> KernelPlaces();
// "(none)" for nullopt, else the state's name.
std::string PlaceName(KernelPlace place);

}  // namespace slotd
