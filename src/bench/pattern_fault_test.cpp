// check_recv() on broken results: one corrupt element, a rank's contribution
// left out or counted twice, a block from the wrong rank, a shifted buffer.
// Each must be counted and located, and named where the pattern identifies
// the rank (pattern.h).
#include <gtest/gtest.h>

#include <cstring>

#include "bench/pattern.h"
#include "bench/pattern_sim.h"

namespace gpudiag {
namespace pattern_fault_test {  // named: the unity build puts this folder's tests in one unit

using testing::Fault;
using testing::simulate;

constexpr int kWorlds[] = {2, 3, 8, 1000, 65536};

std::size_t count_for(int n) { return n <= 8 ? 37 : n <= 1000 ? n + 3 : 19; }

std::string describe(const PatternCase& c, int rank) {
  return std::string(coll_name(c.coll)) + " " + dtype_name(c.type) + " " + redop_name(c.op) +
         " n=" + std::to_string(c.nranks) + " rank=" + std::to_string(rank);
}

// Flips a bit that moves the value well past avg's tolerance: the top
// mantissa bit of floating types, bit 0 of integers.
void corrupt(std::vector<std::uint8_t>& buf, DType t, std::size_t i) {
  const std::size_t size = dtype_size(t);
  int bit = 0;
  switch (t) {
    case DType::half:
      bit = 9;
      break;
    case DType::bfloat16:
      bit = 6;
      break;
    case DType::float32:
      bit = 22;
      break;
    case DType::float64:
      bit = 51;
      break;
    default:
      break;
  }
  buf[i * size + bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
}

TEST(PatternFault, OneCorruptElementIsCountedAndLocated) {
  for (int n : {2, 3, 8, 1000})
    for (Coll coll : kAllColls)
      for (DType type : kAllDTypes)
        for (RedOp op : kAllRedOps) {
          if (!coll_reduces(coll) && op != RedOp::sum) continue;
          const PatternCase c{coll, type, op, 0, n, count_for(n)};
          const int rank = coll == Coll::reduce ? c.root : n - 1;
          SCOPED_TRACE(describe(c, rank));
          auto got = simulate(c, rank);
          const std::size_t at = recv_count_for(coll, c.param_count, n) / 2 + 1;
          corrupt(got, type, at);
          const WrongReport rep = check_recv(got.data(), c, rank);
          EXPECT_EQ(rep.wrong, 1u);
          EXPECT_EQ(rep.first_index, at);
          if (dtype_size(type) < 8 || is_floating(type)) {
            EXPECT_NE(rep.expected, rep.got);
          }
        }
}

// The rank owning element 5 of what `rank` receives, so a missing owner shows.
int owner_near_start(const PatternCase& c, int rank) {
  const std::size_t g0 = c.coll == Coll::reduce_scatter ? rank * c.param_count : 0;
  return static_cast<int>((g0 + 5) % c.nranks);
}

TEST(PatternFault, MissingAndDoubledContributionsNameTheRank) {
  for (int n : kWorlds)
    for (Coll coll : {Coll::all_reduce, Coll::reduce_scatter, Coll::reduce})
      for (DType type : kAllDTypes)
        for (RedOp op : kAllRedOps) {
          const PatternCase c{coll, type, op, 1, n, count_for(n)};
          const int rank = coll == Coll::reduce ? 1 : n / 2;
          const int q = owner_near_start(c, rank);
          SCOPED_TRACE(describe(c, rank) + " rank " + std::to_string(q));
          const std::string who = "rank " + std::to_string(q) + "'s contribution is ";

          const WrongReport missing = check_recv(simulate(c, rank, Fault{q, -1}).data(), c, rank);
          if (op == RedOp::avg) {
            // The mean of integers can hide a missing term; floats cannot.
            if (is_floating(type)) {
              EXPECT_GT(missing.wrong, 0u);
            }
            EXPECT_EQ(missing.suspect, "");
          } else {
            EXPECT_GT(missing.wrong, 0u);
            EXPECT_EQ(missing.suspect.rfind(who + "missing", 0), 0u) << missing.suspect;
          }

          if (op == RedOp::max || op == RedOp::min || op == RedOp::avg) continue;
          const WrongReport twice = check_recv(simulate(c, rank, Fault{-1, q}).data(), c, rank);
          EXPECT_GT(twice.wrong, 0u);
          // prod: +-1 twice flips the sign as its absence does.
          const std::string want = op == RedOp::prod ? who : who + "counted twice";
          EXPECT_EQ(twice.suspect.rfind(want, 0), 0u) << twice.suspect;
          if (op == RedOp::prod) {
            EXPECT_NE(twice.suspect.find("twice"), std::string::npos);
          }
        }
}

TEST(PatternFault, BlockFromTheWrongRankIsNamed) {
  for (int n : kWorlds)
    for (Coll coll : kAllColls)
      for (DType type : kAllDTypes) {
        if (coll == Coll::reduce || coll == Coll::all_reduce) continue;
        const RedOp op = coll == Coll::reduce_scatter ? RedOp::max : RedOp::sum;
        const PatternCase c{coll, type, op, 0, n, count_for(n)};
        // Rank 1 receives; the stranger's data is not what rank 1 should get.
        const int rank = 1, stranger = n > 2 ? 2 : coll == Coll::reduce_scatter ? 0 : 1;
        SCOPED_TRACE(describe(c, rank));
        const std::size_t size = dtype_size(type), bytes = c.param_count * size;
        auto got = simulate(c, rank);
        std::string want;
        switch (coll) {
          case Coll::all_gather:
          case Coll::alltoall:  // blocks 0 and 1 swapped
            std::swap_ranges(got.begin(), got.begin() + bytes, got.begin() + bytes);
            want = "the block from rank 1 landed at the wrong place (rank 0's block";
            break;
          case Coll::reduce_scatter: {  // the stranger's block instead
            const auto other = simulate(c, stranger);
            std::copy(other.begin(), other.end(), got.begin());
            want = "the reduced block for rank " + std::to_string(stranger);
            break;
          }
          case Coll::broadcast:
          case Coll::sendrecv: {  // the stranger's send buffer instead
            fill_send(got.data(), c, stranger);
            want = "rank " + std::to_string(stranger) + "'s data arrived instead of";
            break;
          }
          default:
            break;
        }
        const WrongReport rep = check_recv(got.data(), c, rank);
        EXPECT_GT(rep.wrong, 0u);
        EXPECT_EQ(rep.first_index, 0u);
        EXPECT_EQ(rep.suspect.rfind(want, 0), 0u) << rep.suspect;
      }
}

TEST(PatternFault, ShiftedBufferIsCaught) {
  for (int n : {3, 8, 1000})
    for (Coll coll : kAllColls)
      for (DType type : kAllDTypes)
        for (RedOp op : kAllRedOps) {
          if (!coll_reduces(coll) && op != RedOp::sum) continue;
          const PatternCase c{coll, type, op, 0, n, count_for(n)};
          SCOPED_TRACE(describe(c, 0));
          const std::size_t size = dtype_size(type);
          const std::size_t len = recv_count_for(coll, c.param_count, n) * size;
          auto got = simulate(c, 0);
          std::size_t changes = 0;  // neighbours that differ: what a shift can show
          for (std::size_t i = size; i < len; i += size)
            changes += std::memcmp(&got[i], &got[i - size], size) != 0;
          std::memmove(got.data() + size, got.data(), len - size);  // one element later
          const WrongReport rep = check_recv(got.data(), c, 0);
          if (changes > 0) {
            EXPECT_GT(rep.wrong, 0u);
          }
          if (changes > len / size / 2) {
            EXPECT_GT(rep.wrong, c.param_count / 4);
          }
        }
}

}  // namespace
}  // namespace gpudiag
