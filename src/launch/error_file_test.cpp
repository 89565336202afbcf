// Reading a ReplicaDivergence's message (error_file.h): the rank it names as
// the wrong replica, none when no majority named one, and other messages left alone.
#include "launch/error_file.h"

#include <gtest/gtest.h>

namespace gpudiag::launch {
namespace {

TEST(ReplicaDivergence, NamesTheRankTheMajorityBlames) {
  const auto d = replica_divergence(
      "ReplicaDivergence: replicas diverged at step 20: rank 2 differs from ranks 0-1,3 in 1 of 6 "
      "tensors: fc1.weight (1 bit in 1 of 4096 elements, largest |difference| 2.50e-01)");
  EXPECT_TRUE(d.diverged);
  EXPECT_EQ(d.rank, 2);
  EXPECT_EQ(replica_divergence("replicas diverged at step 7: rank 13 differs from rank 0 (so does "
                               "rank 14) in 2 of 2 tensors: a, b")
                .rank,
            13);
}

TEST(ReplicaDivergence, WithoutAMajorityNoRankAndOtherErrorsAreNotOne) {
  const auto tie = replica_divergence(
      "ReplicaDivergence: replicas diverged at step 3: rank 0 vs rank 1, no majority says which is "
      "wrong, in 1 of 2 tensors: weight");
  EXPECT_TRUE(tie.diverged);
  EXPECT_EQ(tie.rank, -1);
  EXPECT_FALSE(replica_divergence("ValueError: step 2 went wrong on rank 1").diverged);
  EXPECT_EQ(replica_divergence("replicas diverged at step 9: rank 99999999999 differs from").rank,
            -1);
}

}  // namespace
}  // namespace gpudiag::launch
