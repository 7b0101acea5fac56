#include "model/kernel_rules.h"

#include <algorithm>

namespace slotd {

namespace {

using Place = KernelPlace;
using T = KernelTransition;
constexpr Place kNone = std::nullopt;
constexpr Place kPulling = KernelState::kPulling;
constexpr Place kPreparing = KernelState::kPreparing;
constexpr Place kWarm = KernelState::kWarm;
constexpr Place kRunning = KernelState::kRunning;
constexpr Place kBackoff = KernelState::kBackoff;
constexpr Place kTerminating = KernelState::kTerminating;
constexpr Place kTerminated = KernelState::kTerminated;
constexpr Place kError = KernelState::kError;

}  // namespace

const std::vector<KernelRule>& KernelRules() {
  using E = EventType;
  static const std::vector<KernelRule> rules = {
      {T::kReserve, "reserve", {kNone}, {kPulling, kPreparing}, std::nullopt},
      {T::kPrepared, "prepared", {kPulling}, {kPreparing}, std::nullopt},
      {T::kAdopt, "adopt", {kNone}, {kPreparing, kWarm, kRunning, kBackoff, kTerminated, kError}, std::nullopt},
      {T::kStarted, "started", {kPreparing}, {kRunning}, E::kKernelStarted},
      {T::kWarmed, "warmed", {kPreparing}, {kWarm}, E::kKernelWarm},
      {T::kGiven, "given", {kWarm}, {kRunning}, E::kKernelStarted},
      {T::kResumed, "resumed", {kBackoff, kTerminated, kError}, {kRunning}, E::kKernelStarted},
      {T::kRefused, "refused", {kTerminated, kError}, {kError}, std::nullopt},
      {T::kRestartHeld, "held to restart", {kRunning, kBackoff, kTerminated, kError},
       {kRunning, kBackoff, kTerminated, kError}, std::nullopt},
      {T::kRestartUnheld, "restart given up", {kRunning, kBackoff, kTerminated, kError},
       {kRunning, kBackoff, kTerminated, kError}, std::nullopt},
      {T::kRestarted, "restarted", {kRunning, kBackoff, kTerminated, kError}, {kRunning}, E::kKernelStarted},
      {T::kBackedOff, "backed off", {kRunning, kBackoff}, {kBackoff}, E::kKernelBackoff},
      {T::kPolicyRestarted, "restarted by its policy", {kBackoff}, {kRunning}, E::kKernelRestarted},
      {T::kStopping, "stopping", {kWarm, kRunning, kBackoff, kTerminated, kError}, {kTerminating}, std::nullopt},
      {T::kStopFailed, "stop failed", {kTerminating}, {kWarm, kRunning, kBackoff, kTerminated, kError}, std::nullopt},
      {T::kTerminated, "terminated", {kPreparing, kWarm, kRunning, kBackoff, kTerminating, kError}, {kTerminated},
       E::kKernelTerminated},
      {T::kDeleted, "deleted", {kTerminating}, {kNone}, E::kKernelRemoved},
      {T::kForgotten, "forgotten", {kPulling, kPreparing, kWarm, kRunning, kBackoff, kTerminating, kTerminated, kError},
       {kNone}, E::kKernelRemoved},
      {T::kAbandoned, "abandoned", {kPulling, kPreparing}, {kNone}, std::nullopt},
  };
  return rules;
}

const KernelRule& RuleOf(KernelTransition transition) {
  const auto& rules = KernelRules();
  return *std::find_if(rules.begin(), rules.end(), [&](const KernelRule& r) { return r.transition == transition; });
}

std::vector<KernelPlace> KernelPlaces() {
  return {kNone, kPulling, kPreparing, kWarm, kRunning, kBackoff, kTerminating, kTerminated, kError};
}

std::string PlaceName(KernelPlace place) { return place ? KernelStateName(*place) : "(none)"; }

}  // namespace slotd
