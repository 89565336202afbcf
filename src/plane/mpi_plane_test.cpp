// MpiPlane's digest, with real MPI: these tests need one process per rank, so
// they skip unless started by mpirun (tests/integration/test_mpi_plane.py runs
// them at 4 and 8 ranks). Rank 0 judges; the others get the digest and the
// records they asked for, and their bytes per checkpoint do not depend on n.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/mpi.h"
#include "plane/plane.h"
#include "tree/tree.h"

namespace gpudiag {
namespace mpi_plane_test {  // named: the unity build puts this folder's tests in one unit

std::string record(int r) {
  return (r == 2 ? "bad" : "ok!") + std::string(297, static_cast<char>('a' + r % 26));
}

std::string count_bad(const Gathered& g) {
  int bad = 0;
  for (std::size_t i = 0; i < g.records.size(); ++i)
    if (const auto& r = g.records.at(i); r && r->rfind("bad", 0) == 0) ++bad;
  return "bad=" + std::to_string(bad);
}

MpiSession& session() {
  static MpiSession s;
  return s;
}

TEST(MpiPlaneDigest, TheJudgesDigestReachesEveryRankAndAStoppedRankIsNamed) {
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE"))
    GTEST_SKIP() << "needs mpirun: tests/integration/test_mpi_plane.py";
  auto plane = make_mpi_plane(session());
  const int n = plane->size(), me = plane->rank();
  ASSERT_GE(n, 4);
  // Checkpoint 1: everyone; rank 2 "failed"; each asks for rank 0's record.
  auto g =
      plane->gather_all("exchange", record(me), Deadline::after_seconds(30), {}, {0}, count_bad);
  EXPECT_TRUE(g.judged);
  EXPECT_TRUE(g.complete());
  EXPECT_EQ(g.review, "bad=1");
  EXPECT_EQ(g.records[0], record(0));
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(g.records[r].has_value(), me == 0 || r == me) << "rank " << me << " record " << r;
  const auto first = plane->bytes_moved();
  // Checkpoint 2: the last rank is stopped; everyone else names it.
  if (me != n - 1) {
    auto g2 =
        plane->gather_all("all-reduce", record(me), Deadline::after_seconds(1), {}, {}, count_bad);
    EXPECT_TRUE(g2.judged);
    EXPECT_EQ(g2.missing, std::vector<int>{n - 1});
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    plane->gather_all("all-reduce", record(me), Deadline::after_seconds(1));
  }
  // A rank other than 0 sent a record and read a digest: bounded whatever n is.
  if (me == 1) {
    std::printf("mpi-plane-bytes rank 1: %llu %llu\n", static_cast<unsigned long long>(first),
                static_cast<unsigned long long>(plane->bytes_moved() - first));
    EXPECT_LT(first, 2 * 300u + 200u);
    EXPECT_LT(plane->bytes_moved() - first, 300u + 200u);
  }
  session().barrier_within(Deadline::after_seconds(10));
}

TEST(MpiTreePlaneDigest, NodeLeadersPassTheDigestAndAStoppedRankIsNamed) {
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE"))
    GTEST_SKIP() << "needs mpirun: tests/integration/test_mpi_plane.py";
  // "Nodes" of 2 ranks: ranks 0-1, 2-3, ...; leaders 0, 2, 4, ...
  auto plane = make_mpi_tree_plane(session(), 2);
  const int n = plane->size(), me = plane->rank();
  ASSERT_GE(n, 4);
  // Checkpoint 1: everyone; rank 2 "failed"; each asks for rank 0's record,
  // the last rank also for rank 1's (another node's).
  std::vector<int> need{0};
  if (me == n - 1) need.push_back(1);
  auto g = plane->gather_all("exchange", record(me), Deadline::after_seconds(30), {}, need,
                             count_bad);
  EXPECT_TRUE(g.judged);
  EXPECT_TRUE(g.complete());
  EXPECT_EQ(g.review, "bad=1");
  EXPECT_EQ(g.records[0], record(0));
  if (me == n - 1) EXPECT_EQ(g.records[1], record(1));
  for (int r = 2; r < n; ++r)
    EXPECT_EQ(g.records.at(r).has_value(), me == 0 || r == me) << "rank " << me << " record " << r;
  const auto first = plane->bytes_moved();
  // Checkpoint 2: the last rank (not a leader) is stopped; everyone names it.
  if (me != n - 1) {
    auto g2 =
        plane->gather_all("all-reduce", record(me), Deadline::after_seconds(1), {}, {}, count_bad);
    EXPECT_TRUE(g2.judged);
    EXPECT_EQ(g2.missing, std::vector<int>{n - 1});
  } else {
    // Waits for the others' verdict (their digest comes within the grace).
    std::this_thread::sleep_for(std::chrono::seconds(3));
    plane->gather_all("all-reduce", record(me), Deadline::after_seconds(1));
  }
  if (me == 1) {
    std::printf("mpi-tree-plane-bytes rank 1: %llu %llu\n",
                static_cast<unsigned long long>(first),
                static_cast<unsigned long long>(plane->bytes_moved() - first));
    EXPECT_LT(first, 2 * 300u + 400u);
  }
  session().barrier_within(Deadline::after_seconds(20));
}

/// A stand-in for the check's tree review: counts the records that start
/// "bad" in a table, and adds the counts of the groups' reviews.
class CountBad : public TreeReviewer {
 public:
  std::string review(const std::string&, const std::map<int, std::string>& records,
                     const std::vector<int>&, const std::map<int, std::string>&) override {
    int bad = 0;
    for (const auto& [r, text] : records) bad += text.rfind("bad", 0) == 0;
    return "bad=" + std::to_string(bad);
  }
  std::string merge(const std::string&, const std::vector<ChildReview>& reviews) override {
    int bad = 0;
    for (const auto& c : reviews) bad += std::atoi(c.text.c_str() + 4);
    return "bad=" + std::to_string(bad);
  }
};

TEST(MpiTreePlaneGroups, GroupJudgesReviewTheirNodesAndRankZeroMergesThem) {
  if (!std::getenv("OMPI_COMM_WORLD_SIZE") && !std::getenv("PMI_SIZE"))
    GTEST_SKIP() << "needs mpirun: tests/integration/test_mpi_plane.py";
  // "Nodes" of 1 rank, groups of 2 nodes: judges 0, 2, 4, ...
  auto plane = make_mpi_tree_plane(session(), 1, 2, std::make_unique<CountBad>());
  const int n = plane->size(), me = plane->rank();
  ASSERT_GE(n, 4);
  EXPECT_EQ(plane->describe(), "MPI through node leaders and group judges");
  // Checkpoint 1: rank 2 (group 1's judge) "failed"; everyone asks for
  // rank 0's record; rank 0 asks for every record (the report's table).
  std::vector<int> need{0};
  if (me == 0)
    for (int r = 1; r < n; ++r) need.push_back(r);
  auto g = plane->gather_all("exchange", record(me), Deadline::after_seconds(30), {}, need, {});
  EXPECT_TRUE(g.judged);
  EXPECT_TRUE(g.complete()) << "rank " << me;
  EXPECT_EQ(g.review, "bad=1");
  EXPECT_EQ(g.records[0], record(0));
  for (int r = 1; r < n; ++r)
    EXPECT_EQ(g.records.at(r).has_value(), me == 0 || r == me) << "rank " << me << " record " << r;
  if (me == 0) {
    for (int r = 0; r < n; ++r) EXPECT_EQ(g.records.at(r), record(r)) << r;
  }
  // A failure the last rank announces reaches every rank, one hop a level
  // (its judge, rank 0, the other judges, their leaders), as each polls.
  const std::string why = "rank " + std::to_string(n - 1) + " failed in the test";
  if (me == n - 1) {
    plane->announce_failure(why);
  } else {
    auto until = Deadline::after_seconds(10);
    std::optional<std::string> heard;
    while (!(heard = plane->peer_failure()) && !until.expired())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(heard, why) << "rank " << me;  // passed on as it was read
  }
  // Checkpoint 2: the last rank (a leader under its group's judge) is
  // stopped; everyone else names it.
  if (me != n - 1) {
    auto g2 = plane->gather_all("all-reduce", record(me), Deadline::after_seconds(1), {}, {}, {});
    EXPECT_TRUE(g2.judged) << "rank " << me;
    EXPECT_EQ(g2.missing, std::vector<int>{n - 1}) << "rank " << me;
    EXPECT_NE(g2.notes.at(n - 1).find("did not report"), std::string::npos) << g2.notes.at(n - 1);
  } else {
    // Back after the others decided (its judge waits a grace past the
    // deadline): its judge is gone, and so is rank 0's answer.
    std::this_thread::sleep_for(std::chrono::seconds(8));
    plane->gather_all("all-reduce", record(me), Deadline::after_seconds(1));
  }
  session().barrier_within(Deadline::after_seconds(45));
}

}  // namespace
}  // namespace gpudiag
