// ResolveUser: the user an image runs as, decided as the runtime decides it,
// from tables of user strings and the image's /etc/passwd and /etc/group.
#include "model/image_user.h"

#include <gtest/gtest.h>

#include <string>

namespace slotd {
namespace {

constexpr char kPasswd[] =
    "root:x:0:0:root:/root:/bin/sh\n"
    "toor:x:0:0:another name of root:/root:/bin/sh\n"
    "\n"
    "broken line\n"
    "work:x:1000:1000::/home/work:/bin/sh\n"
    "1001:x:0:0:a user named by a number:/:/bin/sh\n"
    "nobody:x:65534:65534::/:/bin/false\n";
constexpr char kGroup[] = "root:x:0:\nwheel:x:10:work\nwork:x:1000:\n";

TEST(ImageUser, NumbersAreReadAsTheRuntimeReadsThem) {
  struct Case {
    const char* text;
    std::optional<int64_t> number;
  };
  for (const Case& c : {Case{"0", 0}, Case{"00", 0}, Case{"+0", 0}, Case{"0000", 0}, Case{"-0", 0}, Case{"1000", 1000},
                        Case{"+1000", 1000}, Case{"-5", -5}, Case{"", std::nullopt}, Case{"+", std::nullopt},
                        Case{"++0", std::nullopt}, Case{"+-0", std::nullopt}, Case{" 0", std::nullopt},
                        Case{"0 ", std::nullopt}, Case{"0x0", std::nullopt}, Case{"root", std::nullopt},
                        Case{"99999999999999999999", std::nullopt}}) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(NumericId(c.text), c.number);
  }
}

TEST(ImageUser, RootByNumberOrByAnotherNameIsRoot) {
  struct Case {
    const char* user;
    RunAs run_as;
  };
  for (const Case& c : {Case{"", {0, 0}}, Case{"0", {0, 0}}, Case{"00", {0, 0}}, Case{"+0", {0, 0}},
                        Case{"0000:0", {0, 0}}, Case{"root", {0, 0}}, Case{"toor", {0, 0}},
                        Case{"1001", {0, 0}},  // the first line whose name is "1001" says uid 0
                        Case{"work", {1000, 1000}}, Case{"1000", {1000, 1000}}, Case{"+1000", {1000, 1000}},
                        Case{"work:wheel", {1000, 10}}, Case{"work:10", {1000, 10}}, Case{"4242", {4242, 0}},
                        Case{"4242:4343", {4242, 4343}}, Case{"nobody:0", {65534, 0}}, Case{"work:", {1000, 1000}}}) {
    SCOPED_TRACE(c.user);
    Result<RunAs> run_as = ResolveUser(c.user, kPasswd, kGroup);
    ASSERT_TRUE(run_as.ok()) << run_as.status().message();
    EXPECT_EQ(*run_as, c.run_as);
  }
}

TEST(ImageUser, WithoutTheImagesFilesOnlyNumbersResolve) {
  EXPECT_EQ(ResolveUser("00", "", "")->uid, 0);
  EXPECT_EQ(ResolveUser("", "", "")->uid, 0);
  EXPECT_EQ(ResolveUser("1000:1000", "", "")->uid, 1000);
  Result<RunAs> named = ResolveUser("toor", "", "");
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(named.status().message().find("names the user \"toor\", which the image's /etc/passwd does not have"),
            std::string::npos)
      << named.status().message();
}

TEST(ImageUser, UnknownNamesAndIdsOutOfRangeAreRefusedAsTheRuntimeWould) {
  for (const char* user : {"ghost", "work:ghosts", "-1", "2147483648", "work:-3"}) {
    SCOPED_TRACE(user);
    Result<RunAs> run_as = ResolveUser(user, kPasswd, kGroup);
    ASSERT_FALSE(run_as.ok());
    EXPECT_EQ(run_as.status().code(), Status::Code::kInvalidArgument);
  }
}

TEST(ImageUser, TheIdsOfAProcessAreReadFromItsStatus) {
  const std::optional<ProcessIds> ids =
      StatusIds("Name:\tsh\nUid:\t1000\t1000\t0\t1000\nGid:\t1\t1\t1\t1\nGroups:\t1 27 \nNSpid:\t9\n");
  ASSERT_TRUE(ids);
  EXPECT_EQ(ids->uids, (std::array<int64_t, 4>{1000, 1000, 0, 1000}));
  EXPECT_EQ(ids->gids, (std::array<int64_t, 4>{1, 1, 1, 1}));
  EXPECT_EQ(ids->groups, (std::vector<int64_t>{1, 27}));
  const std::optional<ProcessIds> bare = StatusIds("Uid:\t0\t0\t0\t0\nGid:\t5\t5\t5\t5\nGroups:\t\n");
  ASSERT_TRUE(bare);
  EXPECT_TRUE(bare->groups.empty());
  for (const char* broken : {"Name:\tsh\n", "Uid:\t1\t2\nGid:\t1\t1\t1\t1\n", "Uid:\t1\t1\t1\t1\n",
                             "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\tx\n", "XUid:\t1\t1\t1\t1\n", ""}) {
    SCOPED_TRACE(broken);
    EXPECT_FALSE(StatusIds(broken));
  }
}

// The user a kernel's processes run as, decided at create, against what a
// process of it runs as: the rule behind the checks after every start.
TEST(ImageUser, AProcessIsJudgedAgainstTheUserDecidedAtCreateAndTheRootRule) {
  auto ids = [](int64_t uid, int64_t gid, std::vector<int64_t> groups) {
    return ProcessIds{{uid, uid, uid, uid}, {gid, gid, gid, gid}, std::move(groups)};
  };
  const RunAs work{1000, 1000};
  struct Case {
    const char* what;
    ProcessIds ids;
    std::optional<RunAs> decided;
    bool allow_root;
    const char* problem;  // a part of the problem; "" none
  };
  const Case cases[] = {
      {"as decided", ids(1000, 1000, {1000}), work, false, ""},
      {"root by a rewritten passwd", ids(0, 0, {0}), work, false, "runs as root (uid 0)"},
      {"root, allowed, but not as decided", ids(0, 0, {0}), work, true, "runs as uid 0, not as uid 1000"},
      {"another user", ids(1001, 1000, {1000}), work, false, "runs as uid 1001"},
      {"root's group", ids(1000, 0, {0}), work, false, "runs in root's group (gid 0)"},
      {"root's group among its groups", ids(1000, 1000, {1000, 0}), work, false, "root's group (gid 0) among"},
      {"a group it was not given", ids(1000, 1000, {1000, 27}), work, false, "has group 27 among its groups"},
      {"no decision recorded, not root", ids(1000, 1000, {1000, 27}), std::nullopt, false, ""},
      {"no decision recorded, root", ids(0, 0, {}), std::nullopt, false, "runs as root"},
      {"no decision recorded, root allowed", ids(0, 0, {0}), std::nullopt, true, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string problem = IdsProblem(c.ids, c.decided, c.allow_root);
    if (std::string(c.problem).empty()) {
      EXPECT_EQ(problem, "");
    } else {
      EXPECT_NE(problem.find(c.problem), std::string::npos) << problem;
    }
  }
}

TEST(ImageUser, AUserDecidedIsWrittenAsNumbersAndReadBackOnlyAsThem) {
  EXPECT_EQ((RunAs{1000, 50}).Text(), "1000:50");
  EXPECT_EQ(ParseRunAs("1000:50"), (RunAs{1000, 50}));
  EXPECT_EQ(ParseRunAs("0:0"), (RunAs{0, 0}));
  EXPECT_EQ(ParseRunAs("2147483647:1"), (RunAs{2147483647, 1}));
  for (const char* bad : {"", "1000", "work:work", "1000:", ":5", "+1:1", "-1:1", "1:1:1", "2147483648:1", " 1:1",
                          "99999999999:1"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(ParseRunAs(bad), std::nullopt);
  }
}

}  // namespace
}  // namespace slotd
