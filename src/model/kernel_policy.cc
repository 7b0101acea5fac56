#include "model/kernel_policy.h"

#include <algorithm>
#include <array>

#include "common/units.h"
#include "config/config.h"

namespace slotd {

using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr std::array<const char*, 11> kSignals = {"HUP", "INT",  "QUIT", "ABRT", "KILL", "USR1",
                                                  "USR2", "ALRM", "TERM", "PWR",  "WINCH"};
constexpr milliseconds kMaxStopTimeout{3'600'000};
constexpr milliseconds kDay{24 * 3'600'000};  // the longest back-off and warning
constexpr milliseconds kMaxIdleFor{366ll * 24 * 3'600'000};

Status Refused(const std::string& field, const std::string& what) { return Status::InvalidArgument(field + ": " + what); }

const char* kRestartWords[] = {"never", "on-failure", "always"};

}  // namespace

Result<milliseconds> ParseDurationField(const json& value, const std::string& field, milliseconds least,
                                        milliseconds most) {
  if (!value.is_string()) return Refused(field, "expected a duration like \"90s\", \"30m\" or \"2h\"");
  Result<milliseconds> duration = ParseDuration(value.get<std::string>());
  if (!duration.ok()) return Refused(field, duration.status().message());
  if (*duration < least || *duration > most)
    return Refused(field, least.count() > 0 ? "must be from " + FormatDuration(least) + " to " + FormatDuration(most)
                                            : "must be at most " + FormatDuration(most));
  return *duration;
}

std::optional<std::string> ParseSignalName(std::string_view name) {
  if (name.substr(0, 3) == "SIG") name.remove_prefix(3);
  for (const char* known : kSignals)
    if (name == known) return "SIG" + std::string(known);
  return std::nullopt;
}

Result<std::vector<std::string>> ParseCommandField(const json& value, const std::string& field, size_t max_args,
                                                   size_t max_bytes) {
  if (!value.is_array() || value.empty()) return Refused(field, "expected a command: a non-empty array of strings");
  std::vector<std::string> command;
  size_t total = 0;
  for (const json& arg : value) {
    if (!arg.is_string()) return Refused(field, "expected a command: a non-empty array of strings");
    total += arg.get_ref<const std::string&>().size();
    command.push_back(arg.get<std::string>());
  }
  if (command.size() > max_args || total > max_bytes)
    return Refused(field, "too large: at most " + std::to_string(max_args) + " arguments of " +
                              std::to_string(max_bytes >> 10) + " KiB in all");
  return command;
}

const char* RestartWhenName(RestartWhen when) { return kRestartWords[static_cast<int>(when)]; }

Status ParseStopContract(const json& body, size_t max_args, size_t max_bytes, StopContract& out) {
  if (body.contains("stop_signal")) {
    const json& signal = body["stop_signal"];
    std::optional<std::string> name = signal.is_string() ? ParseSignalName(signal.get<std::string>()) : std::nullopt;
    if (!name)
      return Refused("stop_signal", "expected a signal name: SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, ...");
    out.signal = *name;
  }
  if (body.contains("stop_timeout")) {
    Result<milliseconds> timeout =
        ParseDurationField(body["stop_timeout"], "stop_timeout", milliseconds(0), kMaxStopTimeout);
    if (!timeout.ok()) return timeout.status();
    if (timeout->count() % 1000 != 0) return Refused("stop_timeout", "must be whole seconds");
    out.timeout = std::chrono::duration_cast<std::chrono::seconds>(*timeout);
  }
  if (body.contains("pre_stop")) {
    Result<std::vector<std::string>> command = ParseCommandField(body["pre_stop"], "pre_stop", max_args, max_bytes);
    if (!command.ok()) return command.status();
    out.pre_stop = std::move(*command);
  }
  if (body.contains("warn_before")) {
    const json& warn = body["warn_before"];
    if (!warn.is_object() || !warn.contains("signal") || !warn.contains("before"))
      return Refused("warn_before", "expected an object like {\"signal\": \"SIGUSR1\", \"before\": \"5m\"}");
    for (const auto& [key, value] : warn.items())
      if (key != "signal" && key != "before") return Refused("warn_before." + key, "unknown field; known: signal, before");
    const json& signal = warn["signal"];
    std::optional<std::string> name = signal.is_string() ? ParseSignalName(signal.get<std::string>()) : std::nullopt;
    if (!name) return Refused("warn_before.signal", "expected a signal name: SIGUSR1, SIGUSR2, SIGTERM, SIGINT, ...");
    Result<milliseconds> before = ParseDurationField(warn["before"], "warn_before.before", std::chrono::seconds(1), kDay);
    if (!before.ok()) return before.status();
    out.warn_before = StopWarning{*name, *before};
  }
  return Status::Ok();
}

Status ParseRestartPolicy(const json& body, RestartPolicy& out) {
  if (!body.contains("restart")) return Status::Ok();
  const json& r = body["restart"];
  if (!r.is_object())
    return Refused("restart", "expected an object like {\"policy\": \"on-failure\", \"max\": 5}");
  for (const auto& [key, value] : r.items()) {
    const std::string field = "restart." + key;
    if (key == "policy") {
      const std::string word = value.is_string() ? value.get<std::string>() : "";
      auto it = std::find(std::begin(kRestartWords), std::end(kRestartWords), word);
      if (it == std::end(kRestartWords)) return Refused(field, "expected \"never\", \"on-failure\" or \"always\"");
      out.when = static_cast<RestartWhen>(it - std::begin(kRestartWords));
    } else if (key == "max") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 1'000'000)
        return Refused(field, "expected a whole number of restarts from 1 to 1000000 (no restarts: policy \"never\")");
      out.max = value.get<int64_t>();
    } else if (key == "backoff") {
      if (!value.is_object()) return Refused(field, "expected an object like {\"initial\": \"1s\", \"max\": \"5m\"}");
      for (const auto& [name, wait] : value.items()) {
        if (name != "initial" && name != "max") return Refused(field + "." + name, "unknown field; known: initial, max");
        Result<milliseconds> duration = ParseDurationField(wait, field + "." + name, milliseconds(0), kDay);
        if (!duration.ok()) return duration.status();
        (name == "initial" ? out.backoff_initial : out.backoff_max) = *duration;
      }
      if (out.backoff_initial && out.backoff_max && *out.backoff_initial > *out.backoff_max)
        return Refused(field, "initial (" + FormatDuration(*out.backoff_initial) + ") is longer than max (" +
                              FormatDuration(*out.backoff_max) + ")");
    } else {
      return Refused(field, "unknown field; known: policy, max, backoff");
    }
  }
  return Status::Ok();
}

