// The byte counts and bandwidths against numbers worked out by hand from
// nccl-tests' formulas (src/<coll>.cu), for every collective at 1, 2, 3 and 8
// ranks.
#include "bench/sizes.h"

#include <gtest/gtest.h>

namespace gpudiag {
namespace {

constexpr int kRanks[] = {1, 2, 3, 8};

// Each rank's share for all_gather / reduce_scatter / alltoall at n = 1, 2, 3, 8.
struct SplitCase {
  DType type;
  std::uint64_t bytes;
  std::size_t whole;    // bytes / element size
  std::size_t base[4];  // (whole / n) & ~(16 / eltSize - 1)
};
constexpr SplitCase kSplit[] = {
    {DType::float32, 1 << 20, 262144, {262144, 131072, 87380, 32768}},  // 87381 -> 87380
    {DType::int8, 100, 100, {96, 48, 32, 0}},                           // multiples of 16
    {DType::half, 100, 50, {48, 24, 16, 0}},                            // multiples of 8
    {DType::float64, 1000, 125, {124, 62, 40, 14}},                     // multiples of 2
    {DType::bfloat16, 7, 3, {0, 0, 0, 0}},
};

TEST(CollSizes, EveryCollectiveMatchesNcclTests) {
  for (const SplitCase& sc : kSplit) {
    const std::size_t elt = dtype_size(sc.type);
    for (int i = 0; i < 4; ++i) {
      const int n = kRanks[i];
      const std::size_t base = sc.base[i];
      for (Coll c : kAllColls) {
        SCOPED_TRACE(std::string(coll_name(c)) + " " + dtype_name(sc.type) +
                     " n=" + std::to_string(n) + " bytes=" + std::to_string(sc.bytes));
        const CollSizes s = coll_sizes(c, sc.bytes, n, sc.type);
        std::size_t send = sc.whole, recv = sc.whole, param = sc.whole, soff = 0, roff = 0;
        switch (c) {
          case Coll::all_gather:
            param = send = soff = base, recv = base * n;
            break;
          case Coll::reduce_scatter:
            param = recv = roff = base, send = base * n;
            break;
          case Coll::alltoall:
            param = base, send = recv = base * n;
            break;
          default:
            break;
        }
        EXPECT_EQ(s.send_count, send);
        EXPECT_EQ(s.recv_count, recv);
        EXPECT_EQ(s.param_count, param);
        EXPECT_EQ(s.send_inplace_offset, soff);
        EXPECT_EQ(s.recv_inplace_offset, roff);
        EXPECT_EQ(s.row_bytes, std::max(send, recv) * elt);
        EXPECT_EQ(s.row_count, param);
        EXPECT_EQ(send_count_for(c, param, n), send);
        EXPECT_EQ(recv_count_for(c, param, n), recv);
      }
    }
  }
}

TEST(CollSizes, SizeIsCutToWholeElements) {
  const CollSizes s = coll_sizes(Coll::all_reduce, 1001, 4, DType::float32);
  EXPECT_EQ(s.param_count, 250u);
  EXPECT_EQ(s.row_bytes, 1000u);
  EXPECT_EQ(coll_sizes(Coll::sendrecv, 7, 2, DType::float64).row_bytes, 0u);
  // all_gather's row is the receive side: 3 ranks * 87380 floats.
  EXPECT_EQ(coll_sizes(Coll::all_gather, 1 << 20, 3, DType::float32).row_bytes, 1048560u);
  EXPECT_EQ(coll_sizes(Coll::all_reduce, 64, 0, DType::int8).param_count, 64u);  // n < 1: 1
}

TEST(CollBusFactor, EveryCollectiveAtOneTwoThreeEightRanks) {
  struct Row {
    Coll c;
    double f[4];
  };
  const Row rows[] = {
      {Coll::all_reduce, {0, 1, 4.0 / 3, 1.75}},
      {Coll::all_gather, {0, 0.5, 2.0 / 3, 0.875}},
      {Coll::reduce_scatter, {0, 0.5, 2.0 / 3, 0.875}},
      {Coll::alltoall, {0, 0.5, 2.0 / 3, 0.875}},
      {Coll::broadcast, {1, 1, 1, 1}},
      {Coll::reduce, {1, 1, 1, 1}},
      {Coll::sendrecv, {1, 1, 1, 1}},
  };
  for (const Row& r : rows)
    for (int i = 0; i < 4; ++i)
      EXPECT_DOUBLE_EQ(bus_factor(r.c, kRanks[i]), r.f[i]) << coll_name(r.c) << " n=" << kRanks[i];
}

TEST(CollBandwidth, AlgbwFromParamCountAndBusbwFromFactor) {
  // 1 MiB of floats in 1 ms over 8 ranks.
  Bandwidth bw = coll_bandwidth(Coll::all_reduce, 262144, DType::float32, 1e-3, 8);
  EXPECT_DOUBLE_EQ(bw.algbw, 1.048576);
  EXPECT_DOUBLE_EQ(bw.busbw, 1.048576 * 1.75);
  // all_gather's param_count is one rank's share: algbw counts all 8.
  bw = coll_bandwidth(Coll::all_gather, 32768, DType::float32, 1e-3, 8);
  EXPECT_DOUBLE_EQ(bw.algbw, 1.048576);
  EXPECT_DOUBLE_EQ(bw.busbw, 1.048576 * 0.875);
  bw = coll_bandwidth(Coll::reduce_scatter, 32768, DType::float32, 1e-3, 8);
  EXPECT_DOUBLE_EQ(bw.algbw, 1.048576);
  bw = coll_bandwidth(Coll::alltoall, 87380, DType::float32, 2e-3, 3);
  EXPECT_DOUBLE_EQ(bw.algbw, 87380.0 * 4 * 3 / 1e9 / 2e-3);
  EXPECT_DOUBLE_EQ(bw.busbw, bw.algbw * 2 / 3);
  bw = coll_bandwidth(Coll::broadcast, 500, DType::float64, 1e-6, 3);
  EXPECT_DOUBLE_EQ(bw.algbw, 4.0);
  EXPECT_DOUBLE_EQ(bw.busbw, 4.0);
  bw = coll_bandwidth(Coll::sendrecv, 1000, DType::half, 1e-6, 2);
  EXPECT_DOUBLE_EQ(bw.algbw, 2.0);
  bw = coll_bandwidth(Coll::reduce, 1000, DType::bfloat16, 1e-6, 8);
  EXPECT_DOUBLE_EQ(bw.busbw, 2.0);
}

TEST(CollBandwidth, OneRankAndZeroTime) {
  const Bandwidth one = coll_bandwidth(Coll::all_reduce, 1000, DType::int32, 1e-6, 1);
  EXPECT_DOUBLE_EQ(one.algbw, 4.0);
  EXPECT_EQ(one.busbw, 0.0);
  const Bandwidth zero = coll_bandwidth(Coll::all_reduce, 1000, DType::int32, 0, 4);
  EXPECT_EQ(zero.algbw, 0.0);
  EXPECT_EQ(zero.busbw, 0.0);
}

}  // namespace
}  // namespace gpudiag
