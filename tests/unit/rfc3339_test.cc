// RFC 3339 times as engines write them, UTC offsets included, and what is
// not one.
#include "common/rfc3339.h"

#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace slotd {
namespace {

struct Row {
  const char* text;
  std::optional<int64_t> millis;
};

TEST(Rfc3339, ReadsUtcAndOffsetTimesToTheMillisecondAndRefusesWhatIsNotOne) {
  const Row rows[] = {
      {"1970-01-01T00:00:00Z", 0},
      {"2024-05-01T12:34:56Z", 1714566896000},
      {"2024-05-01T12:34:56.1Z", 1714566896100},
      {"2024-05-01T12:34:56.123456789Z", 1714566896123},  // Docker's nanoseconds: the first three digits
      {"2024-05-01t12:34:56.5z", 1714566896500},
      {"2024-05-01 12:34:56Z", 1714566896000},
      // Podman writes the host's offset: the same moment.
      {"2024-05-01T14:34:56.123+02:00", 1714566896123},
      {"2024-05-01T07:04:56-05:30", 1714566896000},
      {"2024-05-02T00:34:56+12:00", 1714566896000},
      {"2024-05-01T12:34:56+00:00", 1714566896000},
      {"2024-05-01T12:34:56-00:00", 1714566896000},
      // Dates at the edges of their ranges.
      {"2024-02-29T00:00:00Z", 1709164800000},
      {"2000-02-29T00:00:00Z", 951782400000},
      {"2016-12-31T23:59:60Z", 1483228799999},  // a leap second: the end of its minute
      {"1969-12-31T23:59:59Z", -1000},
      {"0001-01-01T00:00:00Z", -62135596800000},  // Docker's "never"
      // Not RFC 3339 times.
      {"", std::nullopt},
      {"2024-05-01", std::nullopt},
      {"2024-05-01T12:34:56", std::nullopt},  // no offset
      {"2024-05-01T12:34:56.Z", std::nullopt},
      {"2024-05-01T12:34:56+2:00", std::nullopt},
      {"2024-05-01T12:34:56+02", std::nullopt},
      {"2024-05-01T12:34:56+0200", std::nullopt},
      {"2024-05-01T12:34:56+24:00", std::nullopt},
      {"2024-05-01T12:34:56+02:60", std::nullopt},
      {"2024-05-01T12:34:56Zjunk", std::nullopt},
      {"2023-02-29T00:00:00Z", std::nullopt},
      {"1900-02-29T00:00:00Z", std::nullopt},
      {"2024-13-01T00:00:00Z", std::nullopt},
      {"2024-00-01T00:00:00Z", std::nullopt},
      {"2024-04-31T00:00:00Z", std::nullopt},
      {"2024-05-01T24:00:00Z", std::nullopt},
      {"2024-05-01T23:60:00Z", std::nullopt},
      {"2024-05-01T23:59:61Z", std::nullopt},
      {"2024-05-01X12:34:56Z", std::nullopt},
      {"+024-05-01T12:34:56Z", std::nullopt},
      {"2024-05-01T12:34:5\xff" "Z", std::nullopt},
  };
  for (const Row& row : rows) EXPECT_EQ(ParseRfc3339Millis(row.text), row.millis) << row.text;
}

}  // namespace
}  // namespace slotd