void WriteStopContract(const StopContract& contract, json& request) {
  if (!contract.signal.empty()) request["stop_signal"] = contract.signal;
  if (contract.timeout) request["stop_timeout"] = FormatDuration(*contract.timeout);
  if (!contract.pre_stop.empty()) request["pre_stop"] = contract.pre_stop;
  if (contract.warn_before)
    request["warn_before"] = {{"signal", contract.warn_before->signal},
                              {"before", FormatDuration(contract.warn_before->before)}};
}

json RestartPolicyJson(const RestartPolicy& policy) {
  json out = {{"policy", RestartWhenName(policy.when)}};
  if (policy.max) out["max"] = *policy.max;
  json backoff = json::object();
  if (policy.backoff_initial) backoff["initial"] = FormatDuration(*policy.backoff_initial);
  if (policy.backoff_max) backoff["max"] = FormatDuration(*policy.backoff_max);
  if (!backoff.empty()) out["backoff"] = std::move(backoff);
  return out;
}

Status ParseIdlePolicy(const json& body, std::optional<IdlePolicy>& out) {
  if (!body.contains("idle")) return Status::Ok();
  const json& idle = body["idle"];
  if (!idle.is_object()) return Refused("idle", "expected an object like {\"for\": \"30m\", \"cpu_below\": 0.05}");
  IdlePolicy policy;
  for (const auto& [key, value] : idle.items()) {
    const std::string field = "idle." + key;
    if (key == "for") {
      Result<milliseconds> d = ParseDurationField(value, field, std::chrono::seconds(1), kMaxIdleFor);
      if (!d.ok()) return d.status();
      policy.idle_for = *d;
    } else if (key == "cpu_below" || key == "gpu_below") {
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1)
        return Refused(field, "expected a fraction from 0 to 1 of what the kernel holds, e.g. 0.05");
      (key == "cpu_below" ? policy.cpu_below : policy.gpu_below) = value.get<double>();
    } else {
      return Refused(field, "unknown field; known: for, cpu_below, gpu_below");
    }
  }
  out = policy;
  return Status::Ok();
}

json IdlePolicyJson(const IdlePolicy& policy) {
  json out = json::object();
  if (policy.idle_for) out["for"] = FormatDuration(*policy.idle_for);
  if (policy.cpu_below) out["cpu_below"] = *policy.cpu_below;
  if (policy.gpu_below) out["gpu_below"] = *policy.gpu_below;
  return out;
}

IdleRule ResolveIdle(const std::optional<IdlePolicy>& policy, const ContainerConfig& container) {
  IdleRule rule;
  const milliseconds cap = container.idle_for;
  rule.idle_for = policy && policy->idle_for ? *policy->idle_for : cap;
  if (cap.count() > 0 && rule.idle_for > cap) rule.idle_for = cap;
  rule.cpu_below = policy && policy->cpu_below ? *policy->cpu_below : container.idle_cpu_below_percent / 100.0;
  rule.gpu_below = policy && policy->gpu_below ? *policy->gpu_below : container.idle_gpu_below_percent / 100.0;
  return rule;
}

RestartRule ResolveRestart(const RestartPolicy& policy, const ContainerConfig& container) {
  RestartRule rule;
  rule.when = policy.when;
  rule.max = policy.max.value_or(container.restart_max);
  if (container.restart_max > 0 && (rule.max == 0 || rule.max > container.restart_max)) rule.max = container.restart_max;
  rule.backoff_max = policy.backoff_max.value_or(container.restart_backoff_max);
  rule.backoff_initial = std::min(policy.backoff_initial.value_or(container.restart_backoff_initial), rule.backoff_max);
  return rule;
}

milliseconds BackoffBefore(const RestartRule& rule, int64_t restarts) {
  milliseconds wait = rule.backoff_initial;
  for (int64_t i = 0; i < restarts && wait.count() > 0 && wait < rule.backoff_max; ++i) wait *= 2;
  return std::min(wait, rule.backoff_max);
}

ExitOutcome DecideOnExit(const RestartRule& rule, int64_t restarts, const KernelEnd& end,
                         std::optional<int64_t> deadline_s, int64_t now_ms) {
  const bool failed = end.forced || end.out_of_memory || !end.exit_code || *end.exit_code != 0;
  const bool restarts_it =
      rule.when == RestartWhen::kAlways || (rule.when == RestartWhen::kOnFailure && failed);
  if (!restarts_it || end.final) return {false, 0, end.why};
  if (deadline_s && *deadline_s * 1000 <= now_ms) return {false, 0, end.why};
  if (rule.max > 0 && restarts >= rule.max) return {false, 0, "restart limit reached"};
  return {true, end.ended_at_ms + BackoffBefore(rule, restarts).count(), end.why};
}

}  // namespace slotd
