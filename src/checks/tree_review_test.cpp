// The check's reviewer for the tree of judges (tree_review.h): what it
// cannot read is never OK.
#include "checks/tree_review.h"

#include <gtest/gtest.h>

#include "checks/record.h"
#include "checks/verdict.h"

namespace gpudiag {
namespace {

std::string record_of(int rank) {
  RankRecord r;
  r.rank = rank;
  r.world_size = 4;
  r.host = "n" + std::to_string(rank / 2);
  return encode(r);
}

TEST(CheckTreeReviewer, ARecordThatCannotBeReadIsAFailure) {
  CheckTreeReviewer reviewer;
  auto review = decode_review(reviewer.review(
      "communicator", {{0, record_of(0)}, {1, "not json"}, {2, record_of(3)}}, {}, {}));
  EXPECT_EQ(review.failed, 2);  // rank 1 unreadable, rank 2 holding rank 3's record
  ASSERT_EQ(review.failures.size(), 2u);
  EXPECT_NE(review.failures[0].second.find("rank 1's record could not be read"), std::string::npos);
}

TEST(CheckTreeReviewer, AGroupsReviewThatCannotBeReadIsAFailure) {
  CheckTreeReviewer reviewer;
  const std::string fine = reviewer.review("barrier", {{0, record_of(0)}}, {}, {});
  auto merged = decode_review(reviewer.merge("barrier", {{fine, 0, 1}, {"{\"failures\":", 2, 3}}));
  EXPECT_EQ(merged.failed, 1);
  ASSERT_EQ(merged.failures.size(), 1u);
  EXPECT_NE(merged.failures[0].second.find("could not be read"), std::string::npos);
}

TEST(CheckTreeReviewer, MergedCountsAddUpAndStayBounded) {
  CheckpointReview a, b;
  a.failed = 1 << 30;
  b.failed = 1 << 30;
  CheckTreeReviewer reviewer;
  auto merged = decode_review(
      reviewer.merge("barrier", {{encode_review(a), 0, 1}, {encode_review(b), 2, 3}}));
  EXPECT_EQ(merged.failed, 1 << 30);
}

}  // namespace

namespace tree_review_compute {

std::string computed(int rank, const std::string& checksum) {
  RankRecord r;
  r.rank = rank;
  r.world_size = 6;
  r.host = "n" + std::to_string(rank / 2);
  r.compute.model = "NVIDIA H200";
  r.compute.device = "gpu";
  r.compute.parts = {{"bf16 GEMM", checksum, 1, 1, 2}};
  return encode(r);
}

TEST(CheckTreeReviewer, TheComputeChecksumsAreCountedAcrossGroups) {
  // Group 1 alone has a tie (a, b); across the job a is the reference and
  // rank 1 the one that differs.
  CheckTreeReviewer g1, g2, root;
  const auto r1 = g1.review("exchange", {{0, computed(0, "a")}, {1, computed(1, "b")}}, {}, {});
  const auto r2 = g2.review("exchange", {{2, computed(2, "a")}, {3, computed(3, "a")}}, {}, {});
  const auto merged = decode_review(root.merge("exchange", {{r1, 0, 1}, {r2, 2, 3}}));
  ASSERT_EQ(merged.compute.size(), 1u);
  EXPECT_EQ(merged.compute[0].total(), 4);
  EXPECT_EQ(judge_compute(merged.compute, decode(computed(1, "b")).compute).finding,
            "compute result differs from 3 of 4 GPUs of its model (bf16 GEMM, checksum b, theirs a)");
  EXPECT_EQ(judge_compute(merged.compute, decode(computed(0, "a")).compute).judged, "agrees");
  // Only the exchange counts them.
  EXPECT_TRUE(decode_review(g1.review("barrier", {{0, computed(0, "a")}}, {}, {})).compute.empty());
}

}  // namespace tree_review_compute

}  // namespace gpudiag
