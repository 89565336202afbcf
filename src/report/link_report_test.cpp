#include "report/link_report.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

/// A finished link test: `hosts[r]` per rank, every pair at `gbps` (1 GB exchanged).
CheckResult job(const std::vector<std::string>& hosts, double gbps) {
  CheckResult result;
  const int n = static_cast<int>(hosts.size());
  for (int r = 0; r < n; ++r) {
    RankRecord rec;
    rec.rank = r;
    rec.world_size = n;
    rec.host = hosts[r];
    rec.local_rank = r;
    rec.backend = "host/tcp";
    rec.link_bytes = 1e9;
    rec.link_schedule = "rounds";
    rec.links.assign(n, 0.0);
    for (int p = 0; p < n; ++p)
      if (p != r) rec.links[p] = 1.0 / gbps;
    result.table.push_back(rec);
  }
  result.me = *result.table[0];
  return result;
}

TEST(LinkReport, MatrixIsSymmetricWithADashOnTheDiagonal) {
  auto result = job({"a", "a", "b"}, 2.5);
  result.table[2]->links[0] = result.table[0]->links[2] = 1.0 / 0.5;  // a slow pair
  auto text = link_table(result, link_verdict(result));
  EXPECT_NE(text.find("link test: 3 ranks on 2 hosts, backend host/tcp, every pair exchanging "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("the pairs of a round at once"), std::string::npos);
  EXPECT_NE(text.find("   0 a          -    2.50   0.500\n"), std::string::npos) << text;
  EXPECT_NE(text.find("   2 b      0.500    2.50       -\n"), std::string::npos) << text;
  // Two hosts: the host matrix, within a on the diagonal, nothing within b.
  EXPECT_NE(text.find("by host, median GB/s"), std::string::npos) << text;
  EXPECT_NE(text.find("   0 a       2.50    1.50\n"), std::string::npos) << text;
  EXPECT_NE(text.find("   1 b       1.50       -\n"), std::string::npos) << text;
}

TEST(LinkReport, OneLinkPerClassGivesNoVerdict) {
  auto result = job({"a", "b"}, 3);
  auto text = link_table(result, link_verdict(result));
  EXPECT_NE(text.find("no verdict: a class needs two links or more"), std::string::npos) << text;
  EXPECT_EQ(text.find("no slow link"), std::string::npos);
}

TEST(LinkReport, OneRankHasNoLinks) {
  auto result = job({"a"}, 3);
  EXPECT_EQ(link_table(result, link_verdict(result)),
            "link test: a job of one rank has no links to measure\n");
}

TEST(LinkReport, ManyRanksGetALinePerRankAndTheSlowOnesAreMarked) {
  std::vector<std::string> hosts(kMatrixMaxRanks + 2, "node");
  auto result = job(hosts, 10);
  result.table[5]->links[7] = result.table[7]->links[5] = 1.0;  // 1 GB/s
  auto verdict = link_verdict(result);
  auto text = link_table(result, verdict);
  EXPECT_NE(text.find("  rank  host"), std::string::npos) << text;
  EXPECT_NE(text.find("     5  node"), std::string::npos) << text;
  EXPECT_NE(text.find("1.00 GB/s with rank 7 (slow)"), std::string::npos) << text;
  EXPECT_NE(text.find("1 slow link (below 0.5x"), std::string::npos) << text;
  EXPECT_NE(text.find("slow link rank 5 [node-5] <-> rank 7 [node-7]: 1.00 GB/s"),
            std::string::npos)
      << text;
  auto j = link_json(result, verdict);
  EXPECT_EQ(j["slow_links"], 1);
  EXPECT_EQ(j["links"].size(), hosts.size() * (hosts.size() - 1) / 2);
  EXPECT_EQ(j["host_pairs"].size(), 1u);
}

}  // namespace
}  // namespace gpudiag
