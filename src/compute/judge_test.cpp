// Judging the compute phase: the reference checksum is the one most ranks of
// a model give, two ranks that differ are both named with the note that a
// third would tell, ties name every rank of the model, models are compared
// apart, the review's tally survives its wire and its bounds, and healthy
// skewed rates make no finding.
#include "compute/judge.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

ComputeRecord rec(const std::string& model, const std::string& checksum, double tflops = 100,
                  const std::string& device = "gpu") {
  ComputeRecord r;
  r.model = model;
  r.device = device;
  r.parts = {{"bf16 GEMM", checksum, 1e12, 0.01, 2}, {"fp32 GEMM", "f-" + model, 1e12, 0.01, 2}};
  r.tflops = tflops;
  r.seconds = 1.2;
  return r;
}

ComputeTallies tally_of(const std::vector<ComputeRecord>& rs) {
  ComputeTallies t;
  for (const auto& r : rs) tally_compute(t, r);
  bound_compute(t);
  return t;
}

TEST(ComputeJudge, TheOddOneOutDiffersAndTheOthersAgree) {
  std::vector<ComputeRecord> rs(8, rec("NVIDIA H200", "aaaa"));
  rs[2].parts[0].checksum = "bbbb";
  const auto t = tally_of(rs);
  const auto bad = judge_compute(t, rs[2]);
  EXPECT_EQ(bad.judged, "differs");
  EXPECT_EQ(bad.finding,
            "compute result differs from 7 of 8 GPUs of its model (bf16 GEMM, checksum bbbb, theirs aaaa)");
  EXPECT_EQ(bad.finding.find("rank"), std::string::npos);  // names no other rank: nobody is stopped by it
  for (int r : {0, 1, 3, 7}) EXPECT_EQ(judge_compute(t, rs[r]).judged, "agrees") << r;
}

TEST(ComputeJudge, TwoRanksThatDifferAreBothNamedAndAThirdWouldTell) {
  std::vector<ComputeRecord> rs{rec("NVIDIA H200", "aaaa"), rec("NVIDIA H200", "bbbb")};
  const auto t = tally_of(rs);
  for (const auto& r : rs) {
    const auto j = judge_compute(t, r);
    EXPECT_EQ(j.judged, "differs");
    EXPECT_NE(j.finding.find("the other of the 2 GPUs of its model"), std::string::npos) << j.finding;
    EXPECT_NE(j.finding.find("a third of this model would name it"), std::string::npos) << j.finding;
  }
  // Two that agree are fine.
  EXPECT_EQ(judge_compute(tally_of({rec("X", "a"), rec("X", "a")}), rec("X", "a")).judged, "agrees");
}

TEST(ComputeJudge, ATieHasNoReferenceAPluralityOfTwoHasOne) {
  const std::vector<ComputeRecord> tie{rec("X", "a"), rec("X", "a"), rec("X", "b"), rec("X", "b")};
  const auto t = tally_of(tie);
  for (const auto& r : tie) {
    const auto j = judge_compute(t, r);
    EXPECT_EQ(j.judged, "differs");
    EXPECT_NE(j.finding.find("no checksum is shared by more of the 4 GPUs"), std::string::npos) << j.finding;
  }
  // 2-1-1: two GPUs giving the same bits are the reference.
  const std::vector<ComputeRecord> plural{rec("X", "a"), rec("X", "a"), rec("X", "b"), rec("X", "c")};
  const auto p = tally_of(plural);
  EXPECT_EQ(judge_compute(p, plural[0]).judged, "agrees");
  EXPECT_EQ(judge_compute(p, plural[2]).finding,
            "compute result differs from 2 of 4 GPUs of its model (bf16 GEMM, checksum b, theirs a)");
  // Three that all differ: nobody can be vouched for.
  const auto three = tally_of({rec("X", "a"), rec("X", "b"), rec("X", "c")});
  EXPECT_EQ(judge_compute(three, rec("X", "a")).judged, "differs");
}

TEST(ComputeJudge, ModelsAreComparedApart) {
  // Each model's own checksum; a lone GPU of a third model has no peer.
  std::vector<ComputeRecord> rs{rec("NVIDIA H200", "h"), rec("NVIDIA H200", "h"), rec("NVIDIA H200", "h"),
                                rec("NVIDIA A100", "a"), rec("NVIDIA A100", "a"), rec("NVIDIA L4", "l")};
  const auto t = tally_of(rs);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(judge_compute(t, rs[r]).judged, "agrees") << r;
  EXPECT_EQ(judge_compute(t, rs[5]).judged, "alone");
  // A GPU of one model giving another model's bits still differs.
  auto odd = rec("NVIDIA A100", "h");
  rs.push_back(odd);
  EXPECT_EQ(judge_compute(tally_of(rs), odd).judged, "differs");
}

TEST(ComputeJudge, UnstableAndNotRunAreLeftOutOfTheTally) {
  auto unstable = rec("X", "zzzz");
  unstable.judged = "unstable";
  unstable.finding = "compute result changed between repetitions on this GPU";
  ComputeRecord none;
  const auto t = tally_of({rec("X", "a"), rec("X", "a"), unstable, none});
  EXPECT_EQ(t.at(0).total(), 2);
  EXPECT_EQ(judge_compute(t, unstable).judged, "unstable");
  EXPECT_EQ(judge_compute(t, none).judged, "");
}

