#include "model/health_check.h"

#include <algorithm>

#include "model/kernel_policy.h"
#include "common/units.h"
#include "config/config.h"

namespace slotd {

using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kMaxHealthPeriod{24 * 3'600'000};
const char* kOnUnhealthyWords[] = {"none", "restart", "stop"};
const char* kHealthStatusWords[] = {"starting", "healthy", "unhealthy"};

Status HealthRefused(const std::string& field, const std::string& what) {
  return Status::InvalidArgument("health." + field + ": " + what);
}

// A container port of `probe` that the request publishes.
Result<int> ProbePort(const json& probe, const std::string& field, const std::vector<int>& ports) {
  if (!probe.contains("port") || !probe["port"].is_number_integer())
    return HealthRefused(field + ".port", "required: a container port listed in ports");
  const int64_t port = probe["port"].get<int64_t>();
  if (std::find(ports.begin(), ports.end(), port) == ports.end())
    return HealthRefused(field + ".port", std::to_string(port) + " is not one of the request's ports; add it there");
  return static_cast<int>(port);
}

Status ParseProbe(const json& health, const std::vector<int>& ports, size_t max_args, size_t max_bytes,
                  HealthCheck& check) {
  const int kinds = health.contains("exec") + health.contains("http") + health.contains("tcp");
  if (kinds != 1) return Status::InvalidArgument("health: expected exactly one of exec, http and tcp");
  if (health.contains("exec")) {
    Result<std::vector<std::string>> command = ParseCommandField(health["exec"], "health.exec", max_args, max_bytes);
    if (!command.ok()) return command.status();
    check.command = std::move(*command);
    check.kind = ProbeKind::kExec;
  } else if (health.contains("http")) {
    const json& http = health["http"];
    if (!http.is_object()) return HealthRefused("http", "expected an object like {\"port\": 8080, \"path\": \"/healthz\"}");
    for (const auto& [key, value] : http.items())
      if (key != "port" && key != "path") return HealthRefused("http." + key, "unknown field; known: port, path");
    Result<int> port = ProbePort(http, "http", ports);
    if (!port.ok()) return port.status();
    check.port = *port;
    if (http.contains("path")) {
      const json& path = http["path"];
      const bool printable =
          path.is_string() && std::all_of(path.get_ref<const std::string&>().begin(),
                                          path.get_ref<const std::string&>().end(),
                                          [](unsigned char c) { return c > 0x20 && c < 0x7f; });
      if (!printable || path.get_ref<const std::string&>().empty() || path.get_ref<const std::string&>()[0] != '/' ||
          path.get_ref<const std::string&>().size() > 1024)
        return HealthRefused("http.path", "expected a path like \"/healthz\": printable ASCII without spaces");
      check.path = path.get<std::string>();
    }
    check.kind = ProbeKind::kHttp;
  } else {
    const json& tcp = health["tcp"];
    if (!tcp.is_object()) return HealthRefused("tcp", "expected an object like {\"port\": 6379}");
    for (const auto& [key, value] : tcp.items())
      if (key != "port") return HealthRefused("tcp." + key, "unknown field; known: port");
    Result<int> port = ProbePort(tcp, "tcp", ports);
    if (!port.ok()) return port.status();
    check.port = *port;
    check.kind = ProbeKind::kTcp;
  }
  return Status::Ok();
}

}  // namespace

const char* OnUnhealthyName(OnUnhealthy on_unhealthy) { return kOnUnhealthyWords[static_cast<int>(on_unhealthy)]; }

const char* HealthStatusName(HealthStatus status) { return kHealthStatusWords[static_cast<int>(status)]; }

