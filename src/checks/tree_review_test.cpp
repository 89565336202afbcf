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
}  // namespace gpudiag