TEST(ComputeJudge, TalliesMergeAcrossGroupsAndSurviveTheWire) {
  const auto g1 = tally_of({rec("X", "a"), rec("X", "b")});
  const auto g2 = tally_of({rec("X", "a"), rec("X", "a")});
  ComputeTallies root;
  merge_compute(root, compute_tallies_from_json(compute_tallies_json(g1)));
  merge_compute(root, compute_tallies_from_json(compute_tallies_json(g2)));
  bound_compute(root);
  EXPECT_EQ(judge_compute(root, rec("X", "b")).finding,
            "compute result differs from 3 of 4 GPUs of its model (bf16 GEMM, checksum b, theirs a)");
  // Out-of-shape text is dropped, never trusted.
  const auto hostile = nlohmann::json::parse(
      R"([1, {"model": 3}, {"model":"X","part":"bf16 GEMM","checksums":[["a",-5],["b","x"],["c",2]],"others":-1}])");
  const auto h = compute_tallies_from_json(hostile);
  ASSERT_EQ(h.size(), 1u);
  ASSERT_EQ(h[0].checksums.size(), 1u);
  EXPECT_EQ(h[0].others, 0);
  EXPECT_TRUE(compute_tallies_from_json("nope").empty());
}

TEST(ComputeJudge, TheTallyIsBounded) {
  std::vector<ComputeRecord> rs;
  for (int i = 0; i < 20; ++i) rs.push_back(rec("X", "c" + std::to_string(i)));
  rs.push_back(rec("X", "c3"));
  const auto t = tally_of(rs);
  const auto& bf16 = *std::find_if(t.begin(), t.end(), [](auto& e) { return e.part == "bf16 GEMM"; });
  EXPECT_EQ(bf16.checksums.size(), kTallyChecksums);
  EXPECT_EQ(bf16.total(), 21);
  EXPECT_EQ(bf16.checksums[0].first, "c3");
}

TEST(ComputeJudge, HealthySkewedRatesMakeNoFindingASlowGpuDoes) {
  std::vector<ComputeRecord> rs;
  for (double t : {400.0, 388.0, 352.0, 341.0, 412.0, 330.0, 365.0, 399.0}) rs.push_back(rec("NVIDIA H200", "a", t));
  rs.push_back(rec("NVIDIA A100", "b", 150));  // another model, slower by nature
  rs.push_back(rec("NVIDIA A100", "b", 140));
  auto ranks = [&] {
    std::vector<ComputeRank> out;
    for (std::size_t i = 0; i < rs.size(); ++i) out.push_back({static_cast<int>(i), "rank " + std::to_string(i), &rs[i]});
    return out;
  };
  EXPECT_TRUE(slow_ranks(ranks()).empty());
  rs[3].tflops = 200;  // a throttled GPU
  const auto slow = slow_ranks(ranks());
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].first, 3);
  EXPECT_NE(slow[0].second.find("rank 3: 200.0 TFLOP/s, 53% of the median of the 8 GPUs of its model, NVIDIA H200 (376.5 TFLOP/s)"), std::string::npos)
      << slow[0].second;
  // A rank that differs is not part of the median, nor judged for speed.
  rs[3].judged = "differs";
  EXPECT_TRUE(slow_ranks(ranks()).empty());
}

TEST(ComputeJudge, ASlowGpuSaysItsClocksOrThatTheyAreUnknown) {
  std::vector<ComputeRecord> rs(4, rec("NVIDIA H200", "a", 400));
  rs[1].tflops = 100;
  rs[1].clocks = {1005, 1980, 0x8 | 0x40, ""};
  std::vector<ComputeRank> ranks;
  for (int i = 0; i < 4; ++i) ranks.push_back({i, "rank " + std::to_string(i), &rs[i]});
  auto slow = slow_ranks(ranks);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_NE(slow[0].second.find("(400.0 TFLOP/s); SM clock 1005/1980 MHz, throttled: HW slowdown, HW thermal slowdown"),
            std::string::npos)
      << slow[0].second;
  rs[1].clocks = {};
  rs[1].clocks.why = "NVML not loaded: libnvidia-ml.so.1: cannot open shared object file";
  slow = slow_ranks(ranks);
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_NE(slow[0].second.find("; clocks unknown (NVML not loaded: libnvidia-ml.so.1"), std::string::npos)
      << slow[0].second;
  EXPECT_EQ(compute_slow_warning("x").rfind("compute SLOW: x; ", 0), 0u);
}

TEST(ComputeJudge, TheSummaryLine) {
  std::vector<ComputeRecord> rs(4, rec("CPU Test", "a", 0.01, "host"));
  for (auto& r : rs) r.parts.insert(r.parts.begin() + 1, ComputePart{"fp16 GEMM", "x", 1, 1, 2});
  std::vector<ComputeRank> ranks;
  for (int i = 0; i < 4; ++i) ranks.push_back({i, "", &rs[i]});
  EXPECT_EQ(compute_summary(ranks, false, "host backend"),
            "compute: bf16, fp16 and fp32 GEMM checksums identical on 4 ranks (CPU Test, median 10.0 "
            "GFLOP/s), 1.20 s; rate not judged (host backend)\n");
  rs[2].judged = "differs";
  EXPECT_NE(compute_summary(ranks, false, "host backend").find("identical on 3 of 4 ranks"), std::string::npos);
  EXPECT_NE(compute_summary(ranks, false, "host backend").find("; rank 2 differs"), std::string::npos);
  ranks.resize(2);
  rs[2].judged = "";
  EXPECT_NE(compute_summary(ranks, true, "").find("with 2 ranks of CPU Test a difference cannot name the bad one"),
            std::string::npos);
  EXPECT_EQ(compute_summary({}, true, ""), "");
  ranks.resize(1);
  EXPECT_EQ(compute_summary(ranks, false, "host backend"),
            "compute: bf16, fp16 and fp32 GEMM on 1 rank (CPU Test, nothing to compare with, median 10.0 "
            "GFLOP/s), 1.20 s; rate not judged (host backend)\n");
}

}  // namespace
}  // namespace gpudiag