Status ParseHealthCheck(const json& body, const std::vector<int>& ports, size_t max_args, size_t max_bytes,
                        std::optional<HealthCheck>& out) {
  if (!body.contains("health")) return Status::Ok();
  const json& health = body["health"];
  if (!health.is_object())
    return Status::InvalidArgument("health: expected an object like {\"http\": {\"port\": 8080, \"path\": \"/\"}}");
  HealthCheck check;
  for (const auto& [key, value] : health.items()) {
    if (key == "exec" || key == "http" || key == "tcp") continue;
    if (key == "interval" || key == "timeout" || key == "start_period") {
      Result<milliseconds> d = ParseDurationField(value, "health." + key,
                                                  key == "start_period" ? milliseconds(0) : milliseconds(100),
                                                  kMaxHealthPeriod);
      if (!d.ok()) return d.status();
      (key == "interval" ? check.interval : key == "timeout" ? check.timeout : check.start_period) = *d;
    } else if (key == "failures" || key == "successes") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 100)
        return HealthRefused(key, "expected a whole number from 1 to 100");
      (key == "failures" ? check.failures : check.successes) = value.get<int>();
    } else if (key == "on_unhealthy") {
      const std::string word = value.is_string() ? value.get<std::string>() : "";
      auto it = std::find(std::begin(kOnUnhealthyWords), std::end(kOnUnhealthyWords), word);
      if (it == std::end(kOnUnhealthyWords)) return HealthRefused(key, "expected \"none\", \"restart\" or \"stop\"");
      check.on_unhealthy = static_cast<OnUnhealthy>(it - std::begin(kOnUnhealthyWords));
    } else {
      return HealthRefused(key, "unknown field; known: exec, http, tcp, interval, timeout, start_period, failures, "
                                "successes, on_unhealthy");
    }
  }
  if (Status s = ParseProbe(health, ports, max_args, max_bytes, check); !s.ok()) return s;
  out = std::move(check);
  return Status::Ok();
}

json HealthCheckJson(const HealthCheck& check) {
  json out = json::object();
  switch (check.kind) {
    case ProbeKind::kExec: out["exec"] = check.command; break;
    case ProbeKind::kHttp: out["http"] = {{"port", check.port}, {"path", check.path}}; break;
    case ProbeKind::kTcp: out["tcp"] = {{"port", check.port}}; break;
  }
  if (check.interval) out["interval"] = FormatDuration(*check.interval);
  if (check.timeout) out["timeout"] = FormatDuration(*check.timeout);
  if (check.start_period) out["start_period"] = FormatDuration(*check.start_period);
  if (check.failures) out["failures"] = *check.failures;
  if (check.successes) out["successes"] = *check.successes;
  if (check.on_unhealthy != OnUnhealthy::kNone) out["on_unhealthy"] = OnUnhealthyName(check.on_unhealthy);
  return out;
}

HealthRule ResolveHealth(const HealthCheck& check, const ContainerConfig& container) {
  HealthRule rule;
  rule.check = check;
  rule.interval = std::max(check.interval.value_or(container.health_interval), container.health_min_interval);
  rule.timeout = std::min(check.timeout.value_or(container.health_timeout), rule.interval);
  rule.start_period = check.start_period.value_or(milliseconds(0));
  rule.failures = check.failures.value_or(3);
  rule.successes = check.successes.value_or(1);
  return rule;
}

json HealthState::ToJson() const {
  return {{"status", HealthStatusName(status)},
          {"failing", failing},
          {"last_failure", last_failure.empty() ? json(nullptr) : json(last_failure)}};
}

HealthChange RecordProbe(HealthState& state, const HealthRule& rule, bool passed, const std::string& output,
                         bool in_start_period) {
  HealthChange change;
  ++state.checks;
  if (passed) {
    state.failing = 0;
    ++state.passing;
    if (!state.ready) change.became_ready = state.ready = true;
    if (state.status != HealthStatus::kHealthy && (state.status == HealthStatus::kStarting || state.passing >= rule.successes)) {
      change.became_healthy = state.status == HealthStatus::kUnhealthy;
      state.status = HealthStatus::kHealthy;
    }
    return change;
  }
  state.passing = 0;
  state.last_failure = output.substr(0, kMaxHealthOutput);
  if (in_start_period) return change;
  ++state.failing;
  if (state.status != HealthStatus::kUnhealthy && state.failing >= rule.failures) {
    state.status = HealthStatus::kUnhealthy;
    change.became_unhealthy = true;
  }
  return change;
}

}  // namespace slotd
