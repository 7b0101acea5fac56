// ResolveUser: the user an image runs as, decided as the runtime decides it,
// from tables of user strings and the image's /etc/passwd and /etc/group.
#include "agent/image_user.h"

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

TEST(ImageUser, TheUidsOfAProcessAreReadFromItsStatus) {
  EXPECT_EQ(StatusUids("Name:\tsh\nUid:\t1000\t1000\t0\t1000\nGid:\t1\t1\t1\t1\n"),
            (std::array<int64_t, 4>{1000, 1000, 0, 1000}));
  EXPECT_EQ(StatusUids("Uid:\t0\t0\t0\t0"), (std::array<int64_t, 4>{0, 0, 0, 0}));
  EXPECT_EQ(StatusUids("Name:\tsh\n"), std::nullopt);
  EXPECT_EQ(StatusUids("Uid:\t1\t2\n"), std::nullopt);
  EXPECT_EQ(StatusUids(""), std::nullopt);
}

}  // namespace
}  // namespace slotd
