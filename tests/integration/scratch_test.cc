// Per-kernel scratch limits: a kernel that fills its scratch stops at its
// own size (an ext4 image, a tmpfs, a project quota) and leaves the node's
// disk to the others; creates stop while the scratch filesystem is below
// its floor; `slotd check` says which limits the node can do.
#include <signal.h>
#include <sys/mount.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "integration/harness.h"
#include "node/scratch_limits.h"

namespace slotd::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json Kernel(const std::string& id) { return SleepKernel(id, "64m"); }

// Runs `script` in the kernel; its stdout and stderr together.
std::string RunWithErrors(const AgentProcess& agent, const std::string& kernel_id, const std::string& script) {
  return RunIn(agent, kernel_id, "{ " + script + "; } 2>&1");
}

// Writes `mib` MiB into the kernel's scratch; "written" or dd's complaint.
std::string Fill(const AgentProcess& agent, const std::string& kernel_id, int mib) {
  return RunWithErrors(agent, kernel_id,
                       "dd if=/dev/zero of=/home/work/fill bs=1M count=" + std::to_string(mib) + " && sync && echo written");
}

// True when a filesystem is mounted at `path` in this (the agent's) mount namespace.
bool Mounted(const std::string& path) {
  std::ifstream mounts("/proc/self/mountinfo");
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string id, parent, device, root, point;
    fields >> id >> parent >> device >> root >> point;
    if (point == path) return true;
  }
  return false;
}

