// The reconcile decisions from tables of cases: what the agent knows of a
// kernel × what the engine shows (a listed container, an event) -> the step.
// Pure functions: no agent, no engine.
#include "model/reconcile.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace slotd::reconcile {
namespace {

constexpr KernelState kPreparing = KernelState::kPreparing;
constexpr KernelState kRunning = KernelState::kRunning;
constexpr KernelState kTerminating = KernelState::kTerminating;
constexpr KernelState kTerminated = KernelState::kTerminated;
constexpr KernelState kError = KernelState::kError;

// A listed container "c1" of kernel "k1" in engine state `state`.
ContainerInfo Listed(const std::string& state, const std::string& id = "c1") {
  ContainerInfo info;
  info.id = id;
  info.name = "slotd-2-a1-k1";
  info.state = state;
  info.labels = {{label::kOwner, "a1"}, {label::kKernelId, "k1"}};
  return info;
}

// One row: what the agent knows (nullopt: nothing), the container's state,
// when the kernel was forgotten (if it was), and the step expected.
struct ContainerCase {
  const char* what;
  std::optional<Known> known;
  std::string state;
  std::optional<uint64_t> forgotten_at;
  Step expected;
};

// The steps' names, so that a failing case says which step it got.
const char* StepName(Step step) {
  switch (step) {
    case Step::kNothing: return "nothing";
    case Step::kUnlabelled: return "unlabelled";
    case Step::kResume: return "resume";
    case Step::kMarkExited: return "mark-exited";
    case Step::kAdoptCreated: return "adopt-created";
    case Step::kAdoptRunning: return "adopt-running";
    case Step::kAdoptExited: return "adopt-exited";
    case Step::kSkipForgotten: return "skip-forgotten";
  }
  return "?";
}

const char* EventStepName(EventStep step) {
  switch (step) {
    case EventStep::kNothing: return "nothing";
    case EventStep::kRelist: return "relist";
    case EventStep::kCheckDeath: return "check-death";
    case EventStep::kCheckDrift: return "check-drift";
    case EventStep::kNoteOom: return "note-oom";
    case EventStep::kResume: return "resume";
    case EventStep::kForget: return "forget";
  }
  return "?";
}

constexpr uint64_t kListSeq = 10;

const std::vector<ContainerCase>& ContainerCases() {
  static const std::vector<ContainerCase> cases = {
      // Known kernels, their own container.
      {"running kernel, running container", Known{"c1", kRunning, false, 5}, "running", {}, Step::kNothing},
      {"running kernel, paused container", Known{"c1", kRunning, false, 5}, "paused", {}, Step::kNothing},
      {"running kernel, restarting container", Known{"c1", kRunning, false, 5}, "restarting", {}, Step::kNothing},
      {"running kernel, exited container", Known{"c1", kRunning, false, 5}, "exited", {}, Step::kMarkExited},
      {"running kernel, dead container", Known{"c1", kRunning, false, 5}, "dead", {}, Step::kMarkExited},
      {"running kernel, created container", Known{"c1", kRunning, false, 5}, "created", {}, Step::kMarkExited},
      {"running kernel, stopping container (Podman)", Known{"c1", kRunning, false, 5}, "stopping", {}, Step::kNothing},
      {"running kernel, removing container", Known{"c1", kRunning, false, 5}, "removing", {}, Step::kNothing},
      {"running kernel, a state slotd does not know", Known{"c1", kRunning, false, 5}, "", {}, Step::kNothing},
      {"running kernel, stopped container (Podman)", Known{"c1", kRunning, false, 5}, "stopped", {}, Step::kMarkExited},
      // A list asked for before the kernel last started shows its container
      // as it was then: a restart that the list predates is not undone.
      {"started again after the list began, exited in it", Known{"c1", kRunning, false, 5, kListSeq + 1}, "exited", {},
       Step::kNothing},
      {"started before the list began, exited in it", Known{"c1", kRunning, false, 5, kListSeq}, "exited", {},
       Step::kMarkExited},
      {"terminated kernel, exited container", Known{"c1", kTerminated, false, 5}, "exited", {}, Step::kNothing},
      {"terminated kernel, running again", Known{"c1", kTerminated, false, 5}, "running", {}, Step::kResume},
      {"error kernel, running again", Known{"c1", kError, false, 5}, "running", {}, Step::kResume},
      {"error kernel, exited", Known{"c1", kError, false, 5}, "exited", {}, Step::kNothing},
      // A call owns the kernel: hands off, whatever the engine shows.
      {"create under way, created", Known{"c1", kPreparing, true, 5}, "created", {}, Step::kNothing},
      {"create under way, running", Known{"c1", kPreparing, true, 5}, "running", {}, Step::kNothing},
      {"delete under way, exited", Known{"c1", kTerminating, true, 5}, "exited", {}, Step::kNothing},
      {"delete under way, running", Known{"c1", kTerminating, true, 5}, "running", {}, Step::kNothing},
      {"restart under way, exited", Known{"c1", kRunning, true, 5}, "exited", {}, Step::kNothing},
      {"restart of a terminated one, running", Known{"c1", kTerminated, true, 5}, "running", {}, Step::kNothing},
      // Another container of the same kernel id (an older one): not this kernel's.
      {"older container of the id, running", Known{"c0", kTerminated, false, 5}, "running", {}, Step::kNothing},
      {"older container of the id, exited", Known{"c0", kRunning, false, 5}, "exited", {}, Step::kNothing},
      // Unknown kernels: adopted by the container's state.
      {"unknown, running", std::nullopt, "running", {}, Step::kAdoptRunning},
      {"unknown, paused", std::nullopt, "paused", {}, Step::kAdoptRunning},
      {"unknown, restarting", std::nullopt, "restarting", {}, Step::kAdoptRunning},
      {"unknown, created (never started)", std::nullopt, "created", {}, Step::kAdoptCreated},
      {"unknown, exited", std::nullopt, "exited", {}, Step::kAdoptExited},
      {"unknown, dead", std::nullopt, "dead", {}, Step::kAdoptExited},
      {"unknown, removing (its processes may still run)", std::nullopt, "removing", {}, Step::kAdoptRunning},
      {"unknown, stopping (Podman's grace period)", std::nullopt, "stopping", {}, Step::kAdoptRunning},
      {"unknown, in a state slotd does not know", std::nullopt, "frobbing", {}, Step::kAdoptRunning},
      {"unknown, stopped (Podman)", std::nullopt, "stopped", {}, Step::kAdoptExited},
      // Forgotten after the list was asked for: the list is older than the removal.
      {"forgotten after the list began", std::nullopt, "running", kListSeq + 1, Step::kSkipForgotten},
      {"forgotten before the list began", std::nullopt, "running", kListSeq, Step::kAdoptRunning},
      {"forgotten long before", std::nullopt, "exited", 1, Step::kAdoptExited},
  };
  return cases;
}

TEST(ReconcileTest, EachListedContainerGetsTheStepOfItsCase) {
  for (const ContainerCase& c : ContainerCases()) {
    const Step step = DecideOnContainer(Listed(c.state), c.known ? &*c.known : nullptr, c.forgotten_at, kListSeq);
    EXPECT_EQ(StepName(step), std::string(StepName(c.expected))) << c.what;
  }
}

TEST(ReconcileTest, OnlyStatesThatSayTheyEndedFreeAndOnlyUnknownOnesAreReported) {
  for (const char* state : {"exited", "dead", "created", "stopped", "configured", "initialized"}) {
    EXPECT_FALSE(IsRunningState(state)) << state;
    EXPECT_TRUE(IsKnownState(state)) << state;
  }
  for (const char* state : {"running", "paused", "restarting", "removing", "stopping"}) {
    EXPECT_TRUE(IsRunningState(state)) << state;
    EXPECT_TRUE(IsKnownState(state)) << state;
  }
  for (const char* state : {"", "unknown", "Exited", "frobbing"}) {
    EXPECT_TRUE(IsRunningState(state)) << state;  // holds what it holds
    EXPECT_FALSE(IsKnownState(state)) << state;
  }
}

TEST(ReconcileTest, OnlyExitStepsNeedAnExitCode) {
  for (const ContainerCase& c : ContainerCases()) {
    const bool needs = c.expected == Step::kMarkExited || c.expected == Step::kAdoptExited;
    EXPECT_EQ(NeedsExitCode(c.expected), needs) << c.what;
  }
}

TEST(ReconcileTest, AContainerWithoutAKernelIdIsLeftAlone) {
  ContainerInfo info = Listed("running");
  info.labels.erase(label::kKernelId);
  EXPECT_EQ(DecideOnContainer(info, nullptr, std::nullopt, kListSeq), Step::kUnlabelled);
}

TEST(ReconcileTest, VanishedAreTheSettledKernelsWhoseContainerIsMissingFromAnOlderList) {
  const std::map<std::string, Known> known = {
      {"listed", Known{"c-listed", kRunning, false, 3}},
      {"gone", Known{"c-gone", kRunning, false, 3}},
      {"gone-terminated", Known{"c-gone2", kTerminated, false, 3}},
      {"gone-but-busy", Known{"c-busy", kTerminating, true, 3}},
      {"created-after-the-list", Known{"c-new", kRunning, false, kListSeq + 1}},
      {"created-as-the-list-began", Known{"c-edge", kRunning, false, kListSeq}},
  };
  const std::vector<std::string> vanished = Vanished(known, {"c-listed"}, kListSeq);
  EXPECT_EQ(vanished, (std::vector<std::string>{"created-as-the-list-began", "gone", "gone-terminated"}));
}

TEST(ReconcileTest, AdoptionOrderIsNewestCreatedFirstThenByKernelId) {
  auto make = [](const std::string& id, const std::string& kernel, int64_t created) {
    ContainerInfo info;
    info.id = id;
    info.created_unix = created;
    info.labels = {{label::kKernelId, kernel}};
    return info;
  };
  const std::vector<ContainerInfo> order =
      AdoptionOrder({make("c1", "k1", 100), make("c2", "k2", 300), make("c3", "k0", 200), make("c4", "kb", 200),
                     make("c5", "ka", 200)});
  std::vector<std::string> ids;
  for (const auto& info : order) ids.push_back(info.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"c2", "c3", "c5", "c4", "c1"}));
}

