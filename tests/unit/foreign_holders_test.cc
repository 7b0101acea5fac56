// CheckForeignHolders: which running containers of other owners keep a new
// agent off its cores, devices and ports, from a table of containers as the
// engine lists and inspects them; and InspectForeignCpusets through the fake
// engine, which reads the cpusets of exactly those containers.
#include "agent/foreign_holders.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/label_codec.h"
#include "testing/fake_engine.h"

namespace slotd {
namespace {

// The claims of agent "me" on cores 0 and 1, mock device m0 and ports 30000-30009.
AgentClaims ForeignTestClaims() {
  AgentClaims mine;
  mine.agent_id = "me";
  mine.cores = {0, 1};
  mine.devices = {{"mock", {"m0"}}};
  mine.port_first = 30000;
  mine.port_last = 30009;
  return mine;
}

// A kernel container "c" of `owner` recording `allocations` (label text;
// nullptr: no label), running or not, with the cpuset an inspect showed
// ("": not inspected, or not limited).
ContainerInfo ForeignKernel(const std::string& owner, const char* allocations, bool running, const std::string& cpuset) {
  ContainerInfo info;
  info.id = "id-c";
  info.name = "c";
  info.labels[label::kOwner] = owner;
  if (allocations) info.labels[label::kAllocations] = allocations;
  info.running = running;
  info.state = running ? "running" : "exited";
  info.cpuset_cpus = cpuset;
  return info;
}

struct HolderCase {
  const char* name;
  ContainerInfo container;
  const char* refusal;  // a part of the message; nullptr: admitted
};

TEST(ForeignHolders, CountTheCoresAContainerRunsOnAsWellAsThoseItsLabelRecords) {
  const char* shared = R"({"cpu":[],"mem":1048576,"cpu_shared":450})";
  const char* exclusive_2 = R"({"cpu":[2],"mem":1048576})";
  const std::vector<HolderCase> cases = {
      {"an exclusive core its label records", ForeignKernel("other", R"({"cpu":[0],"mem":1})", true, "0"),
       "cpu core 0: held by running container c of agent other"},
      {"a shared kernel on a pool over one of our cores", ForeignKernel("other", shared, true, "0-3"),
       "cpu core 0 (its cpuset: 0-3): held by running container c of agent other"},
      {"the same, the second core named too", ForeignKernel("other", shared, true, "0-3"), "\n  cpu core 1 (its cpuset"},
      {"a shared kernel on a pool beside ours", ForeignKernel("other", shared, true, "2-3"), nullptr},
      {"a shared kernel not inspected: its label alone", ForeignKernel("other", shared, true, ""), nullptr},
      {"an exclusive kernel moved onto our core behind its agent's back", ForeignKernel("other", exclusive_2, true, "1"),
       "cpu core 1 (its cpuset: 1)"},
      {"a label this agent cannot read, a cpuset over our core", ForeignKernel("other", "{nope", true, "1"),
       "cpu core 1 (its cpuset: 1)"},
      {"a cpuset that is no core list", ForeignKernel("other", shared, true, "0-x"),
       "cpu cores (its cpuset \"0-x\" is no core list)"},
      {"a stopped container runs on nothing", ForeignKernel("other", shared, false, "0-3"), nullptr},
      {"our own container is ours to adopt", ForeignKernel("me", shared, true, "0-3"), nullptr},
      {"a container of another owner that records no allocation", ForeignKernel("other", nullptr, true, "0"), nullptr},
      {"a device its label records", ForeignKernel("other", R"({"cpu":[2],"mem":1,"devices":{"mock":["m0"]}})", true, "2"),
       "mock device m0: held by"},
      {"a host port of our range",
       ForeignKernel("other", R"({"cpu":[2],"mem":1,"ports":[{"container":80,"host":30003}]})", true, "2"),
       "host port 30003: held by"},
  };
  for (const HolderCase& c : cases) {
    const Status s = CheckForeignHolders({c.container}, ForeignTestClaims());
    if (!c.refusal) {
      EXPECT_TRUE(s.ok()) << c.name << ": " << s.message();
      continue;
    }
    ASSERT_EQ(s.code(), Status::Code::kFailedPrecondition) << c.name;
    EXPECT_NE(s.message().find(c.refusal), std::string::npos) << c.name << ": " << s.message();
    EXPECT_NE(s.message().find("remove those containers (docker rm -f NAME)"), std::string::npos) << s.message();
  }
}

TEST(ForeignHolders, InspectTheCpusetsOfRunningKernelsOfOtherOwnersOnly) {
  FakeEngine engine;
  const Labels shared = {{label::kOwner, "other"}, {label::kAllocations, R"({"cpu":[],"mem":1,"cpu_shared":450})"}};
  Result<std::string> theirs = engine.AddContainer("theirs", shared);
  Labels own = shared;
  own[label::kOwner] = "me";
  Result<std::string> ours = engine.AddContainer("ours", own);
  Result<std::string> stopped = engine.AddContainer("stopped", shared, /*running=*/false);
  Result<std::string> unlabelled = engine.AddContainer("unlabelled", {{label::kOwner, "other"}});
  ASSERT_TRUE(theirs.ok() && ours.ok() && stopped.ok() && unlabelled.ok());
  ASSERT_TRUE(engine.UpdateCpuset(*theirs, "0-3").ok());
  const int before = engine.CallsFor(*theirs);

  Result<std::vector<ContainerInfo>> listed = ListOwnedContainers(engine);
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(CheckForeignHolders(*listed, ForeignTestClaims()).ok());  // as listed, a shared kernel's cores are unknown
  ASSERT_TRUE(InspectForeignCpusets(engine, *listed, "me").ok());
  const Status s = CheckForeignHolders(*listed, ForeignTestClaims());
  EXPECT_NE(s.message().find("cpu core 0 (its cpuset: 0-3): held by running container theirs of agent other"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(engine.CallsFor(*theirs), before + 2);  // listed, then inspected
  for (const std::string* id : {&*ours, &*stopped, &*unlabelled}) EXPECT_EQ(engine.CallsFor(*id), 1) << *id;  // listed

  // One removed between the list and its inspect holds nothing.
  ASSERT_TRUE(engine.RemoveBehindBack(*theirs).ok());
  for (ContainerInfo& info : *listed) info.cpuset_cpus.clear();
  ASSERT_TRUE(InspectForeignCpusets(engine, *listed, "me").ok());
  EXPECT_TRUE(CheckForeignHolders(*listed, ForeignTestClaims()).ok());
}

}  // namespace
}  // namespace slotd
