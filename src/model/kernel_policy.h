// Kernel policies: what a create request may ask of a kernel's life besides
// its resources — how it is stopped (StopContract) and whether it is started
// again when it ends (RestartPolicy) — read from a request's JSON and written
// back in the same form, and the pure decision of what the end of a kernel's
// container means under its policy (DecideOnExit), tested from tables.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace slotd {

struct ContainerConfig;

// A signal a request may name, canonical ("SIGUSR1") from "SIGUSR1" or
// "USR1"; nullopt for any other text. The signals a process can catch or
// that end it: HUP INT QUIT ABRT KILL USR1 USR2 ALRM TERM PWR WINCH.
std::optional<std::string> ParseSignalName(std::string_view name);

// A signal sent once, some time before a kernel's lifetime ends (Slurm's --signal).
struct StopWarning {
  std::string signal;                     // "SIGUSR1"
  std::chrono::milliseconds before{0};    // how long before the end

  bool operator==(const StopWarning&) const = default;
};

// A duration of a request at `field` ("90s", "30m", "2h"), from `least` to
// `most`; the refusal names the field and the range ("must be at most 1h",
// "must be from 1s to 24h").
Result<std::chrono::milliseconds> ParseDurationField(const nlohmann::json& value, const std::string& field,
                                                     std::chrono::milliseconds least, std::chrono::milliseconds most);

// A command of a request at `field` (pre_stop, health.exec): a non-empty
// array of strings, at most `max_args` of `max_bytes` in all; the refusal
// names the field.
Result<std::vector<std::string>> ParseCommandField(const nlohmann::json& value, const std::string& field,
                                                   size_t max_args, size_t max_bytes);

// How a kernel is stopped by the agent (deleted, out of lifetime, drained, ...).
struct StopContract {
  std::string signal;  // "SIGUSR1"; empty: the image's STOPSIGNAL, else SIGTERM
  // How long the kernel gets after `pre_stop` starts before it is killed;
  // unset: [container] stop-timeout, which also caps it.
  std::optional<std::chrono::seconds> timeout;
  std::vector<std::string> pre_stop;  // a command run in the kernel before the signal; empty: none
  std::optional<StopWarning> warn_before;  // unset: no warning

  bool operator==(const StopContract&) const = default;
};

// When a kernel whose container ended is started again.
enum class RestartWhen { kNever, kOnFailure, kAlways };
const char* RestartWhenName(RestartWhen when);  // "never", "on-failure", "always"

// When a kernel counts as idle, and for how long before it is stopped ("idle").
struct IdlePolicy {
  std::optional<std::chrono::milliseconds> idle_for;  // unset: [container] idle-for, which also caps it
  std::optional<double> cpu_below;  // a fraction of its cores; unset: [container] idle-cpu-below
  std::optional<double> gpu_below;  // a fraction of its devices, where a meter measures them; unset: idle-gpu-below

  bool operator==(const IdlePolicy&) const = default;
};
// Reads the request's idle object into `out` (unset when absent):
// {"for": "30m", "cpu_below": 0.05, "gpu_below": 0.05}. kInvalidArgument names the field.
Status ParseIdlePolicy(const nlohmann::json& body, std::optional<IdlePolicy>& out);
// The idle object ParseIdlePolicy reads (only the fields that are set).
nlohmann::json IdlePolicyJson(const IdlePolicy& policy);
// An idle policy with the agent's defaults and cap applied; `idle_for` 0: never idle.
struct IdleRule {
  std::chrono::milliseconds idle_for{0};
  double cpu_below = 0;
  double gpu_below = 0;
};
// `policy` (unset: the request has none) under `container`'s defaults and cap.
IdleRule ResolveIdle(const std::optional<IdlePolicy>& policy, const ContainerConfig& container);

// A request's restart policy.
struct RestartPolicy {
  RestartWhen when = RestartWhen::kNever;
  std::optional<int64_t> max;  // the most restarts; unset: [container] restart-max
  std::optional<std::chrono::milliseconds> backoff_initial;  // unset: [container] restart-backoff-initial
  std::optional<std::chrono::milliseconds> backoff_max;      // unset: [container] restart-backoff-max

  bool operator==(const RestartPolicy&) const = default;
};

// Reads the request's stop_signal, stop_timeout ("30s", 0s to 1h),
// pre_stop (an array of strings, at most `max_args` of `max_bytes` in all)
// and warn_before ({"signal": "SIGUSR1", "before": "5m"}, 1s to 24h) into `out`. kInvalidArgument names the field.
Status ParseStopContract(const nlohmann::json& body, size_t max_args, size_t max_bytes, StopContract& out);
// Reads the request's restart object into `out`: {"policy": ..., "max": N,
// "backoff": {"initial": "1s", "max": "5m"}}. kInvalidArgument names the field.
Status ParseRestartPolicy(const nlohmann::json& body, RestartPolicy& out);
// Adds the contract's fields that are set to `request` in the form ParseStopContract reads.
void WriteStopContract(const StopContract& contract, nlohmann::json& request);
// The restart object ParseRestartPolicy reads (only the fields that are set).
nlohmann::json RestartPolicyJson(const RestartPolicy& policy);

// A restart policy with the agent's defaults and caps applied.
struct RestartRule {
  RestartWhen when = RestartWhen::kNever;
  int64_t max = 0;  // 0: no limit
  std::chrono::milliseconds backoff_initial{0};
  std::chrono::milliseconds backoff_max{0};
};
// `policy` under `container`'s defaults; its max and its waits no larger
// than the agent's caps allow.
RestartRule ResolveRestart(const RestartPolicy& policy, const ContainerConfig& container);

// The wait before the restart that follows `restarts` earlier ones: the
// initial wait doubled once per earlier restart, at most backoff_max.
std::chrono::milliseconds BackoffBefore(const RestartRule& rule, int64_t restarts);

// How a kernel's container ended, as far as its policy cares.
struct KernelEnd {
  std::optional<int> exit_code;  // unset: not known (it could not be started)
  bool out_of_memory = false;    // killed by the kernel's own memory limit
  int64_t ended_at_ms = 0;       // when, in unix milliseconds
  std::string why;               // "exited with code 1", "out of memory", "restart failed: ..."
  bool forced = false;           // ended by the agent for a failure (unhealthy), whatever its exit code
  // Ended by the agent for what no restart mends (it ran as a user it may
  // not): TERMINATED whatever its restart rule says.
  bool final = false;
};

// What the end of a kernel's container comes to.
struct ExitOutcome {
  bool restart = false;         // wait, then start it again
  int64_t restart_at_ms = 0;    // when, if restart
  std::string reason;           // the kernel's reason: end.why, or "restart limit reached"
};

// The decision for a kernel that has been restarted `restarts` times and
// whose lifetime ends at `deadline_s` (unix seconds; unset: never), when
// its container ends as `end` says, at `now_ms`: a restart when the rule
// restarts such an end, the end is not final, the limit is not reached and
// the lifetime has not run out; else the end, with the limit as its reason
// when that stopped it.
ExitOutcome DecideOnExit(const RestartRule& rule, int64_t restarts, const KernelEnd& end,
                         std::optional<int64_t> deadline_s, int64_t now_ms);

}  // namespace slotd
