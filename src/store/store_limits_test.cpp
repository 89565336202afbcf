// The bounded parsing and one-line text every value read from a store goes
// through, with the forged values an outsider would write.
#include "store/store_limits.h"

#include <gtest/gtest.h>

namespace gpudiag::storelimits {
namespace {

TEST(StoreLimits, ParseBoundedTakesOnlyWholeNumbersInRange) {
  EXPECT_EQ(parse_bounded("0", 0, 10), 0);
  EXPECT_EQ(parse_bounded("10", 0, 10), 10);
  EXPECT_EQ(parse_bounded("-3", -5, 5), -3);
  for (const char* forged :
       {"", "abc", "1x", " 1", "1 ", "+1", "0x10", "1e3", "1.0", "11", "-1", "9223372036854775807",
        "9223372036854775808", "99999999999999999999999", "-9223372036854775809"})
    EXPECT_FALSE(parse_bounded(forged, 0, 10)) << "'" << forged << "'";
  EXPECT_EQ(parse_bounded("9223372036854775807", 0, INT64_MAX), INT64_MAX);
  EXPECT_FALSE(parse_bounded(std::string_view("1\0", 2), 0, 10));
}

TEST(StoreLimits, StoreTextIsOnePrintableLineOfBoundedLength) {
  EXPECT_EQ(store_text("rank 1 failed"), "rank 1 failed");
  EXPECT_EQ(store_text("a\nb\rc\td\x1b[31m"), "a?b?c?d?[31m");
  EXPECT_EQ(store_text(std::string(5000, 'x'), 10), std::string(10, 'x') + "...");
  EXPECT_EQ(store_text("n\xc5\x93ud"), "n\xc5\x93ud");  // UTF-8 kept
}

TEST(StoreLimits, CapsGrowWithTheWorldAndStayBounded) {
  EXPECT_GE(max_keys_per_request(256), 2u * 256);
  EXPECT_GE(max_request_frame(256), kMaxValueBytes);
  EXPECT_LE(max_request_frame(1 << 20), kMaxReplyFrame);
  EXPECT_EQ(max_keys_per_request(0), max_keys_per_request(kDefaultWorld));
  EXPECT_GE(max_connections(1000), 1000u + 1000u);
}

}  // namespace
}  // namespace gpudiag::storelimits
