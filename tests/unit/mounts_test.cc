// ResolveMounts: a request's mounts against [container] mount-allow, on a
// real directory tree, escapes through ".." and symbolic links included.
#include "agent/mounts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "testing/temp_tree.h"

namespace slotd {
namespace {

class MountsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tree_.Write("datasets/imagenet/train/0.jpg", "x");
    tree_.Write("shared/out/.keep", "");
    tree_.Write("secrets/key", "k");
    std::filesystem::create_symlink(tree_.root() + "/secrets", tree_.root() + "/datasets/escape");
    std::filesystem::create_symlink(tree_.root() + "/datasets/imagenet", tree_.root() + "/shared/imagenet-link");
    allowed_ = {{tree_.root() + "/datasets", "ro"}, {tree_.root() + "/shared", "rw"}};
  }

  // Resolves one mount of `source` at `target`.
  Result<std::vector<Mount>> Resolve(const std::string& source, const std::string& target, bool read_only) const {
    return ResolveMounts({{source, target, read_only}}, allowed_);
  }

  TempTree tree_{"slotd-mounts"};
  std::vector<MountAllow> allowed_;
};

TEST_F(MountsTest, AnAllowedDirectoryIsMountedByItsResolvedPath) {
  Result<std::vector<Mount>> mounts = ResolveMounts(
      {{tree_.root() + "/datasets/imagenet", "/data", true}, {tree_.root() + "/shared/out", "/out", false}}, allowed_);
  ASSERT_TRUE(mounts.ok()) << mounts.status().message();
  EXPECT_EQ(*mounts, (std::vector<Mount>{{Mount::Type::kBind, tree_.root() + "/datasets/imagenet", "/data", true, 0},
                                         {Mount::Type::kBind, tree_.root() + "/shared/out", "/out", false, 0}}));
}

TEST_F(MountsTest, AReadWriteMountOfAReadOnlyEntryIsRefused) {
  Result<std::vector<Mount>> mounts = Resolve(tree_.root() + "/datasets/imagenet", "/data", false);
  ASSERT_FALSE(mounts.ok());
  EXPECT_EQ(mounts.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(mounts.status().message().find("mounts[0]: " + tree_.root() + "/datasets/imagenet may be mounted "
                                           "read-only only; set \"readonly\": true"),
            std::string::npos)
      << mounts.status().message();
}

TEST_F(MountsTest, EscapesThroughDotDotAndSymbolicLinksAreRefusedNamingWhereTheyLead) {
  for (const std::string& source : {tree_.root() + "/datasets/escape", tree_.root() + "/datasets/../secrets",
                                    tree_.root() + "/datasets/escape/key", std::string("/etc")}) {
    SCOPED_TRACE(source);
    Result<std::vector<Mount>> mounts = Resolve(source, "/data", true);
    ASSERT_FALSE(mounts.ok());
    EXPECT_EQ(mounts.status().code(), Status::Code::kPermissionDenied);
    EXPECT_NE(mounts.status().message().find("is not in a directory this agent lets kernels mount; allowed: " +
                                             tree_.root() + "/datasets (ro), " + tree_.root() + "/shared (rw)"),
              std::string::npos)
        << mounts.status().message();
  }
  // A link from a read-write entry into a read-only one is read-only.
  Result<std::vector<Mount>> linked = Resolve(tree_.root() + "/shared/imagenet-link", "/data", false);
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("(that is, " + tree_.root() + "/datasets/imagenet)"), std::string::npos)
      << linked.status().message();
}

TEST_F(MountsTest, TargetsOverWhatTheAgentProvidesAreRefused) {
  for (const std::string& target : {"/proc", "/proc/1", "/sys", "/dev", "/dev/shm", "/home/work", "/home/work/x", "/"}) {
    SCOPED_TRACE(target);
    Result<std::vector<Mount>> mounts = Resolve(tree_.root() + "/shared", target, false);
    ASSERT_FALSE(mounts.ok());
    EXPECT_EQ(mounts.status().code(), Status::Code::kPermissionDenied);
    EXPECT_EQ(mounts.status().message().rfind("mounts[0].target: ", 0), 0u) << mounts.status().message();
  }
  EXPECT_TRUE(Resolve(tree_.root() + "/shared", "/home/workspace", false).ok());
  EXPECT_TRUE(Resolve(tree_.root() + "/shared", "/home", false).ok());
}

TEST_F(MountsTest, WithoutMountAllowNothingMayBeMountedAndAMissingSourceIsABadRequest) {
  Result<std::vector<Mount>> none = ResolveMounts({{tree_.root() + "/shared", "/data", true}}, {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("allowed: none ([container] mount-allow is not set)"), std::string::npos)
      << none.status().message();
  Result<std::vector<Mount>> missing = Resolve(tree_.root() + "/datasets/nope", "/data", true);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(missing.status().message().rfind("mounts[0].source: ", 0), 0u) << missing.status().message();
}

}  // namespace
}  // namespace slotd
