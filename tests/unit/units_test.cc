// Sizes, durations and core lists: the value syntaxes shared by agent.toml and the API.
#include "common/units.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace slotd {
namespace {

using std::chrono::milliseconds;

constexpr uint64_t kKiB = 1ull << 10;
constexpr uint64_t kTiB = 1ull << 40;

TEST(ParseSize, AcceptsBytesAndBinarySuffixes) {
  const std::vector<std::pair<std::string, uint64_t>> cases = {
      {"0", 0},           {"17", 17},          {"1k", kKiB},      {"512m", 512 * kMiB}, {"2g", 2 * kGiB},
      {"1t", kTiB},       {"2G", 2 * kGiB},    {"64M", 64 * kMiB}, {"512mb", 512 * kMiB}, {"2GiB", 2 * kGiB},
      {"1kib", kKiB},     {"3KB", 3 * kKiB},   {"18446744073709551615", UINT64_MAX},
  };
  for (const auto& [text, bytes] : cases) {
    Result<uint64_t> size = ParseSize(text);
    ASSERT_TRUE(size.ok()) << text << ": " << size.status().message();
    EXPECT_EQ(*size, bytes) << text;
  }
}

TEST(ParseSize, RejectsWhatIsNotASize) {
  for (const std::string text : {"", "abc", "-1", "+1", "1.5g", "1ib", "10b", "1x", " 1", "1 g", "g", "1gg", "0x10"}) {
    Result<uint64_t> size = ParseSize(text);
    ASSERT_FALSE(size.ok()) << "accepted \"" << text << "\" as " << *size;
    EXPECT_EQ(size.status().code(), Status::Code::kInvalidArgument);
  }
}

TEST(ParseSize, ErrorSaysWhatIsAccepted) {
  EXPECT_EQ(ParseSize("12q").status().message(),
            "invalid size \"12q\": expected a number of bytes with an optional suffix k, m, g or t "
            "(binary, e.g. 512m)");
}

TEST(ParseSize, RejectsSizesThatOverflow) {
  EXPECT_TRUE(ParseSize("16777215t").ok());
  EXPECT_EQ(ParseSize("16777216t").status().message(), "size \"16777216t\" is too large");
  EXPECT_FALSE(ParseSize("18446744073709551616").ok());
}

TEST(FormatSize, UsesTheLargestExactSuffix) {
  EXPECT_EQ(FormatSize(0), "0");
  EXPECT_EQ(FormatSize(17), "17");
  EXPECT_EQ(FormatSize(1536), "1536");
  EXPECT_EQ(FormatSize(1536 * kKiB), "1536k");
  EXPECT_EQ(FormatSize(256 * kMiB), "256m");
  EXPECT_EQ(FormatSize(64 * kGiB), "64g");
  EXPECT_EQ(FormatSize(kTiB), "1t");
  EXPECT_EQ(FormatSize(1024 * kTiB), "1024t");
}

TEST(FormatSize, RoundTripsThroughParseSize) {
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1}, kKiB + 1, 3 * kMiB, 1536 * kKiB, 7 * kTiB, UINT64_MAX}) {
    Result<uint64_t> parsed = ParseSize(FormatSize(bytes));
    ASSERT_TRUE(parsed.ok()) << FormatSize(bytes);
    EXPECT_EQ(*parsed, bytes);
  }
}

