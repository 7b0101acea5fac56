// The node's side of scratch limits: RunProgram (mkfs.ext4's runner) and
// the configs ScratchProblems refuses.
#include "node/scratch_limits.h"

#include <gtest/gtest.h>

#include <string>

#include "common/subprocess.h"

namespace slotd {
namespace {

using std::chrono::milliseconds;

TEST(RunProgram, ReturnsTheOutputOfAProgramThatSucceedsAndNamesOneThatFails) {
  Result<std::string> ok = RunProgram({"sh", "-c", "echo out; echo err >&2"}, milliseconds(10'000));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*ok, "out\nerr\n");

  Result<std::string> failed = RunProgram({"sh", "-c", "echo 'bad superblock'; exit 3"}, milliseconds(10'000));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "sh exited with status 3: bad superblock");

  Result<std::string> missing = RunProgram({"no-such-program-of-slotd"}, milliseconds(10'000));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot run no-such-program-of-slotd"), std::string::npos)
      << missing.status().message();
}

TEST(RunProgram, KeepsABoundedOutputAndKillsAProgramPastItsDeadline) {
  Result<std::string> loud = RunProgram({"sh", "-c", "head -c 1000000 /dev/zero"}, milliseconds(10'000));
  ASSERT_TRUE(loud.ok()) << loud.status().message();
  EXPECT_EQ(loud->size(), kMaxProgramOutput);

  Result<std::string> slow = RunProgram({"sleep", "30"}, milliseconds(200));
  ASSERT_FALSE(slow.ok());
  EXPECT_EQ(slow.status().message(), "sleep did not finish within 200 ms and was killed");
}

Config WithScratch(ScratchType type, uint64_t size) {
  Config config;
  config.agent.var_base_path = "/nonexistent/slotd-test/var";
  config.container.scratch_type = type;
  config.container.scratch_size = size;
  return config;
}

TEST(ScratchProblems, AHostfileScratchNeedsASizeAndASizedHostdirOneNeedsProjectQuotas) {
  bool named = false;
  for (const std::string& problem : ScratchProblems(WithScratch(ScratchType::kHostFile, 0)))
    named = named || problem.rfind("container.scratch-size: scratch-type = \"hostfile\" needs a size", 0) == 0;
  EXPECT_TRUE(named);

  const Status quota = ProjectQuotaEnforced("/nonexistent/slotd-test/var/scratch");
  const std::vector<std::string> sized = ScratchProblems(WithScratch(ScratchType::kHostDir, 1ull << 30));
  if (quota.ok()) {
    EXPECT_TRUE(sized.empty());
  } else {
    ASSERT_EQ(sized.size(), 1u);
    EXPECT_EQ(sized[0], "container.scratch-size: a hostdir scratch is limited by project quotas, and "
                        "/nonexistent/slotd-test/var/scratch has none: " + quota.message() +
                        "; or set scratch-size = 0 (no limit), or choose scratch-type hostfile or tmpfs");
  }
  EXPECT_TRUE(ScratchProblems(WithScratch(ScratchType::kHostDir, 0)).empty());
  EXPECT_TRUE(ScratchProblems(WithScratch(ScratchType::kTmpfs, 1ull << 30)).empty());
}

TEST(FreeBytes, ReadsTheNearestExistingDirectory) {
  // Not made yet: the filesystem it will be on (the root's, here) is read.
  Result<uint64_t> free = FreeBytes("/nonexistent/slotd-test/var/scratch");
  EXPECT_TRUE(free.ok()) << free.status().message();
}

}  // namespace
}  // namespace slotd