// ---------------------------------------------------------------- events

EngineEvent Event(const std::string& action, const std::string& id = "c1") {
  EngineEvent event;
  event.type = "container";
  event.action = action;
  event.id = id;
  event.attributes = {{label::kOwner, "a1"}, {label::kKernelId, "k1"}};
  return event;
}

TEST(ReconcileTest, OnlyThisAgentsContainerEventsNameAKernel) {
  EXPECT_EQ(KernelIdOfEvent(Event("die"), "a1"), "k1");
  EXPECT_EQ(KernelIdOfEvent(Event("die"), "a2"), std::nullopt);  // another owner's
  EngineEvent image = Event("pull");
  image.type = "image";
  EXPECT_EQ(KernelIdOfEvent(image, "a1"), std::nullopt);
  EngineEvent unlabelled = Event("die");
  unlabelled.attributes.erase(label::kKernelId);
  EXPECT_EQ(KernelIdOfEvent(unlabelled, "a1"), std::nullopt);
  EngineEvent ownerless = Event("die");
  ownerless.attributes.erase(label::kOwner);
  EXPECT_EQ(KernelIdOfEvent(ownerless, "a1"), std::nullopt);
}

struct EventCase {
  const char* what;
  std::optional<Known> known;
  std::string action;
  std::string container;
  EventStep expected;
};