TEST(ParseDuration, AcceptsEachUnit) {
  const std::vector<std::pair<std::string, milliseconds>> cases = {
      {"250ms", milliseconds(250)},         {"10s", milliseconds(10'000)}, {"5m", milliseconds(300'000)},
      {"2h", milliseconds(7'200'000)},      {"0s", milliseconds(0)},       {"10S", milliseconds(10'000)},
      {"1500MS", milliseconds(1500)},
  };
  for (const auto& [text, expected] : cases) {
    Result<milliseconds> duration = ParseDuration(text);
    ASSERT_TRUE(duration.ok()) << text << ": " << duration.status().message();
    EXPECT_EQ(*duration, expected) << text;
  }
}

TEST(ParseDuration, RejectsWhatIsNotADuration) {
  for (const std::string text : {"", "10", "s", "ms", "1.5s", "-1s", "10d", "10 s", "s10", "10sec"}) {
    Result<milliseconds> duration = ParseDuration(text);
    EXPECT_FALSE(duration.ok()) << "accepted \"" << text << "\"";
  }
  EXPECT_EQ(ParseDuration("10").status().message(),
            "invalid duration \"10\": expected a number with ms, s, m or h (e.g. 10s)");
}

TEST(FormatDuration, UsesTheLargestExactUnitAndReadsBack) {
  const std::vector<std::pair<milliseconds, std::string>> cases = {
      {milliseconds(250), "250ms"}, {milliseconds(1'000), "1s"},  {milliseconds(1'500), "1500ms"},
      {milliseconds(300'000), "5m"}, {milliseconds(90'000), "90s"}, {milliseconds(7'200'000), "2h"},
      {milliseconds(0), "0ms"},
  };
  for (const auto& [duration, text] : cases) {
    EXPECT_EQ(FormatDuration(duration), text);
    EXPECT_EQ(*ParseDuration(text), duration) << text;
  }
}

TEST(ParseDuration, RejectsDurationsThatOverflow) {
  // 5e12 hours fits in uint64 milliseconds but not in the signed count of std::chrono::milliseconds.
  EXPECT_EQ(ParseDuration("5000000000000h").status().message(), "duration \"5000000000000h\" is too long");
  EXPECT_FALSE(ParseDuration("99999999999999999999s").ok());
  Result<milliseconds> max = ParseDuration("9223372036854775807ms");
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->count(), INT64_MAX);
}

TEST(ParseCoreList, AcceptsNumbersAndRanges) {
  const std::vector<std::pair<std::string, std::vector<int>>> cases = {
      {"0-3,8", {0, 1, 2, 3, 8}},  {"5", {5}},         {"8,0-3,2", {0, 1, 2, 3, 8}},
      {"0 - 3, 8", {0, 1, 2, 3, 8}}, {"4095", {4095}}, {"7-7", {7}},
  };
  for (const auto& [text, cores] : cases) {
    Result<std::vector<int>> parsed = ParseCoreList(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().message();
    EXPECT_EQ(*parsed, cores) << text;
  }
}

TEST(ParseCoreList, RejectsMalformedLists) {
  for (const std::string text : {"", " ", "1,,2", "1,", ",1", "a", "1-", "-1", "1 2", "1-2-3", "0x1", "1.5"}) {
    Result<std::vector<int>> parsed = ParseCoreList(text);
    EXPECT_FALSE(parsed.ok()) << "accepted \"" << text << "\"";
  }
}

TEST(ParseCoreList, ErrorsNameTheBadItem) {
  EXPECT_EQ(ParseCoreList("").status().message(), "invalid core list \"\": it is empty; write cores like 0-3,8");
  EXPECT_EQ(ParseCoreList("1,,2").status().message(), "invalid core list \"1,,2\": empty item; write cores like 0-3,8");
  EXPECT_EQ(ParseCoreList("0-3,x").status().message(),
            "invalid core list \"0-3,x\": \"x\" is not a core number or range like 0-3");
  EXPECT_EQ(ParseCoreList("3-1").status().message(), "invalid core list \"3-1\": range \"3-1\" ends before it starts");
  EXPECT_EQ(ParseCoreList("0-4096").status().message(), "invalid core list \"0-4096\": core 4096 is above 4095");
}

TEST(FormatCoreList, CompactsRuns) {
  EXPECT_EQ(FormatCoreList({}), "");
  EXPECT_EQ(FormatCoreList({5}), "5");
  EXPECT_EQ(FormatCoreList({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(FormatCoreList({1, 3, 5}), "1,3,5");
  EXPECT_EQ(FormatCoreList({0, 1, 4, 5, 6, 9}), "0-1,4-6,9");
}

TEST(FormatCoreList, RoundTripsThroughParseCoreList) {
  const std::vector<int> cores = {0, 2, 3, 4, 10, 11, 4095};
  Result<std::vector<int>> parsed = ParseCoreList(FormatCoreList(cores));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, cores);
}

}  // namespace
}  // namespace slotd
