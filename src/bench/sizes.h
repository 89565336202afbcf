// The byte counts and bandwidths of nccl-tests, as pure functions: what each
// collective sends and receives for a given -b/-e size, the "size" and
// "count" columns of a result row, and the algbw/busbw it prints.
//
// These follow nccl-tests' <coll>GetCollByteCount and <coll>GetBw
// (src/<coll>.cu) exactly, so a gpudiag bench row and an nccl-tests row for
// the same size, type and rank count carry the same numbers:
//   - the size is cut to whole elements first (bytes / element size);
//   - all_gather, reduce_scatter and alltoall split it over the ranks and
//     round each rank's share down to a multiple of 16 bytes
//     (count / n & ~(16 / eltSize - 1)), so small sizes can become 0;
//   - algbw is paramcount * element size (times n for all_gather,
//     reduce_scatter and alltoall) / seconds / 1e9; busbw is algbw times
//     bus_factor(), which is 0 for all_reduce on one rank.
#pragma once

#include <cstddef>
#include <cstdint>

#include "comm/collective.h"

namespace gpudiag {

struct CollSizes {
  std::size_t send_count = 0, recv_count = 0, param_count = 0;   ///< elements
  std::size_t send_inplace_offset = 0, recv_inplace_offset = 0;  ///< elements, times rank
  std::uint64_t row_bytes = 0;  ///< the "size" column: max(send, recv) * element size
  std::uint64_t row_count = 0;  ///< the "count" column: param_count
};

/// nccl-tests' getCollByteCount for `bytes` (the -b/-e size) over `nranks`
/// ranks. In place, rank r's send buffer starts at recv + send_inplace_offset
/// * r and its recv buffer at send + recv_inplace_offset * r (elements).
/// nranks < 1 counts as 1.
CollSizes coll_sizes(Coll c, std::uint64_t bytes, int nranks, DType t);

/// Elements of one rank's send / recv buffer for a call with `param_count`
/// (collective.h's table).
std::size_t send_count_for(Coll c, std::size_t param_count, int nranks);
std::size_t recv_count_for(Coll c, std::size_t param_count, int nranks);

/// busbw / algbw: all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall
/// (n-1)/n; broadcast, reduce, sendrecv 1.
double bus_factor(Coll c, int nranks);

struct Bandwidth {
  double algbw = 0, busbw = 0;  ///< GB/s (1e9 bytes)
};

/// nccl-tests' getBw: algbw from param_count (times nranks for all_gather,
/// reduce_scatter, alltoall) over `seconds`. seconds <= 0 gives 0, not inf,
/// so the numbers stay printable and JSON-safe.
Bandwidth coll_bandwidth(Coll c, std::size_t param_count, DType t, double seconds, int nranks);

}  // namespace gpudiag
