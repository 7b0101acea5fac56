// `slotd --version` and `slotctl --version`: the real binaries print the
// release and the source commit they were built from (the same build's
// common/version.h values) and exit 0; no agent or engine is involved.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include "model/kernel.h"
#include "common/version.h"
#include "integration/harness.h"

namespace slotd::testing {
namespace {

TEST(Version, SlotdPrintsVersionCommitAndLabelFormat) {
  const CommandResult result = RunCommand({std::string(SLOTD_BIN_DIR) + "/slotd", "--version"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, std::string("slotd ") + kSlotdVersion + " (commit " + kSlotdCommit + "), label format " +
                            std::to_string(label::kCurrentFormat) + "\n");
}

TEST(Version, SlotctlPrintsVersionAndCommit) {
  const CommandResult result = Slotctl({"--version"});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, std::string("slotctl ") + kSlotdVersion + " (commit " + kSlotdCommit + ")\n");
}

// Built from a git checkout, the commit is known: a hex abbreviation,
// possibly with describe's tag and -dirty parts, never "unknown".
TEST(Version, CommitIsKnownInAGitCheckout) {
  struct stat git {};
  if (::stat((std::string(SLOTD_SOURCE_DIR) + "/.git").c_str(), &git) != 0)
    GTEST_SKIP() << "the source tree is not a git checkout";
  const std::string commit = kSlotdCommit;
  EXPECT_NE(commit, "unknown");
  const CommandResult head = RunCommand({"git", "-C", SLOTD_SOURCE_DIR, "rev-parse", "--short=7", "HEAD"});
  ASSERT_EQ(head.exit_code, 0) << head.err;
  EXPECT_NE(commit.find(head.out.substr(0, 7)), std::string::npos)
      << "built from " << commit << ", the checkout is at " << head.out << " (rebuild after a commit)";
}

}  // namespace
}  // namespace slotd::testing
