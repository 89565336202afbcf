// nccl-tests' byte counts and bandwidth formulas (sizes.h).
#include "bench/sizes.h"

#include <algorithm>

namespace gpudiag {

namespace {

// The collectives whose -b/-e size is split over the ranks (each rank's
// share rounded down to 16 bytes) and whose algbw counts all n shares.
bool splits_over_ranks(Coll c) {
  return c == Coll::all_gather || c == Coll::reduce_scatter || c == Coll::alltoall;
}

}  // namespace

CollSizes coll_sizes(Coll c, std::uint64_t bytes, int nranks, DType t) {
  const std::size_t n = static_cast<std::size_t>(std::max(nranks, 1));
  const std::size_t elt = dtype_size(t);
  const std::size_t count = static_cast<std::size_t>(bytes / elt);
  CollSizes s;
  if (splits_over_ranks(c)) {
    const std::size_t base = (count / n) & ~(16 / elt - 1);
    s.param_count = base;
    s.send_count = c == Coll::all_gather ? base : base * n;
    s.recv_count = c == Coll::reduce_scatter ? base : base * n;
    s.send_inplace_offset = c == Coll::all_gather ? base : 0;
    s.recv_inplace_offset = c == Coll::reduce_scatter ? base : 0;
  } else {
    s.param_count = s.send_count = s.recv_count = count;
  }
  s.row_bytes = static_cast<std::uint64_t>(std::max(s.send_count, s.recv_count)) * elt;
  s.row_count = s.param_count;
  return s;
}

std::size_t send_count_for(Coll c, std::size_t param_count, int nranks) {
  const std::size_t n = static_cast<std::size_t>(std::max(nranks, 1));
  return c == Coll::reduce_scatter || c == Coll::alltoall ? param_count * n : param_count;
}

std::size_t recv_count_for(Coll c, std::size_t param_count, int nranks) {
  const std::size_t n = static_cast<std::size_t>(std::max(nranks, 1));
  return c == Coll::all_gather || c == Coll::alltoall ? param_count * n : param_count;
}

double bus_factor(Coll c, int nranks) {
  const double n = std::max(nranks, 1);
  switch (c) {
    case Coll::all_reduce:
      return 2.0 * (n - 1) / n;
    case Coll::all_gather:
    case Coll::reduce_scatter:
    case Coll::alltoall:
      return (n - 1) / n;
    case Coll::broadcast:
    case Coll::reduce:
    case Coll::sendrecv:
      return 1;
  }
  return 1;
}

Bandwidth coll_bandwidth(Coll c, std::size_t param_count, DType t, double seconds, int nranks) {
  if (!(seconds > 0)) return {};
  const std::size_t n = static_cast<std::size_t>(std::max(nranks, 1));
  // Bytes in size_t first, then double, as nccl-tests computes them.
  std::size_t bytes = param_count * dtype_size(t);
  if (splits_over_ranks(c)) bytes *= n;
  Bandwidth bw;
  bw.algbw = static_cast<double>(bytes) / 1.0E9 / seconds;
  bw.busbw = bw.algbw * bus_factor(c, nranks);
  return bw;
}

}  // namespace gpudiag
