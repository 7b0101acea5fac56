// Health checks: what a request may ask for, read and written back, and the
// rule that turns a kernel's probe results into its health, from tables.
#include "model/health_check.h"

#include <gtest/gtest.h>

#include "config/config.h"

namespace slotd {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

Status ParsedHealth(const json& health, std::optional<HealthCheck>& out) {
  return ParseHealthCheck({{"health", health}}, {8080, 6379}, 16, 1024, out);
}

TEST(HealthCheckSpec, EachKindReadsBackAsItWasWritten) {
  const std::vector<json> checks = {
      {{"exec", {"test", "-f", "/tmp/ok"}}},
      {{"http", {{"port", 8080}, {"path", "/healthz"}}}, {"interval", "2s"}, {"timeout", "500ms"},
       {"start_period", "30s"}, {"failures", 2}, {"successes", 3}, {"on_unhealthy", "restart"}},
      {{"tcp", {{"port", 6379}}}, {"on_unhealthy", "stop"}},
  };
  for (const json& check : checks) {
    std::optional<HealthCheck> parsed;
    ASSERT_TRUE(ParsedHealth(check, parsed).ok()) << check.dump();
    ASSERT_TRUE(parsed);
    EXPECT_EQ(HealthCheckJson(*parsed), check) << check.dump();
  }
  std::optional<HealthCheck> defaulted;
  ASSERT_TRUE(ParsedHealth({{"http", {{"port", 8080}}}}, defaulted).ok());
  EXPECT_EQ(defaulted->path, "/");
  std::optional<HealthCheck> none;
  ASSERT_TRUE(ParseHealthCheck(json::object(), {}, 16, 1024, none).ok());
  EXPECT_FALSE(none);
}

TEST(HealthCheckSpec, ABadCheckIsRefusedNamingItsField) {
  struct Case {
    json health;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"curl localhost", "health: expected an object"},
      {json::object(), "health: expected exactly one of exec, http and tcp"},
      {{{"exec", {"true"}}, {"tcp", {{"port", 6379}}}}, "health: expected exactly one of"},
      {{{"exec", json::array()}}, "health.exec: expected a command: a non-empty array"},
      {{{"exec", {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q"}}},
       "health.exec: too large"},
      {{{"http", {{"path", "/"}}}}, "health.http.port: required"},
      {{{"http", {{"port", 9999}}}}, "health.http.port: 9999 is not one of the request's ports"},
      {{{"http", {{"port", 8080}, {"path", "healthz"}}}}, "health.http.path: "},
      {{{"http", {{"port", 8080}, {"path", "/a b"}}}}, "health.http.path: "},
      {{{"http", {{"port", 8080}, {"host", "127.0.0.2"}}}}, "health.http.host: unknown field"},
      {{{"tcp", {{"port", "6379"}}}}, "health.tcp.port: required"},
      {{{"exec", {"true"}}, {"interval", "10ms"}}, "health.interval: must be from 100ms"},
      {{{"exec", {"true"}}, {"failures", 0}}, "health.failures: expected a whole number from 1 to 100"},
      {{{"exec", {"true"}}, {"on_unhealthy", "panic"}}, "health.on_unhealthy: expected"},
      {{{"exec", {"true"}}, {"retries", 3}}, "health.retries: unknown field"},
  };
  for (const Case& c : cases) {
    std::optional<HealthCheck> parsed;
    Status s = ParsedHealth(c.health, parsed);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.health.dump();
    EXPECT_EQ(s.message().rfind(c.message, 0), 0u) << s.message();
  }
}

TEST(HealthCheckSpec, TheAgentsDefaultsAndItsShortestIntervalApply) {
  ContainerConfig container;
  container.health_interval = milliseconds(10'000);
  container.health_min_interval = milliseconds(1'000);
  container.health_timeout = milliseconds(5'000);
  HealthCheck check;
  check.command = {"true"};
  HealthRule rule = ResolveHealth(check, container);
  EXPECT_EQ(rule.interval, milliseconds(10'000));
  EXPECT_EQ(rule.timeout, milliseconds(5'000));
  EXPECT_EQ(rule.failures, 3);
  EXPECT_EQ(rule.successes, 1);
  check.interval = milliseconds(200);
  rule = ResolveHealth(check, container);
  EXPECT_EQ(rule.interval, milliseconds(1'000));
  EXPECT_EQ(rule.timeout, milliseconds(1'000)) << "a probe never outlasts its interval";
}

TEST(HealthCheckSpec, ProbeResultsMakeAKernelReadyUnhealthyAndHealthyAgain) {
  HealthRule rule;
  rule.failures = 2;
  rule.successes = 2;
  struct Step {
    bool passed;
    bool in_start_period;
    HealthStatus status;
    bool ready;
    int failing;
    const char* change;  // "", "ready", "healthy", "unhealthy"
  };
  const std::vector<Step> steps = {
      {false, true, HealthStatus::kStarting, false, 0, ""},  // the start period: not counted
      {false, false, HealthStatus::kStarting, false, 1, ""},
      {true, false, HealthStatus::kHealthy, true, 0, "ready"},  // the first pass: ready and healthy
      {false, false, HealthStatus::kHealthy, true, 1, ""},
      {false, false, HealthStatus::kUnhealthy, true, 2, "unhealthy"},
      {false, false, HealthStatus::kUnhealthy, true, 3, ""},  // reported once
      {true, false, HealthStatus::kUnhealthy, true, 0, ""},   // one pass of two
      {true, false, HealthStatus::kHealthy, true, 0, "healthy"},
  };
  HealthState state;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    const HealthChange change =
        RecordProbe(state, rule, step.passed, step.passed ? "" : "exit code 1: no", step.in_start_period);
    EXPECT_EQ(state.status, step.status) << i;
    EXPECT_EQ(state.ready, step.ready) << i;
    EXPECT_EQ(state.failing, step.failing) << i;
    EXPECT_EQ(state.checks, static_cast<int64_t>(i + 1)) << i;  // every probe counts, in the start period too
    const std::string got = change.became_ready ? "ready"
                            : change.became_healthy ? "healthy"
                            : change.became_unhealthy ? "unhealthy"
                                                      : "";
    EXPECT_EQ(got, step.change) << i;
  }
  EXPECT_EQ(state.last_failure, "exit code 1: no");
  RecordProbe(state, rule, false, std::string(5000, 'x'), false);
  EXPECT_EQ(state.last_failure.size(), kMaxHealthOutput);
}

}  // namespace
}  // namespace slotd
