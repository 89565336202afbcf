#include "checks/links.h"

#include <gtest/gtest.h>

#include <set>

namespace gpudiag {
namespace {

TEST(LinkSchedule, EveryPairMeetsExactlyOnceAndPartnersAgree) {
  for (int n = 1; n <= 33; ++n) {
    std::set<std::pair<int, int>> met;
    for (int round = 0; round < link_rounds(n); ++round) {
      int resting = 0;
      for (int r = 0; r < n; ++r) {
        int p = link_partner(r, round, n);
        if (p < 0) {
          ++resting;
          continue;
        }
        ASSERT_NE(p, r) << "n=" << n;
        ASSERT_EQ(link_partner(p, round, n), r) << "n=" << n << " round " << round;
        if (r < p) EXPECT_TRUE(met.insert({r, p}).second) << "n=" << n << " pair met twice";
      }
      EXPECT_EQ(resting, n % 2) << "n=" << n << " round " << round;
    }
    EXPECT_EQ(met.size(), static_cast<std::size_t>(n * (n - 1) / 2)) << "n=" << n;
  }
  EXPECT_EQ(link_rounds(8), 7);
  EXPECT_EQ(link_rounds(7), 7);
}

std::string all(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

/// `hosts[r]` per rank; every pair takes `base` seconds unless `slow` says otherwise.
struct Job {
  std::vector<LinkRank> ranks;
  std::vector<std::vector<double>> seconds;
  explicit Job(std::vector<std::string> hosts) {
    const int n = static_cast<int>(hosts.size());
    std::vector<int> local(n);
    for (int r = 0; r < n; ++r) {
      ranks.push_back({r, hosts[r], "rank " + std::to_string(r) + " [" + hosts[r] + "]"});
      seconds.emplace_back(n, 0.0);
      for (int p = 0; p < n; ++p)
        if (p != r) seconds[r][p] = hosts[r] == hosts[p] ? 0.01 : 0.1;  // 100 vs 10 GB/s at 1 GB
    }
  }
  void slow(int a, int b, double factor) {
    seconds[a][b] *= factor;
    seconds[b][a] *= factor;
  }
  LinkVerdict judge() const { return judge_links(ranks, seconds, 1e9); }
};

TEST(LinkVerdict, UniformJobHasNoFindings) {
  auto v = Job({"a", "a", "b", "b"}).judge();
  EXPECT_EQ(v.slow_links, 0);
  EXPECT_TRUE(v.findings.empty());
  ASSERT_EQ(v.classes.size(), 2u);
  EXPECT_EQ(v.classes[0].name, "same-host");
  EXPECT_NEAR(v.classes[0].median_gbps, 100, 1e-9);
  EXPECT_EQ(v.classes[1].name, "cross-host");
  EXPECT_NEAR(v.classes[1].reference_gbps, 10, 1e-9);
  EXPECT_EQ(v.links.size(), 6u);
}

TEST(LinkVerdict, OneSlowPairIsNamedWithItsRatio) {
  Job job({"a", "a", "b", "b"});
  job.slow(1, 3, 10);  // 1 GB/s instead of 10
  auto v = job.judge();
  EXPECT_EQ(v.slow_links, 1);
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_EQ(v.findings[0],
            "slow link rank 1 [a] <-> rank 3 [b]: 1.00 GB/s where cross-host links reach "
            "10.00 GB/s (0.10x)");
}

TEST(LinkVerdict, ARankWhoseEveryCrossLinkIsSlowIsBlamed) {
  Job job({"a", "a", "b", "b", "c", "c"});
  for (int p : {0, 1, 3, 4, 5})
    if (job.ranks[p].host != "b") job.slow(2, p, 8);
  auto v = job.judge();
  ASSERT_EQ(v.findings.size(), 1u) << all(v.findings);
  EXPECT_NE(v.findings[0].find("rank 2 [b]: all 4 cross-host links are slow"), std::string::npos)
      << v.findings[0];
  EXPECT_NE(v.findings[0].find("suspect its NIC"), std::string::npos);
}

TEST(LinkVerdict, AHostWhoseEveryLinkOutIsSlowIsBlamedOnce) {
  Job job({"a", "a", "b", "b", "c", "c"});
  for (int r : {4, 5})
    for (int p : {0, 1, 2, 3}) job.slow(r, p, 20);
  auto v = job.judge();
  EXPECT_EQ(v.slow_links, 8);
  ASSERT_EQ(v.findings.size(), 1u) << all(v.findings);
  EXPECT_EQ(
      v.findings[0].rfind("host c: all 8 links to other hosts are slow (median 0.500 GB/s", 0), 0u)
      << v.findings[0];
}

TEST(LinkVerdict, SlowSameHostPathBlamesTheGpu) {
  Job job({"a", "a", "a", "a"});
  for (int p : {0, 1, 2}) job.slow(3, p, 5);
  auto v = job.judge();
  ASSERT_EQ(v.findings.size(), 1u);
  EXPECT_NE(v.findings[0].find("rank 3 [a]: all 3 same-host links are slow"), std::string::npos);
  EXPECT_NE(v.findings[0].find("PCIe or NVLink"), std::string::npos);
}

TEST(LinkVerdict, TheFasterEndOfAPairCountsAndUnmeasuredPairsAreLeftOut) {
  Job job({"a", "b"});
  job.seconds[0][1] = 0.5;  // rank 0 also waited for rank 1 to arrive
  job.seconds[1][0] = 0.1;
  auto v = job.judge();
  ASSERT_EQ(v.links.size(), 1u);
  EXPECT_NEAR(v.links[0].gbps, 10, 1e-9);
  EXPECT_TRUE(v.findings.empty());  // one link has nothing to be compared with
  job.seconds[0][1] = job.seconds[1][0] = 0;
  EXPECT_TRUE(job.judge().links.empty());
}

}  // namespace
}  // namespace gpudiag
