#include "checks/verdict.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

RankRecord rec(int rank, const std::string& host, int local, const std::string& uuid = "") {
  RankRecord r;
  r.rank = rank;
  r.world_size = 4;
  r.host = host;
  r.local_rank = local;
  r.backend = "nccl";
  r.gpu_uuid = uuid;
  r.gpu_bus_id = uuid.empty() ? "" : "0000:1b:00.0";
  r.nccl_version = "2.28.9";
  return r;
}

TEST(Verdict, LabelNamesHostAndLocalRank) {
  EXPECT_EQ(rank_label(rec(3, "node2", 1)), "rank 3 [node2-1]");
  EXPECT_EQ(rank_label(5, std::nullopt), "rank 5");
}

TEST(Verdict, NoConflictsInAHealthyJob) {
  std::vector<std::optional<RankRecord>> t = {rec(0, "a", 0, "GPU-0"), rec(1, "a", 1, "GPU-1"),
                                              rec(2, "b", 0, "GPU-0"), rec(3, "b", 1, "GPU-1")};
  EXPECT_TRUE(exchange_conflicts(t).empty());
  EXPECT_TRUE(version_differences(t).empty());
}

TEST(Verdict, TwoRanksOnOneGpuAreNamed) {
  std::vector<std::optional<RankRecord>> t = {rec(0, "a", 0, "GPU-0"), rec(1, "a", 1, "GPU-0")};
  auto c = exchange_conflicts(t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].find("ranks 0,1 share GPU 0000:1b:00.0 on a"), std::string::npos) << c[0];
}

TEST(Verdict, DistinctNcclHostIdsMayShareOneGpuAndTheReportSaysSo) {
  // NCCL treats ranks with different NCCL_HOSTID as different hosts: allowed.
  std::vector<std::optional<RankRecord>> t;
  for (int r = 0; r < 4; ++r) {
    t.push_back(rec(r, "a", r, "GPU-0"));
    t.back()->nccl_hostid = "r" + std::to_string(r);
  }
  EXPECT_TRUE(exchange_conflicts(t).empty());
  auto notes = shared_gpu_notes(t);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("ranks 0,1,2,3 share GPU 0000:1b:00.0 on a with distinct NCCL_HOSTIDs"),
            std::string::npos)
      << notes[0];
  // Two of them with one NCCL_HOSTID are still two ranks on one GPU for NCCL.
  t[1]->nccl_hostid = "r0";
  auto c = exchange_conflicts(t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_NE(c[0].find("ranks 0,1 share GPU 0000:1b:00.0 on a with one NCCL_HOSTID"),
            std::string::npos)
      << c[0];
  // Without NCCL_HOSTID, no note: the conflict is the whole story.
  std::vector<std::optional<RankRecord>> plain = {rec(0, "a", 0, "GPU-0"), rec(1, "a", 1, "GPU-0")};
  EXPECT_TRUE(shared_gpu_notes(plain).empty());
  EXPECT_EQ(exchange_conflicts(plain).size(), 1u);
}

TEST(Verdict, WorldSizeAndBackendDisagreementsNameTheRanks) {
  auto odd = rec(2, "b", 0);
  odd.world_size = 8;
  odd.backend = "host/tcp";
  odd.backend_why = "no usable GPU";
  std::vector<std::optional<RankRecord>> t = {rec(0, "a", 0), rec(1, "a", 1), odd, std::nullopt};
  auto c = exchange_conflicts(t);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_NE(c[0].find("ranks 0,1 say 4; rank 2 say 8"), std::string::npos) << c[0];
  EXPECT_NE(c[1].find("rank 2 use host/tcp (no usable GPU)"), std::string::npos) << c[1];
}

TEST(Verdict, NcclVersionDifference) {
  auto old = rec(1, "b", 0);
  old.nccl_version = "2.18.1";
  auto d = version_differences({rec(0, "a", 0), old});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_NE(d[0].find("rank 1 2.18.1"), std::string::npos) << d[0];
}

TEST(Verdict, OneLineCountsTheRest) {
  EXPECT_EQ(one_line({"a\nb", "c", "d"}), "a b (+2 more)");
  EXPECT_EQ(one_line({}), "");
}

TEST(Verdict, FingerprintPluginOnHalfTheRanksIsAConflictEveryRankReads) {
  std::vector<std::optional<RankRecord>> t;
  for (int r = 0; r < 4; ++r) {
    t.push_back(rec(r, r < 2 ? "a" : "b", r % 2));
    t.back()->fingerprint.fields = {{"plugin.net", r < 2 ? "not found" : "/x/libnccl-net.so"},
                                    {"kernel", "6.1"}};
  }
  auto review = decode_review(encode_review(review_table(t, t, {}, true)));
  ASSERT_EQ(review.conflicts.size(), 1u);
  EXPECT_NE(review.conflicts[0].find("ranks 0-1 [a]: not found; ranks 2-3 [b]: /x/libnccl-net.so"),
            std::string::npos) << review.conflicts[0];
  EXPECT_EQ(review.fingerprint["differences"][0]["severity"], "broken");
  // Only the exchange compares fingerprints.
  EXPECT_TRUE(review_table(t, t, {}, false).fingerprint.is_null());
}

TEST(Verdict, MalformedFingerprintInAPeersRecordDoesNotThrow) {
  nlohmann::json j = rec(1, "a", 0);
  j["fingerprint"] = {{"plugin.net", 7}, {"kernel", {1, 2}}};
  RankRecord r;
  EXPECT_NO_THROW(r = decode(j.dump()));
  EXPECT_TRUE(r.fingerprint.empty());
  j["fingerprint"] = "not an object";
  EXPECT_NO_THROW(r = decode(j.dump()));
}

}  // namespace
}  // namespace gpudiag
