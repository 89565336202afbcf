// The checkpoint digest (checkpoint_digest.h) read back as the ranks read it:
// every missing rank survives the round trip, rank 0 included (under the
// tree a dead rank 0 is named by the others only through the digest), and
// a reader never lists itself.
#include "rendezvous/checkpoint_digest.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gpudiag