TEST(ReconcileTest, EachEventGetsTheStepOfItsCase) {
  const Known running{"c1", kRunning, false, 5};
  const Known terminated{"c1", kTerminated, false, 5};
  const Known error{"c1", kError, false, 5};
  const Known restarting{"c1", kRunning, true, 5};
  const Known deleting{"c1", kTerminating, true, 5};
  const Known creating{"c1", kPreparing, true, 5};
  const std::vector<EventCase> cases = {
      {"unknown kernel created", std::nullopt, "create", "c1", EventStep::kRelist},
      {"unknown kernel started", std::nullopt, "start", "c1", EventStep::kRelist},
      {"unknown kernel died", std::nullopt, "die", "c1", EventStep::kNothing},
      {"unknown kernel destroyed", std::nullopt, "destroy", "c1", EventStep::kNothing},
      {"running kernel died", running, "die", "c1", EventStep::kCheckDeath},
      {"error kernel died", error, "die", "c1", EventStep::kCheckDeath},
      {"terminated kernel died again", terminated, "die", "c1", EventStep::kNothing},
      {"die during a restart", restarting, "die", "c1", EventStep::kNothing},
      {"die during a delete", deleting, "die", "c1", EventStep::kNothing},
      {"die during a create", creating, "die", "c1", EventStep::kNothing},
      {"die of an older container of the id", running, "die", "c0", EventStep::kNothing},
      {"terminated kernel started outside slotd", terminated, "start", "c1", EventStep::kResume},
      {"error kernel started outside slotd", error, "start", "c1", EventStep::kResume},
      {"running kernel started (its own start)", running, "start", "c1", EventStep::kNothing},
      {"start during a restart", restarting, "start", "c1", EventStep::kNothing},
      {"start during a create", creating, "start", "c1", EventStep::kNothing},
      {"older container of the id started", terminated, "start", "c0", EventStep::kNothing},
      {"removed outside slotd", running, "destroy", "c1", EventStep::kForget},
      {"removed outside slotd (Podman's remove)", running, "remove", "c1", EventStep::kForget},
      {"terminated, removed outside slotd", terminated, "destroy", "c1", EventStep::kForget},
      {"destroy during a delete", deleting, "destroy", "c1", EventStep::kNothing},
      {"destroy of an older container", running, "destroy", "c0", EventStep::kNothing},
      {"out of memory", running, "oom", "c1", EventStep::kNoteOom},
      {"out of memory during a restart", restarting, "oom", "c1", EventStep::kNoteOom},
      {"paused outside slotd", running, "pause", "c1", EventStep::kCheckDrift},
      {"unpaused", running, "unpause", "c1", EventStep::kCheckDrift},
      {"updated outside slotd", running, "update", "c1", EventStep::kCheckDrift},
      {"update of a terminated one", terminated, "update", "c1", EventStep::kNothing},
      {"update during a restart", restarting, "update", "c1", EventStep::kNothing},
      {"exec started", running, "exec_start: sh -c true", "c1", EventStep::kNothing},
      {"stop", running, "stop", "c1", EventStep::kNothing},
  };
  for (const EventCase& c : cases) {
    const EventStep step = DecideOnEvent(Event(c.action, c.container), c.known ? &*c.known : nullptr);
    EXPECT_EQ(EventStepName(step), std::string(EventStepName(c.expected))) << c.what;
  }
}

