// What a rank keeps of the others across checkpoints (peer_book.h): the
// bookkeeping of ranks that go missing and come back, and a rank of a
// 102,400-rank job holding well under a megabyte after five checkpoints
// (a slot per rank per field held ~100 MB).
#include "checks/peer_book.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

CheckResult fresh(int n, int me) {
  CheckResult res;
  res.me.rank = me;
  res.table.resize(n);
  res.last_seen.resize(n);
  res.missed_at.resize(n);
  res.missing_note.resize(n);
  return res;
}

Gathered gathered(int n, std::vector<int> missing, std::vector<int> read) {
  Gathered g;
  g.records.assign(n, std::nullopt);
  g.notes.assign(n, "");
  g.missing = std::move(missing);
  for (int r : read) {
    RankRecord rec;
    rec.rank = r;
    rec.host = "node" + std::to_string(r / 8);
    g.records[r] = encode(rec);
  }
  return g;
}

TEST(PeerBook, AMissingRankKeepsWhereItWasLastSeenAndComesBack) {
  auto res = fresh(8, 1);
  note_checkpoint(res, gathered(8, {5}, {0, 1}), "exchange");
  EXPECT_EQ(res.last_seen.at(5), "");  // never heard from
  EXPECT_EQ(res.missed_at.at(5), "exchange");
  EXPECT_EQ(res.last_seen.at(3), "exchange");
  ASSERT_TRUE(res.table.at(0));
  EXPECT_EQ(res.table.at(0)->host, "node0");
  EXPECT_FALSE(res.table.at(3));  // not read here
  EXPECT_EQ(res.live, (std::vector<int>{0, 1, 2, 3, 4, 6, 7}));

  note_checkpoint(res, gathered(8, {}, {}), "communicator");  // 5 came late
  EXPECT_EQ(res.last_seen.at(5), "communicator");
  EXPECT_EQ(res.missed_at.at(5), "");
  auto g = gathered(8, {2, 5}, {});
  g.notes[2] = "pid 42 on node0, last phase: all-reduce";
  note_checkpoint(res, g, "all-reduce");
  note_checkpoint(res, gathered(8, {2, 5}, {}), "barrier");
  EXPECT_EQ(res.last_seen.at(2), "communicator");
  EXPECT_EQ(res.missed_at.at(2), "all-reduce");  // the first it missed
  EXPECT_EQ(res.missing_note.at(2), "pid 42 on node0, last phase: all-reduce");
  EXPECT_EQ(res.last_seen.at(7), "barrier");
  EXPECT_EQ(res.live, (std::vector<int>{0, 1, 3, 4, 6, 7}));
}

TEST(PeerBook, ThisRankIsNeverMissingAndBadRanksAreIgnored) {
  auto res = fresh(4, 2);
  note_checkpoint(res, gathered(4, {2, -1, 9, 3, 3}, {}), "exchange");
  EXPECT_EQ(res.live, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(res.missed_at.at(2), "");
  EXPECT_EQ(res.missed_at.at(3), "exchange");
}

TEST(PeerBook, ARankOfAHundredThousandHoldsWhatItRead) {
  constexpr int n = 102400;
  auto res = fresh(n, 4097);
  const char* names[] = {"exchange", "communicator", "all-reduce", "barrier", "barrier"};
  std::size_t peak = 0;
  for (const char* name : names) {
    // Three ranks never came; this rank read rank 0's record and its neighbours'.
    auto g = gathered(n, {17, 50000, 102399}, {0, 4096, 4097, 4098});
    g.notes[50000] = "pid 7 on node6250 (local rank 0), last phase: exchange";
    note_checkpoint(res, g, name);
    peak = std::max(peak, peer_bytes(res));
  }
  EXPECT_EQ(res.table.stored(), 4u);
  EXPECT_LE(res.last_seen.stored(), 3u);
  EXPECT_EQ(res.live.size(), static_cast<std::size_t>(n - 3));
  // The live list is 4 bytes a rank (400 KiB); everything else a few KB
  // (a slot per rank held sizeof(std::optional<RankRecord>) bytes a rank).
  EXPECT_LT(peak, 1024u * 1024) << peak << " bytes; a slot per rank: "
                                << n * sizeof(std::optional<RankRecord>);
  EXPECT_GT(peak, static_cast<std::size_t>(n - 3) * sizeof(int));
}

}  // namespace
}  // namespace gpudiag
