// The data each rank sends in `gpudiag bench`, the exact result each rank
// must receive, and the check that compares them and names a likely cause.
//
// Every value is a small integer "code" computed from (rank, element index)
// by a hash, so no rank needs another rank's data to know what it must
// receive, and the expected value of a reduced element has a closed form
// (O(1) per element whatever the number of ranks). The codes keep every
// result exact for every type, reduction and world size (up to 65536 ranks
// identify a rank; more ranks still check exactly):
//   sum    dense: rank p sends c(g) + bit (g mod 16) of p, with c(g) < 2^b
//          and (n+1) * 2^b within the type's exact integers (half 2048,
//          bfloat16 256, float 2^24; integers wrap, as NCCL's do). When n
//          is too large for that (half n > 1023, bfloat16 n > 127), only
//          the element's owner, rank g mod n, sends a non-zero 1 + c(g).
//   prod   each rank sends +-1 (-1 where bit g mod 16 of p differs from a
//          hash bit of g), the owner +-1 or +-2: the product is +-1 or +-2
//          at any n, and every rank flips the sign of about half of it.
//   max    the owner sends c(g) + 3, the others c(g) + (0 or 1).
//   min    the owner sends c(g), the others c(g) + (2 or 3).
//   avg    integers as sum, then a truncating division of the (wrapped) sum,
//          as NCCL does. Floating types: as sum when n is a power of two
//          (1/n is exact, so the mean is); otherwise only the owner sends, so
//          the mean is one rounded product. NCCL averages floating types as a
//          sum of inputs pre-multiplied by 1/n, not as sum-then-scale, so a
//          floating avg is accepted within 2 units in the last place of the
//          type; every other result is compared bit for bit.
// Data-moving collectives (all_gather, broadcast, alltoall, sendrecv) send a
// hash of (rank, index) using the type's exact bits, different for every
// rank and along the buffer.
//
// A wrong result is explained where the pattern allows: the difference at the
// first wrong element and the 4096 after it (and the elements rank p owns) is
// tested against "rank p's contribution is missing / counted twice" for every
// p and against a block from another rank, and a unique match becomes the
// report's `suspect`. A missing rank is visible on every element for sum, on
// about half for prod, and on the elements it owns (g mod n = p) for max, min
// and the sparse sum, so a buffer of fewer than n elements cannot show every
// rank there; avg can hide it
// (the mean of 1000 int8 values is mostly 0, and a share within 2 ulps of a
// floating mean passes), so avg names no suspect.
//
// Expected values are produced by the same formulas host_reduce.h's
// reduce_into would reach (exact integers) and finish_avg() itself; the unit
// tests check this by simulating every collective with reduce_into.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/collective.h"

namespace gpudiag {

struct PatternCase {
  Coll coll = Coll::all_reduce;
  DType type = DType::float32;
  RedOp op = RedOp::sum;
  int root = 0;
  int nranks = 1;
  std::size_t param_count = 0;  ///< nccl-tests' paramcount (sizes.h's param_count)
};

/// Writes rank's send buffer (send_count_for(...) elements, host memory).
void fill_send(void* out, const PatternCase& c, int rank);
/// Writes elements [first, first + len) of rank's send buffer only.
void fill_send_range(void* out, const PatternCase& c, int rank, std::size_t first, std::size_t len);

/// Writes what rank's recv buffer must hold (recv_count_for(...) elements).
/// Returns false, writing nothing, when nothing is checked on this rank
/// (reduce on a rank other than the root).
bool fill_expected(void* out, const PatternCase& c, int rank);

struct WrongReport {
  std::uint64_t wrong = 0;       ///< elements that differ
  std::size_t first_index = 0;   ///< first wrong element
  double expected = 0, got = 0;  ///< at first_index
  /// "rank 3's contribution is missing", "... is counted twice", "the block
  /// from rank 2 landed at the wrong place (...)", or "" when no single cause
  /// explains the difference.
  std::string suspect;
};

/// Compares rank's received buffer (recv_count_for(...) elements, host
/// memory) with the expected one. 0 wrong on a rank fill_expected skips.
WrongReport check_recv(const void* got, const PatternCase& c, int rank);

}  // namespace gpudiag