// The restore of shared kernels: never kept on a core that is not the
// agent's, nor without a pool to run on.
TEST(Reconcile, AdoptedSharedKernelsStayOnlyOnTheAgentsOwnCores) {
  struct SharedCase {
    const char* what;
    std::vector<int> allowed, pool;
    std::vector<AdoptedShared> shared;
    const char* refusal;  // a part of the message; nullptr: admitted
  };
  const AdoptedShared on_pool{"s1", "0123456789abcdef", 450, "1", ""};
  const AdoptedShared unmoved{"s1", "0123456789abcdef", 450, "0-1", "the engine cannot update"};
  const AdoptedShared unread{"s1", "0123456789abcdef", 450, "", "No such container"};
  const std::vector<SharedCase> cases = {
      {"no shared kernel, no pool", {0}, {}, {}, nullptr},
      {"moved into the pool", {1}, {1}, {on_pool}, nullptr},
      {"over the pool's capacity, on it", {1}, {1}, {on_pool, {"s2", "c2", 900, "1", ""}}, nullptr},
      {"on the agent's cores, off the pool (its exclusive kernel's core)", {0, 1}, {1}, {unmoved}, nullptr},
      {"no pool: every allowed core held exclusively", {0}, {}, {on_pool},
       "this agent has no shared pool for them: every core of its allowed-cores (0) is held by an exclusive kernel"},
      {"no pool, the kernel named", {0}, {}, {unread}, "kernel s1 (container 0123456789ab, 450m of shared cpu)"},
      {"no pool, what it takes", {0}, {}, {on_pool, {"s2", "c2", 900, "1", ""}}, "1350m of quota needs 2 core(s)"},
      {"left on a core the agent gave up", {1}, {1}, {unmoved},
       "runs on cores 0-1, of which 0 are not this agent's, and could not be moved into its shared pool (1): the "
       "engine cannot update"},
      {"where it runs unknown", {1}, {1}, {unread}, "the cores it runs on could not be read: No such container"},
      {"a cpuset that is no list", {1}, {1}, {{"s1", "c1", 450, "x", ""}}, "runs on cores x, which are not all"},
  };
  for (const SharedCase& c : cases) {
    const Status s = CheckAdoptedShared(c.allowed, c.pool, c.shared);
    if (!c.refusal) {
      EXPECT_TRUE(s.ok()) << c.what << ": " << s.message();
      continue;
    }
    ASSERT_EQ(s.code(), Status::Code::kFailedPrecondition) << c.what;
    EXPECT_NE(s.message().find(c.refusal), std::string::npos) << c.what << ": " << s.message();
    EXPECT_NE(s.message().find("or remove those containers (docker rm -f ID), then start the agent again"),
              std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace slotd::reconcile
