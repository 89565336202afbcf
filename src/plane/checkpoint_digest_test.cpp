// The checkpoint digest (checkpoint_digest.h) read back as the ranks read it:
// every missing rank survives the round trip, rank 0 included (under the
// tree a dead rank 0 is named by the others only through the digest), and
// a reader never lists itself. Thousands missing stay far under the store's
// value limit: a lost rack is one range, thousands scattered are the first
// ranges and a count, and a digest whose ranges break the rules is refused.
#include "plane/checkpoint_digest.h"

#include <gtest/gtest.h>

#include <map>
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

TEST(CheckpointDigest, ALostNodesRanksShareOneNote) {
  // A node whose leader died: its 8 ranks have one note, which every rank
  // reads once, not eight times; the lone rank beside it keeps its own.
  const std::string lost = "node 128 (ranks 1024-1031): its leader did not report by the deadline";
  std::map<int, std::string> notes{{1, "pid 100001 on simnode0 (local rank 1), last phase: start"}};
  std::vector<int> missing{1};
  for (int r = 1024; r <= 1031; ++r) {
    missing.push_back(r);
    notes[r] = lost;
  }
  notes[1032] = "another text";  // next to the run, not part of it
  missing.push_back(1032);
  const std::string text = encode_digest(missing, notes, std::nullopt, "", {});
  const auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["notes"].size(), 3u) << text;
  EXPECT_EQ(j["notes"]["1024-1031"], lost) << text;
  Gathered g;
  ASSERT_TRUE(decode_digest(text, 0, 4096, g));
  for (int r = 1024; r <= 1031; ++r) EXPECT_EQ(g.notes.at(r), lost) << r;
  EXPECT_EQ(g.notes.at(1032), "another text");
  EXPECT_EQ(g.notes.at(1), notes[1]);
  // The flat judge's digest says the same.
  Gathered flat;
  flat.missing = missing;
  for (const auto& [r, t] : notes) flat.notes[r] = t;
  Gathered back;
  ASSERT_TRUE(decode_digest(encode_digest(flat), 0, 4096, back));
  EXPECT_EQ(nlohmann::json::parse(encode_digest(flat))["notes"].size(), 3u);
  for (int r = 1024; r <= 1031; ++r) EXPECT_EQ(back.notes.at(r), lost) << r;
}

TEST(CheckpointDigest, NoteRangesFromTheStoreAreBounded) {
  nlohmann::json j{{"missing", nlohmann::json::array({{0, 99}})},
                   {"notes",
                    {{"0-999999999", "everyone"}, {"9-3", "backwards"}, {"-5", "below"},
                     {"7-", "open"}, {"x-y", "words"}}},
                   {"aborted", nullptr},
                   {"review", ""}};
  Gathered g;
  ASSERT_TRUE(decode_digest(j.dump(), 0, 100, g));
  EXPECT_EQ(g.notes.written().size(), 0u) << "a range past the world is refused";
  j["notes"] = {{"0-99", "all of them"}};
  Gathered h;
  ASSERT_TRUE(decode_digest(j.dump(), 0, 100, h));
  EXPECT_EQ(h.notes.written().size(), 64u) << "at most 64 ranks get a note";
  EXPECT_EQ(h.notes.at(63), "all of them");
}

}  // namespace
}  // namespace gpudiag
