// How many threads the agent keeps at rest: counted from /proc/<pid>/task
// of a real slotd that serves (the API's lanes included), with the smallest
// config: no etcd, no CUDA, no warm pool. docs/architecture.md lists them.
#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "integration/harness.h"

namespace slotd::testing {
namespace {

// The names of the threads of process `pid` (their comm), sorted.
std::vector<std::string> ThreadNames(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  std::vector<std::string> names;
  DIR* dir = opendir(tasks.c_str());
  if (dir == nullptr) return names;
  while (const dirent* entry = readdir(dir)) {
    const std::string tid = entry->d_name;
    if (tid == "." || tid == "..") continue;
    std::ifstream comm(tasks + "/" + tid + "/comm");
    std::string name;
    std::getline(comm, name);
    names.push_back(name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Threads, AnAgentAtRestKeepsAtMostFifteen) {
  AgentOptions options;
  options.id = "it-" + RunTag() + "-threads";
  AgentProcess agent(options);
  ASSERT_TRUE(agent.Start()) << agent.log();
  const std::vector<std::string> names = ThreadNames(agent.pid());
  // A count of none would pass without having counted: the agent's API thread must be among them.
  ASSERT_NE(std::find(names.begin(), names.end(), "api-io"), names.end())
      << "no thread named api-io in /proc/" << agent.pid() << "/task";
  std::string listed;
  for (const std::string& name : names) listed += "\n  " + name;
  EXPECT_LE(names.size(), 15u) << "the agent's threads:" << listed;
  RecordProperty("threads", static_cast<int>(names.size()));
  std::cout << names.size() << " threads:" << listed << "\n";
}

}  // namespace
}  // namespace slotd::testing
