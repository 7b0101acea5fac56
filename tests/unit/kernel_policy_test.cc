// Kernel policies: the stop contract and restart policy a request may ask
// for, read and written back, and the decision of what a kernel's end comes
// to under its policy, from tables.
#include "model/kernel_policy.h"

#include <gtest/gtest.h>

#include "model/kernel.h"
#include "config/config.h"

namespace slotd {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

TEST(KernelPolicy, SignalsAreReadWithOrWithoutTheirPrefixAndNothingElse) {
  EXPECT_EQ(ParseSignalName("SIGUSR1"), "SIGUSR1");
  EXPECT_EQ(ParseSignalName("USR1"), "SIGUSR1");
  EXPECT_EQ(ParseSignalName("TERM"), "SIGTERM");
  for (const char* bad : {"", "SIG", "sigterm", "SIGFOO", "9", "SIGTERM ", "SIGSTOP"})
    EXPECT_EQ(ParseSignalName(bad), std::nullopt) << bad;
}

TEST(KernelPolicy, AStopContractReadsBackAsItWasWritten) {
  StopContract contract;
  ASSERT_TRUE(ParseStopContract({{"stop_signal", "INT"},
                                 {"stop_timeout", "30s"},
                                 {"pre_stop", {"sh", "-c", "sync"}},
                                 {"warn_before", {{"signal", "USR1"}, {"before", "5m"}}}},
                                16, 1024, contract)
                  .ok());
  EXPECT_EQ(contract.warn_before, (StopWarning{"SIGUSR1", std::chrono::minutes(5)}));
  EXPECT_EQ(contract.signal, "SIGINT");
  EXPECT_EQ(contract.timeout, std::chrono::seconds(30));
  EXPECT_EQ(contract.pre_stop, (std::vector<std::string>{"sh", "-c", "sync"}));
  json written = json::object();
  WriteStopContract(contract, written);
  StopContract again;
  ASSERT_TRUE(ParseStopContract(written, 16, 1024, again).ok());
  EXPECT_EQ(again, contract);
}

TEST(KernelPolicy, ABadStopContractIsRefusedNamingItsField) {
  struct Case {
    json body;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{{"stop_signal", "SIGNOPE"}}, "stop_signal: "},
      {{{"stop_signal", 15}}, "stop_signal: "},
      {{{"stop_timeout", "2h"}}, "stop_timeout: must be at most"},
      {{{"stop_timeout", "1500ms"}}, "stop_timeout: must be whole seconds"},
      {{{"stop_timeout", 30}}, "stop_timeout: expected a duration"},
      {{{"pre_stop", json::array()}}, "pre_stop: "},
      {{{"pre_stop", "sync"}}, "pre_stop: "},
      {{{"pre_stop", {"a", 1}}}, "pre_stop: "},
      {{{"pre_stop", {"a", "b", "c"}}}, "pre_stop: too large"},
      {{{"warn_before", "5m"}}, "warn_before: expected an object"},
      {{{"warn_before", {{"signal", "USR1"}}}}, "warn_before: expected an object"},
      {{{"warn_before", {{"signal", "BOOM"}, {"before", "5m"}}}}, "warn_before.signal: "},
      {{{"warn_before", {{"signal", "USR1"}, {"before", "500ms"}}}}, "warn_before.before: must be from 1s to 24h"},
      {{{"warn_before", {{"signal", "USR1"}, {"before", "5m"}, {"repeat", true}}}}, "warn_before.repeat: unknown"},
  };
  for (const Case& c : cases) {
    StopContract contract;
    Status s = ParseStopContract(c.body, 2, 1024, contract);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.body.dump();
    EXPECT_EQ(s.message().rfind(c.field, 0), 0u) << s.message();
  }
}

