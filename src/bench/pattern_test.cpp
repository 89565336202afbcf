// The bench's pattern gives exact, checkable results: every collective, type
// and reduction at 1 to 65536 ranks is run on the host (pattern_sim.h, with
// host_reduce's reduce_into and finish_avg) and must equal fill_expected()
// bit for bit and pass check_recv().
#include "bench/pattern.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "bench/pattern_sim.h"

namespace gpudiag {
namespace {

using testing::ranks_to_check;
using testing::simulate;

constexpr int kWorlds[] = {1, 2, 3, 8, 1000, 65536};

std::size_t count_for(int n) {
  if (n <= 8) return 37;        // not a multiple of 16: the loops' odd ends
  if (n <= 1000) return n + 3;  // every rank owns an element of a reduction
  return 19;
}

std::vector<RedOp> ops_for(Coll c) {
  if (!coll_reduces(c)) return {RedOp::sum};
  return {std::begin(kAllRedOps), std::end(kAllRedOps)};
}

// pattern.h: sum (and avg) fall back to owners only when n is too large for
// the type, and floating avg also when 1/n is inexact.
bool sends_sparse(const PatternCase& c) {
  if (!coll_reduces(c.coll) || (c.op != RedOp::sum && c.op != RedOp::avg)) return false;
  const int n = c.nranks;
  if ((c.type == DType::half && n > 1023) || (c.type == DType::bfloat16 && n > 127)) return true;
  return c.op == RedOp::avg && is_floating(c.type) && (n & (n - 1)) != 0;
}

std::string describe(const PatternCase& c, int rank) {
  return std::string(coll_name(c.coll)) + " " + dtype_name(c.type) + " " + redop_name(c.op) +
         " n=" + std::to_string(c.nranks) + " root=" + std::to_string(c.root) +
         " count=" + std::to_string(c.param_count) + " rank=" + std::to_string(rank);
}

TEST(PatternExact, EveryCollectiveTypeReductionAndWorldSize) {
  for (int n : kWorlds)
    for (Coll coll : kAllColls)
      for (DType type : kAllDTypes)
        for (RedOp op : ops_for(coll)) {
          const PatternCase c{coll, type, op, n - 1, n, count_for(n)};
          for (int r : ranks_to_check(n)) {
            SCOPED_TRACE(describe(c, r));
            const auto got = simulate(c, r);
            auto want = testing::bytes_for(c, recv_count_for(coll, c.param_count, n));
            if (!fill_expected(want.data(), c, r)) {
              EXPECT_TRUE(coll == Coll::reduce && r != c.root);
              continue;
            }
            ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() - 1), 0);
            const WrongReport rep = check_recv(got.data(), c, r);
            ASSERT_EQ(rep.wrong, 0u) << "first " << rep.first_index << " expected " << rep.expected
                                     << " got " << rep.got;
          }
        }
}

TEST(PatternExact, SendRangesAreSlicesOfTheSendBuffer) {
  for (Coll coll : kAllColls)
    for (DType type : kAllDTypes)
      for (RedOp op : ops_for(coll)) {
        const PatternCase c{coll, type, op, 0, 5, 101};
        const std::size_t size = dtype_size(type), total = send_count_for(coll, 101, 5);
        auto whole = testing::bytes_for(c, total), pieces = testing::bytes_for(c, total);
        fill_send(whole.data(), c, 3);
        for (std::size_t at = 0, step = 1; at < total; at += step, step = step * 3 % 97 + 1)
          fill_send_range(pieces.data() + at * size, c, 3, at, std::min(step, total - at));
        EXPECT_EQ(whole, pieces) << describe(c, 3);
      }
}

