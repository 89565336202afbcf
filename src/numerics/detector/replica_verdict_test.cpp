// The replica verdict (replica_verdict.h): the majority names the wrong
// replica, the other wrong ones are said too, a tie names no one, and the
// words are those of scripts/replica_check.py (test_replica_check.py checks
// the two side by side on real files).
#include "numerics/detector/replica_verdict.h"

#include <gtest/gtest.h>

namespace gpudiag::numerics {
namespace {

const std::vector<std::string> kNames = {"a.weight", "a.bias", "b.weight", "b.bias", "c.weight"};

TEST(ReplicaVerdict, AgreementIsNoVerdict) {
  EXPECT_FALSE(
      replica_verdict(3, {0, 1, 2}, kNames, {{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}}));
}

TEST(ReplicaVerdict, TheMajorityNamesTheWrongReplica) {
  const auto v =
      replica_verdict(20, {0, 1, 2, 3}, kNames,
                      {{1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {1, 9, 3, 4, 5}, {1, 2, 3, 4, 5}});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rank, 2);
  EXPECT_EQ(
      v->message,
      "replicas diverged at step 20: rank 2 differs from ranks 0-1,3 in 1 of 5 tensors: a.bias");
  const auto two = replica_verdict(
      4, {0, 1, 2, 3, 4}, kNames,
      {{1, 2, 3, 4, 5}, {0, 0, 0, 0, 0}, {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5}, {7, 2, 3, 4, 5}});
  ASSERT_TRUE(two);
  EXPECT_EQ(two->rank, 1);
  EXPECT_EQ(
      two->message,
      "replicas diverged at step 4: rank 1 differs from ranks 0,2-3 (so does rank 4) in 5 of 5 "
      "tensors: a.weight, a.bias, b.weight and 2 more");
}

TEST(ReplicaVerdict, TwoReplicasOrATieNameNoOne) {
  const auto v = replica_verdict(3, {0, 1}, kNames, {{1, 2, 3, 4, 5}, {1, 2, 3, 4, 6}});
  ASSERT_TRUE(v);
  EXPECT_EQ(v->rank, -1);
  EXPECT_EQ(
      v->message,
      "replicas diverged at step 3: rank 0 vs rank 1, no majority says which is wrong (2 replicas: "
      "a third would decide), in 1 of 5 tensors: c.weight");
  const auto tie =
      replica_verdict(8, {4, 5, 6, 7}, kNames,
                      {{1, 2, 3, 4, 5}, {1, 2, 3, 4, 6}, {1, 2, 3, 4, 6}, {1, 2, 3, 4, 5}});
  ASSERT_TRUE(tie);
  EXPECT_EQ(tie->rank, -1);
  EXPECT_EQ(tie->message.substr(0, 60),
            "replicas diverged at step 8: ranks 4,7 vs ranks 5-6, no majo");
  EXPECT_EQ(tie->message.find("a third would decide"), std::string::npos);
}

}  // namespace
}  // namespace gpudiag::numerics