// The finding: one kernel filling the shared scratch filesystem made every
// new kernel's scratch unusable. With hostfile, each kernel's scratch is an
// image of its own size.
TEST(Scratch, AKernelFillingItsHostfileScratchStopsAtItsOwnSizeAndAnotherKernelStillWrites) {
  if (Status possible = LoopImagesPossible(); !possible.ok()) GTEST_SKIP() << possible.message();
  AgentProcess agent(TwoCoreAgent("hostfile", "scratch-type = \"hostfile\"\nscratch-size = \"32m\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const std::string root = agent.dir() + "/var/scratch";

  agent.CreateKernel(Kernel("filler"));
  json big = Kernel("big");
  big["resources"]["scratch"] = "128m";
  agent.CreateKernel(big);
  EXPECT_TRUE(Mounted(root + "/filler"));
  EXPECT_TRUE(fs::exists(root + "/.slotd-images/filler.ext4"));

  const std::string filled = Fill(agent, "filler", 64);
  EXPECT_NE(filled.find("No space left on device"), std::string::npos) << filled;
  EXPECT_EQ(filled.find("written"), std::string::npos) << filled;
  const std::string wrote = Fill(agent, "big", 64);
  EXPECT_NE(wrote.find("written"), std::string::npos) << wrote;
  // The kernel's user owns its scratch, and other users cannot reach it.
  EXPECT_EQ(RunIn(agent, "big", "stat -c %a /home/work"), "700\n");

  agent.CallJson("DELETE", "/v1/kernels/filler", nullptr, 200);
  EXPECT_FALSE(Mounted(root + "/filler"));
  EXPECT_FALSE(fs::exists(root + "/.slotd-images/filler.ext4"));
  EXPECT_FALSE(fs::exists(root + "/filler"));

  // An agent restart keeps the image, its data and its mount; after a
  // reboot (the image unmounted) it mounts the image again.
  agent.Kill(SIGTERM);
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_NE(RunIn(agent, "big", "ls -l /home/work/fill").find("67108864"), std::string::npos);
  EXPECT_TRUE(Mounted(root + "/big"));
  agent.Kill(SIGTERM);
  ASSERT_EQ(::umount2((root + "/big").c_str(), MNT_DETACH), 0);
  EXPECT_FALSE(fs::exists(root + "/big/fill"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  EXPECT_TRUE(Mounted(root + "/big"));
  EXPECT_EQ(fs::file_size(root + "/big/fill"), 64u << 20);
  agent.CallJson("DELETE", "/v1/kernels/big", nullptr, 200);
  EXPECT_FALSE(Mounted(root + "/big"));
  EXPECT_FALSE(fs::exists(root + "/.slotd-images/big.ext4"));
}

TEST(Scratch, ATmpfsScratchHasTheSizeTheKernelAsksFor) {
  AgentProcess agent(TwoCoreAgent("tmpfs", "scratch-type = \"tmpfs\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  json small = Kernel("small");
  small["resources"]["scratch"] = "16m";
  agent.CreateKernel(small);
  const std::string filled = Fill(agent, "small", 24);
  EXPECT_NE(filled.find("No space left on device"), std::string::npos) << filled;
  agent.CallJson("DELETE", "/v1/kernels/small", nullptr, 200);
}

// A hostdir scratch is limited by a project quota where the scratch root
// enforces them; elsewhere a request for a size is refused, naming why,
// and so is an agent whose scratch-size needs them.
TEST(Scratch, AHostdirScratchIsLimitedByAProjectQuotaOrASizeIsRefusedSayingWhy) {
  AgentProcess agent(TwoCoreAgent("hostdir", ""));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const Status quota = ProjectQuotaEnforced(agent.dir() + "/var/scratch");
  json sized = Kernel("sized");
  sized["resources"]["scratch"] = "16m";
  const HttpResponse created = agent.Call("POST", "/v1/kernels", sized.dump());
  if (quota.ok()) {
    ASSERT_EQ(created.status, 201) << created.body;
    const std::string filled = Fill(agent, "sized", 24);
    EXPECT_NE(filled.find("Disk quota exceeded"), std::string::npos) << filled;
    agent.CallJson("DELETE", "/v1/kernels/sized", nullptr, 200);
  } else {
    EXPECT_EQ(created.status, 409) << created.body;
    EXPECT_NE(created.body.find("resources.scratch: this agent cannot limit a kernel's scratch"), std::string::npos)
        << created.body;
    EXPECT_NE(created.body.find(quota.message()), std::string::npos) << created.body;
    EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);
  }
  agent.Kill(SIGTERM);

  AgentProcess limited(TwoCoreAgent("hostdir-limited", "scratch-size = \"1g\"\n"));
  CommandResult check = Slotd({"check", limited.config_path()});
  EXPECT_NE(check.out.find("note: " + limited.config_path() + ": scratch limits on this node for "), std::string::npos)
      << check.out;
  EXPECT_NE(check.out.find("hostdir by project quota: " + std::string(quota.ok() ? "yes" : "no, ")), std::string::npos)
      << check.out;
  const Status loop = LoopImagesPossible();
  EXPECT_NE(check.out.find("hostfile (loop-mounted ext4 images): " + std::string(loop.ok() ? "yes" : "no, ")),
            std::string::npos)
      << check.out;
  if (!quota.ok()) {
    EXPECT_EQ(check.exit_code, 1) << check.out;
    EXPECT_NE(check.out.find("container.scratch-size: a hostdir scratch is limited by project quotas"),
              std::string::npos)
        << check.out;
    EXPECT_FALSE(limited.Start());
    EXPECT_NE(limited.log().find("container.scratch-size: a hostdir scratch is limited by project quotas"),
              std::string::npos)
        << limited.log();
  }
}

TEST(Scratch, CreatesAreRefusedWhileTheScratchFilesystemIsBelowItsFloor) {
  AgentProcess agent(TwoCoreAgent("floor", "scratch-min-free = \"1000000t\"\n"));
  ASSERT_TRUE(agent.Start()) << agent.log();
  const HttpResponse created = agent.Call("POST", "/v1/kernels", Kernel("late").dump());
  EXPECT_EQ(created.status, 422) << created.body;
  EXPECT_NE(created.body.find("insufficient scratch space: the filesystem of the scratch root " + agent.dir() +
                              "/var/scratch has "),
            std::string::npos)
      << created.body;
  EXPECT_NE(created.body.find("less than [container] scratch-min-free (1000000t)"), std::string::npos)
      << created.body;
  // Nothing was kept.
  EXPECT_EQ(agent.CallJson("GET", "/v1/kernels", nullptr, 200)["kernels"].size(), 0u);
  EXPECT_EQ(agent.CallJson("GET", "/v1/agent", nullptr, 200)["resources"]["cpu"]["used"], 0);
}

}  // namespace
}  // namespace slotd::testing
