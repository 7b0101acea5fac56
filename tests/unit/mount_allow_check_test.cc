// MountAllowProblems: the mount-allow entries `slotd check` (and the agent
// at start) refuse, because they would let a kernel reach the node itself.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/local_checks.h"

namespace slotd {
namespace {

Config WithMountAllow(std::vector<MountAllow> entries) {
  Config config;
  config.path = "/etc/slotd/a.toml";
  config.agent.id = "a";
  config.agent.ipc_base_path = "/run/slotd/a";
  config.agent.var_base_path = "/var/lib/slotd/a";
  config.agent.token_file = "/etc/slotd/a.token";
  config.node.claims_dir = "/run/slotd/node";
  config.container.docker_host = "unix:///var/run/docker.sock";
  config.container.mount_allow = std::move(entries);
  return config;
}

// The one problem `entry` makes, or "" when it makes none.
std::string ProblemOf(MountAllow entry) {
  const std::vector<std::string> problems = MountAllowProblems(WithMountAllow({std::move(entry)}));
  return problems.empty() ? "" : problems.front();
}

TEST(MountAllowCheck, TheWholeFilesystemAndTheNodesPseudoFilesystemsAreRefused) {
  EXPECT_NE(ProblemOf({"/", "ro"}).find("container.mount-allow[0]: / lets kernels mount the node's whole filesystem"),
            std::string::npos);
  for (const char* path : {"/proc", "/sys", "/dev", "/dev/shm", "/sys/fs/cgroup"}) {
    SCOPED_TRACE(path);
    EXPECT_NE(ProblemOf({path, "ro"}).find("the node's own kernel and devices"), std::string::npos);
  }
}

TEST(MountAllowCheck, ReadWriteEntriesOverSystemDirectoriesAreRefusedReadOnlyOnesAreNot) {
  for (const char* path : {"/etc", "/etc/ssl", "/usr", "/var/lib", "/var/lib/docker", "/var", "/root"}) {
    SCOPED_TRACE(path);
    EXPECT_NE(ProblemOf({path, "rw"}).find("a system directory of the node"), std::string::npos);
  }
  EXPECT_EQ(ProblemOf({"/usr/share/datasets", "ro"}), "");
  EXPECT_EQ(ProblemOf({"/srv/shared", "rw"}), "");
}

TEST(MountAllowCheck, EntriesHoldingTheAgentsOwnPathsOrTheEnginesSocketAreRefused) {
  EXPECT_NE(ProblemOf({"/var/run", "ro"}).find("holds the container engine's socket (/var/run/docker.sock)"),
            std::string::npos);
  EXPECT_NE(ProblemOf({"/run/slotd", "ro"}).find("holds the agent's ipc-base-path (/run/slotd/a)"),
            std::string::npos);
  EXPECT_NE(ProblemOf({"/etc/slotd", "ro"}).find("holds the agent's token-file"), std::string::npos);
  EXPECT_NE(ProblemOf({"/var/lib/slotd", "ro"}).find("holds the agent's var-base-path"), std::string::npos);
  EXPECT_EQ(ProblemOf({"/srv/datasets", "ro"}), "");
}

}  // namespace
}  // namespace slotd