// A block at the wrong offset or from the wrong rank must look different:
// values change along the buffer and from rank to rank.
TEST(PatternExact, ValuesVaryAlongTheBufferAndAcrossRanks) {
  for (int n : {2, 8, 1000})
    for (Coll coll : kAllColls)
      for (DType type : kAllDTypes)
        for (RedOp op : ops_for(coll)) {
          const PatternCase c{coll, type, op, 0, n, 64};
          SCOPED_TRACE(describe(c, 0));
          const std::size_t size = dtype_size(type), len = 64;
          std::vector<std::set<std::uint64_t>> seen(2);
          std::vector<std::uint8_t> a(len * size), b(len * size);
          fill_send_range(a.data(), c, 0, 0, len);
          fill_send_range(b.data(), c, 1, 0, len);
          std::size_t differ = 0;
          for (std::size_t i = 0; i < len; ++i) {
            std::uint64_t x = 0, y = 0;
            std::memcpy(&x, &a[i * size], size);
            std::memcpy(&y, &b[i * size], size);
            seen[0].insert(x);
            differ += x != y;
          }
          auto want = testing::bytes_for(c, recv_count_for(coll, 64, n));
          ASSERT_TRUE(fill_expected(want.data(), c, 0));
          for (std::size_t i = 0; i < len; ++i) {
            std::uint64_t x = 0;
            std::memcpy(&x, &want[i * size], size);
            seen[1].insert(x);
          }
          if (!sends_sparse(c)) {
            EXPECT_GE(seen[0].size(), 2u);
          }  // a sparse sum's rank 0 sends 0s
          // The mean of n int8 values is 0 once n > 128: nothing to vary.
          if (!(op == RedOp::avg && dtype_size(type) == 1 && n > 128)) {
            EXPECT_GE(seen[1].size(), 2u);
          }
          // Data-moving: different everywhere. Reductions: ranks 0 and 1 differ
          // in bit 0, used on every 16th element, and on the elements they own.
          EXPECT_GE(differ, coll_reduces(coll) ? 1u : 32u);
        }
}

// NCCL averages floating types as a sum of inputs pre-multiplied by 1/n.
// That order must pass the check too (the 2-ulp tolerance of pattern.h).
TEST(PatternExact, PreMultipliedFloatingAverageIsAccepted) {
  for (int n : {2, 3, 8, 1000})
    for (DType type : {DType::half, DType::float32, DType::float64, DType::bfloat16}) {
      const PatternCase c{Coll::all_reduce, type, RedOp::avg, 0, n, 257};
      SCOPED_TRACE(describe(c, 0));
      std::vector<double> sum(c.param_count, 0.0);
      auto one = testing::bytes_for(c, c.param_count), got = one;
      for (int p = 0; p < n; ++p) {
        fill_send(one.data(), c, p);
        for (std::size_t i = 0; i < c.param_count; ++i) {
          const double x = element_as_double(one.data(), i, type);
          if (type == DType::float32) {
            sum[i] = static_cast<float>(sum[i] + static_cast<float>(x * (1.0f / n)));
          } else if (type == DType::float64) {
            sum[i] += x * (1.0 / n);
          } else {  // 16-bit: scale and add rounded to the type at every step
            auto round = [&](double v) {
              const std::uint16_t b = type == DType::half ? float_to_half(static_cast<float>(v))
                                                          : float_to_bf16(static_cast<float>(v));
              return type == DType::half ? half_to_float(b) : bf16_to_float(b);
            };
            sum[i] = round(sum[i] + round(x * round(1.0 / n)));
          }
        }
      }
      for (std::size_t i = 0; i < c.param_count; ++i) {
        if (type == DType::float32) {
          const float f = static_cast<float>(sum[i]);
          std::memcpy(&got[i * 4], &f, 4);
        } else if (type == DType::float64) {
          std::memcpy(&got[i * 8], &sum[i], 8);
        } else {
          const std::uint16_t b = type == DType::half ? float_to_half(static_cast<float>(sum[i]))
                                                      : float_to_bf16(static_cast<float>(sum[i]));
          std::memcpy(&got[i * 2], &b, 2);
        }
      }
      EXPECT_EQ(check_recv(got.data(), c, 0).wrong, 0u);
    }
}

TEST(PatternExact, ReduceIsCheckedOnTheRootOnly) {
  const PatternCase c{Coll::reduce, DType::float32, RedOp::sum, 2, 4, 16};
  std::vector<float> junk(16, -1.0f);
  EXPECT_FALSE(fill_expected(junk.data(), c, 1));
  EXPECT_EQ(junk[0], -1.0f);  // nothing written
  EXPECT_EQ(check_recv(junk.data(), c, 1).wrong, 0u);
  EXPECT_EQ(check_recv(junk.data(), c, 2).wrong, 16u);
}

TEST(PatternExact, EmptyBuffersAndOneRank) {
  for (Coll coll : kAllColls) {
    const PatternCase empty{coll, DType::int32, RedOp::sum, 0, 4, 0};
    EXPECT_EQ(check_recv(nullptr, empty, 0).wrong, 0u);
    fill_send(nullptr, empty, 0);
  }
  // One rank: an all_reduce is a copy of its own input.
  const PatternCase one{Coll::all_reduce, DType::float32, RedOp::sum, 0, 1, 100};
  std::vector<float> send(100), want(100);
  fill_send(send.data(), one, 0);
  ASSERT_TRUE(fill_expected(want.data(), one, 0));
  EXPECT_EQ(send, want);
}

}  // namespace
}  // namespace gpudiag
