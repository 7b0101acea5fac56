// Health checks: what a create request may ask the agent to check of a
// running kernel (an exec, an HTTP GET or a TCP connect, how often, and what
// an unhealthy kernel comes to), read from the request's JSON and written
// back in the same form, and the pure rule that turns a kernel's probe
// results into its health (RecordProbe), tested from tables.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace slotd {

struct ContainerConfig;

// What is probed.
enum class ProbeKind { kExec, kHttp, kTcp };
// What an unhealthy kernel comes to: reported only, its container stopped
// and ended as its restart policy says ("unhealthy"), or stopped for good.
enum class OnUnhealthy { kNone, kRestart, kStop };
const char* OnUnhealthyName(OnUnhealthy on_unhealthy);  // "none", "restart", "stop"

// A request's health check.
struct HealthCheck {
  ProbeKind kind = ProbeKind::kExec;
  std::vector<std::string> command;  // kExec: run in the kernel; exit code 0 passes
  int port = 0;                      // kHttp, kTcp: a container port of the request's `ports`
  std::string path = "/";            // kHttp: GET this; a status from 200 to 399 passes
  std::optional<std::chrono::milliseconds> interval;      // unset: [container] health-interval
  std::optional<std::chrono::milliseconds> timeout;       // unset: [container] health-timeout
  std::optional<std::chrono::milliseconds> start_period;  // failures in it do not count; unset: none
  std::optional<int> failures;   // consecutive failures that make it unhealthy; unset: 3
  std::optional<int> successes;  // consecutive passes that make it healthy again; unset: 1
  OnUnhealthy on_unhealthy = OnUnhealthy::kNone;

  bool operator==(const HealthCheck&) const = default;
};

// Reads the request's `health` object into `out` (unset when absent);
// `ports` are the container ports the request publishes. kInvalidArgument
// names the field. Exec commands are bounded by `max_args` and `max_bytes`.
Status ParseHealthCheck(const nlohmann::json& body, const std::vector<int>& ports, size_t max_args,
                        size_t max_bytes, std::optional<HealthCheck>& out);
// The `health` object ParseHealthCheck reads (only the fields that are set).
nlohmann::json HealthCheckJson(const HealthCheck& check);

// A check with the agent's defaults and bounds applied.
struct HealthRule {
  HealthCheck check;
  std::chrono::milliseconds interval{0};
  std::chrono::milliseconds timeout{0};  // at most the interval
  std::chrono::milliseconds start_period{0};
  int failures = 3;
  int successes = 1;
};
// `check` under `container`'s defaults; an interval below [container]
// health-min-interval is raised to it.
HealthRule ResolveHealth(const HealthCheck& check, const ContainerConfig& container);

// The most of a probe's output a kernel's record keeps.
inline constexpr size_t kMaxHealthOutput = 1024;

enum class HealthStatus { kStarting, kHealthy, kUnhealthy };
const char* HealthStatusName(HealthStatus status);  // "starting", "healthy", "unhealthy"

// What the agent knows of a running kernel's health since its container
// (last) started.
struct HealthState {
  HealthStatus status = HealthStatus::kStarting;
  bool ready = false;  // a probe has passed
  int failing = 0;     // consecutive failures counted
  int passing = 0;     // consecutive passes
  int64_t checks = 0;  // probes recorded since its container started, passed or failed
  std::string last_failure;  // the last failed probe's output, at most kMaxHealthOutput bytes

  nlohmann::json ToJson() const;  // {"status", "failing", "last_failure"}
};

// What one probe changed.
struct HealthChange {
  bool became_ready = false;      // its first pass
  bool became_healthy = false;    // healthy after being unhealthy
  bool became_unhealthy = false;  // `failures` failures in a row
};

// Records one probe's result in `state`: a pass counts towards `successes`
// and makes the kernel ready; a failure, unless `in_start_period`, towards
// `failures`, and keeps `output` as the last failure's.
HealthChange RecordProbe(HealthState& state, const HealthRule& rule, bool passed, const std::string& output,
                         bool in_start_period);

}  // namespace slotd
