// ASCII case for protocol text: only A-Z change, and bytes above 127 are
// compared as themselves.
#include "common/ascii.h"

#include <gtest/gtest.h>

namespace slotd {
namespace {

TEST(Ascii, OnlyAsciiCapitalsChangeAndOtherBytesCompareAsThemselves) {
  EXPECT_EQ(AsciiLowered("Transfer-Encoding: CHUNKED 09_@[`{"), "transfer-encoding: chunked 09_@[`{");
  EXPECT_EQ(AsciiLowered("\xc3\x89t\xc3\xa9"), "\xc3\x89t\xc3\xa9");  // "Été": not ASCII, left as it is
  EXPECT_TRUE(EqualsIgnoringAsciiCase("Chunked", "cHUNKED"));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("chunked", "chunked "));
  EXPECT_FALSE(EqualsIgnoringAsciiCase("\xe0", "\xc0"));  // Latin-1 "à" and "À" are not ASCII letters
  EXPECT_FALSE(EqualsIgnoringAsciiCase("[", "{"));
  EXPECT_TRUE(StartsWithIgnoringAsciiCase("Bearer abc", "bearer"));
  EXPECT_FALSE(StartsWithIgnoringAsciiCase("Bear", "bearer"));
  EXPECT_TRUE(StartsWithIgnoringAsciiCase("\xff\xfe", "\xff"));
}

}  // namespace
}  // namespace slotd
