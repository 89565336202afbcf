#include "util/strings.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

TEST(ParseInt, AcceptsWholeDecimalOnly) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-3"), -3);
  EXPECT_EQ(parse_int(""), std::nullopt);
  EXPECT_EQ(parse_int("4x"), std::nullopt);
  EXPECT_EQ(parse_int(" 4"), std::nullopt);
  EXPECT_EQ(parse_int("99999999999999999999999"), std::nullopt);
}

TEST(Split, KeepsEmptyFields) {
  EXPECT_EQ(split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (std::vector<std::string>{""}));
}

TEST(HumanBytes, PicksUnit) {
  EXPECT_EQ(human_bytes(268435456), "256 MiB");
  EXPECT_EQ(human_bytes(1536), "1.50 KiB");
  EXPECT_EQ(human_bytes(7), "7 B");
}

TEST(EditDistance, CountsEdits) {
  EXPECT_EQ(edit_distance("chek", "check"), 1u);
  EXPECT_EQ(edit_distance("scan", "scan"), 0u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(Strings, PrefixLines) {
  EXPECT_EQ(prefix_lines("a\nb\n", "# "), "# a\n# b\n");
  EXPECT_EQ(prefix_lines("a\nb", "# "), "# a\n# b");
  EXPECT_EQ(prefix_lines("", "# "), "");
}

TEST(RankRanges, RunsOfThreeOrMoreAreRangesInAnyOrder) {
  EXPECT_EQ(rank_ranges({5, 0, 1, 2, 7, 8, 3, 3}), "0-3,5,7,8");
  EXPECT_EQ(rank_ranges({1, 2}), "1,2");
  EXPECT_EQ(rank_ranges({}), "");
  EXPECT_EQ(rank_ranges({4294967296LL, 4294967297LL, 4294967298LL}), "4294967296-4294967298");
}

}  // namespace
}  // namespace gpudiag
