// The checkpoint digest (checkpoint_digest.h) read back as the ranks read it:
// every missing rank survives the round trip, rank 0 included (under the
// tree a dead rank 0 is named by the others only through the digest), and
// a reader never lists itself. Thousands missing stay far under the store's
// value limit: a lost rack is one range, thousands scattered are the first
// ranges and a count, and a digest whose ranges break the rules is refused.
#include "plane/checkpoint_digest.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "store/store_limits.h"

namespace gpudiag {
namespace {

TEST(CheckpointDigest, RankZeroMissingSurvivesTheRoundTrip) {
  const std::string text = encode_digest({0, 5}, {{0, "pid 42 on node0, last phase: exchange"}},
                                         std::nullopt, "", {});
  Gathered g;
  ASSERT_TRUE(decode_digest(text, 3, 8, g));
  EXPECT_EQ(g.missing, (std::vector<int>{0, 5}));
  EXPECT_EQ(g.notes.at(0), "pid 42 on node0, last phase: exchange") << text;
  // Read by a missing rank itself: never its own name.
  Gathered self;
  ASSERT_TRUE(decode_digest(text, 0, 8, self));
  EXPECT_EQ(self.missing, (std::vector<int>{5}));
}

TEST(CheckpointDigest, TheFlatJudgesDigestKeepsRankZeroToo) {
  Gathered g;
  g.records.resize(4);
  g.missing = {0, 2};
  Gathered back;
  ASSERT_TRUE(decode_digest(encode_digest(g), 1, 4, back));
  EXPECT_EQ(back.missing, (std::vector<int>{0, 2}));
}

TEST(CheckpointDigest, FiftyThousandMissingInOneRangeIsOneRange) {
  const int world = 100000;
  std::vector<int> missing;
  for (int r = 30000; r < 80000; ++r) missing.push_back(r);
  std::map<int, std::string> notes;
  for (int r = 30000; r < 30100; ++r) notes[r] = "never joined its node's leader";
  const std::string text = encode_digest(missing, notes, std::nullopt, "", {});
  EXPECT_LT(text.size(), 8u << 10) << text.size();  // 64 notes and one range
  EXPECT_NE(text.find("\"missing\":[[30000,79999]]"), std::string::npos);
  Gathered g;
  ASSERT_TRUE(decode_digest(text, 5, world, g));
  EXPECT_EQ(g.missing, missing);
  EXPECT_EQ(g.missing_unlisted, 0);
  EXPECT_FALSE(g.complete());
  // A missing reader leaves itself out, and the range around it stands.
  Gathered self;
  ASSERT_TRUE(decode_digest(text, 40000, world, self));
  EXPECT_EQ(self.missing.size(), 49999u);
}

TEST(CheckpointDigest, TenThousandScatteredAreTheFirstRangesAndACount) {
  const int world = 100000;
  Gathered g;
  g.records.resize(world);
  g.notes.resize(world);
  for (int r = 1; r <= 30000; r += 3) g.missing.push_back(r);  // 10,000, none adjacent
  g.review = std::string(kMaxDigestReview, 'r');
  const std::string text = encode_digest(g);
  EXPECT_LT(text.size(), storelimits::kMaxValueBytes);
  EXPECT_LT(text.size(), kMaxDigestReview + kMaxMissingRanges * 20 + (16u << 10));
  Gathered back;
  ASSERT_TRUE(decode_digest(text, 0, world, back));
  ASSERT_EQ(back.missing.size(), kMaxMissingRanges);
  EXPECT_EQ(back.missing.front(), 1);
  EXPECT_EQ(back.missing.back(), 1 + 3 * static_cast<int>(kMaxMissingRanges - 1));
  EXPECT_EQ(back.missing_unlisted, 10000 - static_cast<int>(kMaxMissingRanges));
  EXPECT_FALSE(back.complete());
  // The worst case at a million ranks, every other one missing: still bounded.
  std::vector<int> half;
  for (int r = 0; r < 1000000; r += 2) half.push_back(r);
  const std::string worst = encode_digest(half, {}, std::nullopt, "", {});
  EXPECT_LT(worst.size(), kMaxMissingRanges * 20 + 256);
  Gathered w;
  ASSERT_TRUE(decode_digest(worst, 1, 1000000, w));
  EXPECT_EQ(w.missing.size() + static_cast<std::size_t>(w.missing_unlisted), half.size());
}

TEST(CheckpointDigest, RangesThatBreakTheRulesAreRefused) {
  auto with_missing = [](const nlohmann::json& missing, const nlohmann::json& count = nullptr) {
    nlohmann::json j{{"missing", missing},
                     {"notes", nlohmann::json::object()},
                     {"aborted", nullptr},
                     {"review", ""}};
    if (!count.is_null()) j["missing_count"] = count;
    Gathered g;
    const bool ok = decode_digest(j.dump(), 0, 100, g);
    EXPECT_TRUE(ok || (g.missing.empty() && g.missing_unlisted == 0));
    return ok;
  };
  EXPECT_TRUE(with_missing({{3, 3}, {7, 9}}, 4));
  EXPECT_TRUE(with_missing({3, {7, 9}}, 4));            // a lone rank as its number
  EXPECT_FALSE(with_missing({7, 3}));                   // out of order
  EXPECT_FALSE(with_missing({{3, 7}, 5}));              // inside a range
  EXPECT_FALSE(with_missing({{7, 9}, {3, 3}}));          // out of order
  EXPECT_FALSE(with_missing({{3, 7}, {7, 9}}));          // overlapping
  EXPECT_FALSE(with_missing({{9, 7}}));                  // backwards
  EXPECT_FALSE(with_missing({{-1, 3}}));                 // below the world
  EXPECT_FALSE(with_missing({{90, 100}}));               // past it
  EXPECT_FALSE(with_missing({{1, 2, 3}}));               // not a pair
  EXPECT_FALSE(with_missing({"1-2"}));                   // not numbers
  EXPECT_FALSE(with_missing({1.5}));                     // not a rank
  EXPECT_FALSE(with_missing({{1, 2}}, 1));               // a count below the list
  EXPECT_FALSE(with_missing({{1, 2}}, 101));             // a count past the world
  EXPECT_FALSE(with_missing({{1, 2}}, "3"));             // a count that is text
  EXPECT_FALSE(with_missing(nlohmann::json::object()));  // not a list
  auto many = nlohmann::json::array();
  for (int r = 0; r < static_cast<int>(kMaxMissingRanges) + 1; ++r) many.push_back({2 * r, 2 * r});
  Gathered g;
  nlohmann::json j{
      {"missing", many}, {"notes", nlohmann::json::object()}, {"aborted", nullptr}, {"review", ""}};
  EXPECT_FALSE(decode_digest(j.dump(), 0, 1 << 20, g));  // past the bound
}

}  // namespace
}  // namespace gpudiag
