// Datagrams as the rank hook writes them, and a stranger's: every bound of
// record.h holds.
#include "stragglers/record.h"

#include <gtest/gtest.h>

namespace gpudiag::stragglers {

TEST(StragglerRecord, ReadsWhatTheRankHookWrites) {
  const auto d = parse_datagram(
      "r 2 5\n"
      "g 1 0,2,3\n"
      "c 0 17 ddp_bucket 1000 2000 900\n"
      "c 1 0 all_reduce 3000 0 0\n",
      4, 4);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->local_rank, 2);
  EXPECT_EQ(d->dropped, 5);
  ASSERT_EQ(d->groups.size(), 1u);
  EXPECT_EQ(d->groups[0].ranks, (std::vector<int>{0, 2, 3}));
  ASSERT_EQ(d->arrivals.size(), 2u);
  EXPECT_EQ(d->arrivals[0].seq, 17);
  EXPECT_EQ(d->arrivals[0].op, "ddp_bucket");
  EXPECT_EQ(d->arrivals[0].forward_ns, 900);
  EXPECT_EQ(d->arrivals[1].end_ns, 0);
  EXPECT_EQ(d->invalid, 0);
}

TEST(StragglerRecord, ARunQueueWaitIsReadWhenGivenAndBounded) {
  const auto d = parse_datagram(
      "r 0 0\n"
      "c 0 3 all_reduce 1000 2000 0 15000000\n"
      "c 0 4 all_reduce 3000 4000 0\n"
      "c 0 5 all_reduce 5000 6000 0 -1\n"
      "c 0 6 all_reduce 7000 8000 0 12 13\n",
      4, 4);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->arrivals.size(), 2u);
  EXPECT_EQ(d->arrivals[0].runq_ns, 15000000);
  EXPECT_EQ(d->arrivals[1].runq_ns, 0);  // not given: not known
  EXPECT_EQ(d->invalid, 2);              // a negative wait, a field too many
}

TEST(StragglerRecord, AHeaderThatIsNotThisNodesRankDropsTheDatagram) {
  EXPECT_FALSE(parse_datagram("r 4 0\nc 0 0 x 1 2 0\n", 4, 8));  // local rank 4 of 4
  EXPECT_FALSE(parse_datagram("r -1 0\n", 4, 8));
  EXPECT_FALSE(parse_datagram("x 0 0\n", 4, 8));
  EXPECT_FALSE(parse_datagram("", 4, 8));
  EXPECT_FALSE(parse_datagram("r 0 99999999999999999999999\n", 4, 8));
  EXPECT_FALSE(parse_datagram(std::string(kMaxDatagram + 1, 'r'), 4, 8));
}

TEST(StragglerRecord, BadLinesAreCountedAndSkipped) {
  const auto d = parse_datagram(
      "r 0 0\n"
      "c 0 1 all_reduce 10 5 0\n"             // ends before it arrived
      "c 0 1 All-Reduce 10 20 0\n"            // not an op name
      "c 4096 1 all_reduce 10 20 0\n"         // group out of range
      "c 0 -1 all_reduce 10 20 0\n"           // negative sequence
      "c 0 1 all_reduce 0 20 0\n"             // no arrival
      "c 0 1 all_reduce 10 20 0 extra\n"      // a word too many
      "c 0 1 all_reduce 10 20\n"              // a word short
      "g 1 2,1\n"                             // not sorted
      "g 1 0,8\n"                             // a rank outside the world
      "g 0 0,1\n"                             // the default group is not declared
      "z what\n" +
          std::string("c 0 2 all_reduce 1 2 ") + std::string(300, '0') + "\n" +
          "c 0 3 all_reduce 10 20 0\n",
      2, 8);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->invalid, 12);
  ASSERT_EQ(d->arrivals.size(), 1u);
  EXPECT_EQ(d->arrivals[0].seq, 3);
}

TEST(StragglerRecord, AtMostSoManyLinesAreRead) {
  std::string text = "r 0 0\n";
  for (std::size_t i = 0; i < kMaxLines + 50; ++i) text += "c 0 " + std::to_string(i) + " b 1 2 0\n";
  const auto d = parse_datagram(text, 1, 2);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->arrivals.size(), kMaxLines);
  EXPECT_EQ(d->invalid, 1);
}

}  // namespace gpudiag::stragglers