TEST(KernelPolicy, ARestartPolicyReadsBackAsItWasWritten) {
  RestartPolicy policy;
  ASSERT_TRUE(ParseRestartPolicy(
                  {{"restart", {{"policy", "on-failure"}, {"max", 3}, {"backoff", {{"initial", "2s"}, {"max", "1m"}}}}}},
                  policy)
                  .ok());
  EXPECT_EQ(policy.when, RestartWhen::kOnFailure);
  EXPECT_EQ(policy.max, 3);
  EXPECT_EQ(policy.backoff_initial, milliseconds(2'000));
  EXPECT_EQ(policy.backoff_max, milliseconds(60'000));
  RestartPolicy again;
  ASSERT_TRUE(ParseRestartPolicy({{"restart", RestartPolicyJson(policy)}}, again).ok());
  EXPECT_EQ(again, policy);
  EXPECT_EQ(RestartPolicyJson(RestartPolicy{.when = RestartWhen::kAlways}), json({{"policy", "always"}}));
}

TEST(KernelPolicy, ABadRestartPolicyIsRefusedNamingItsField) {
  struct Case {
    json restart;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"always", "restart: "},
      {{{"policy", "sometimes"}}, "restart.policy: "},
      {{{"max", 0}}, "restart.max: "},
      {{{"max", -1}}, "restart.max: "},
      {{{"max", "3"}}, "restart.max: "},
      {{{"backoff", {{"initial", "1x"}}}}, "restart.backoff.initial: "},
      {{{"backoff", {{"start", "1s"}}}}, "restart.backoff.start: unknown field"},
      {{{"backoff", {{"initial", "10m"}, {"max", "1m"}}}}, "restart.backoff: initial (10m) is longer than max (1m)"},
      {{{"backoff", {{"max", "25h"}}}}, "restart.backoff.max: must be at most"},
      {{{"tries", 3}}, "restart.tries: unknown field"},
  };
  for (const Case& c : cases) {
    RestartPolicy policy;
    Status s = ParseRestartPolicy({{"restart", c.restart}}, policy);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << c.restart.dump();
    EXPECT_EQ(s.message().rfind(c.field, 0), 0u) << s.message();
  }
}

TEST(KernelPolicy, TheAgentsDefaultsFillWhatARequestLeavesOutAndItsCapsHold) {
  ContainerConfig container;
  container.restart_max = 5;
  container.restart_backoff_initial = milliseconds(1'000);
  container.restart_backoff_max = milliseconds(60'000);
  RestartRule rule = ResolveRestart(RestartPolicy{.when = RestartWhen::kAlways}, container);
  EXPECT_EQ(rule.max, 5);
  EXPECT_EQ(rule.backoff_initial, milliseconds(1'000));
  EXPECT_EQ(rule.backoff_max, milliseconds(60'000));
  // A label written under a looser config is held to today's cap.
  rule = ResolveRestart(
      RestartPolicy{.when = RestartWhen::kAlways, .max = 50, .backoff_initial = milliseconds(90'000)}, container);
  EXPECT_EQ(rule.max, 5);
  EXPECT_EQ(rule.backoff_initial, milliseconds(60'000));
  container.restart_max = 0;  // no limit
  EXPECT_EQ(ResolveRestart(RestartPolicy{.when = RestartWhen::kAlways}, container).max, 0);
  EXPECT_EQ(ResolveRestart(RestartPolicy{.when = RestartWhen::kAlways, .max = 7}, container).max, 7);
}

TEST(KernelPolicy, TheBackoffDoublesFromItsInitialWaitUpToItsMax) {
  const RestartRule rule{RestartWhen::kAlways, 0, milliseconds(500), milliseconds(5'000)};
  const std::vector<int64_t> expected = {500, 1'000, 2'000, 4'000, 5'000, 5'000};
  for (size_t restarts = 0; restarts < expected.size(); ++restarts)
    EXPECT_EQ(BackoffBefore(rule, restarts).count(), expected[restarts]) << restarts;
  EXPECT_EQ(BackoffBefore(rule, 1'000'000).count(), 5'000);
  EXPECT_EQ(BackoffBefore(RestartRule{RestartWhen::kAlways, 0, milliseconds(0), milliseconds(0)}, 9).count(), 0);
}

TEST(KernelPolicy, WhatAnEndComesToUnderEachPolicy) {
  constexpr int64_t kEnd = 1'800'000'000'000;
  constexpr int64_t kNow = kEnd + 50;
  const KernelEnd crashed{1, false, kEnd, "exited with code 1"};
  const KernelEnd finished{0, false, kEnd, "exited with code 0"};
  const KernelEnd oom{137, true, kEnd, "out of memory"};
  const KernelEnd never{std::nullopt, false, kEnd, "restart failed: no such image"};
  auto rule = [](RestartWhen when, int64_t max = 3) {
    return RestartRule{when, max, milliseconds(1'000), milliseconds(8'000)};
  };
  struct Case {
    const char* name;
    RestartRule rule;
    int64_t restarts;
    KernelEnd end;
    std::optional<int64_t> deadline_s;
    ExitOutcome expected;
  };
  const std::vector<Case> cases = {
      {"never restarts a crash", rule(RestartWhen::kNever), 0, crashed, std::nullopt, {false, 0, "exited with code 1"}},
      {"on-failure restarts a crash", rule(RestartWhen::kOnFailure), 0, crashed, std::nullopt,
       {true, kEnd + 1'000, "exited with code 1"}},
      {"on-failure keeps a clean end", rule(RestartWhen::kOnFailure), 0, finished, std::nullopt,
       {false, 0, "exited with code 0"}},
      {"on-failure restarts an out-of-memory kill", rule(RestartWhen::kOnFailure), 1, oom, std::nullopt,
       {true, kEnd + 2'000, "out of memory"}},
      {"on-failure restarts a failed restart", rule(RestartWhen::kOnFailure), 2, never, std::nullopt,
       {true, kEnd + 4'000, "restart failed: no such image"}},
      {"always restarts a clean end", rule(RestartWhen::kAlways), 0, finished, std::nullopt,
       {true, kEnd + 1'000, "exited with code 0"}},
      {"the back-off is capped", rule(RestartWhen::kAlways, 0), 10, crashed, std::nullopt,
       {true, kEnd + 8'000, "exited with code 1"}},
      {"the limit ends it", rule(RestartWhen::kAlways, 3), 3, crashed, std::nullopt,
       {false, 0, "restart limit reached"}},
      {"no limit never ends it", rule(RestartWhen::kAlways, 0), 500, crashed, std::nullopt,
       {true, kEnd + 8'000, "exited with code 1"}},
      {"a lifetime run out ends it", rule(RestartWhen::kAlways), 0, crashed, kNow / 1000,
       {false, 0, "exited with code 1"}},
      {"a lifetime still running restarts it", rule(RestartWhen::kAlways), 0, crashed, kNow / 1000 + 60,
       {true, kEnd + 1'000, "exited with code 1"}},
      {"a final end is never restarted", rule(RestartWhen::kAlways, 0), 0,
       KernelEnd{std::nullopt, false, kEnd, "its first process runs as root (uid 0)", true, true}, std::nullopt,
       {false, 0, "its first process runs as root (uid 0)"}},
  };
  for (const Case& c : cases) {
    const ExitOutcome got = DecideOnExit(c.rule, c.restarts, c.end, c.deadline_s, kNow);
    EXPECT_EQ(got.restart, c.expected.restart) << c.name;
    EXPECT_EQ(got.restart_at_ms, c.expected.restart_at_ms) << c.name;
    EXPECT_EQ(got.reason, c.expected.reason) << c.name;
  }
}

TEST(KernelPolicy, AContainersNameRecordsItsMarksAndNoFirstNameReadsAsMarked) {
  EXPECT_EQ(ContainerName("gpu1-a", "k-0001"), "slotd-6-gpu1-a-k-0001");
  EXPECT_EQ(ContainerName("gpu1-a", "k-0001", {3, false}), "slotd.r3-6-gpu1-a-k-0001");
  EXPECT_EQ(ContainerName("gpu1-a", "k-0001", {0, true}), "slotd.w-6-gpu1-a-k-0001");
  EXPECT_EQ(ContainerName("gpu1-a", "k-0001", {12, true}), "slotd.r12w-6-gpu1-a-k-0001");
  for (int64_t restarts : {0, 1, 9, 10, 12345})
    for (bool warned : {false, true}) {
      const NameMarks marks{restarts, warned};
      EXPECT_EQ(MarksInName(ContainerName("a", "slotd.r4w-x", marks)), marks) << restarts << warned;
    }
  for (const char* other : {"slotd-1-a-k", "slotd.r-1-a-k", "slotd.rx-1-a-k", "slotd.r3", "slotd.w", "slotd.x-1-a-k",
                            "web", ""})
    EXPECT_EQ(MarksInName(other), NameMarks{}) << other;
}

}  // namespace
}  // namespace slotd
