// Test support for the bench's pattern (pattern.h): what a rank receives when
// the collective runs on the host, reducing the ranks' fill_send() data with
// host_reduce's reduce_into and finish_avg, optionally with one rank dropped
// or counted twice. Ranks are reduced in ring order ending at the receiver,
// not 0..n-1, so an order-dependent pattern would show.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/pattern.h"
#include "bench/sizes.h"
#include "comm/host_reduce.h"

namespace gpudiag::testing {

struct Fault {
  int drop = -1;   ///< this rank's contribution is left out
  int twice = -1;  ///< this rank's contribution is reduced twice
};

inline std::vector<std::uint8_t> bytes_for(const PatternCase& c, std::size_t elements) {
  return std::vector<std::uint8_t>(elements * dtype_size(c.type) + 1);
}

/// Rank r's recv buffer after the collective (recv_count_for elements).
inline std::vector<std::uint8_t> simulate(const PatternCase& c, int r, Fault f = {}) {
  const int n = c.nranks;
  const std::size_t count = c.param_count, size = dtype_size(c.type);
  std::vector<std::uint8_t> out = bytes_for(c, recv_count_for(c.coll, count, n));
  auto block = [&](int p, std::size_t first, std::size_t at) {
    fill_send_range(out.data() + at * size, c, p, first, count);
  };
  switch (c.coll) {
    case Coll::all_reduce:
    case Coll::reduce:
    case Coll::reduce_scatter: {
      const std::size_t first = c.coll == Coll::reduce_scatter ? r * count : 0;
      std::vector<std::uint8_t> one = bytes_for(c, count);
      bool empty = true;
      for (int j = 1; j <= n; ++j) {
        const int p = (r + j) % n;
        if (p == f.drop) continue;
        for (int times = p == f.twice ? 2 : 1; times > 0; --times) {
          fill_send_range(one.data(), c, p, first, count);
          if (empty)
            std::copy(one.begin(), one.end(), out.begin());
          else
            reduce_into(out.data(), one.data(), count, c.type, c.op);
          empty = false;
        }
      }
      if (c.op == RedOp::avg) finish_avg(out.data(), count, c.type, n);
      break;
    }
    case Coll::all_gather:
      for (int b = 0; b < n; ++b) block(b, 0, b * count);
      break;
    case Coll::alltoall:
      for (int b = 0; b < n; ++b) block(b, r * count, b * count);
      break;
    case Coll::broadcast:
      block(c.root, 0, 0);
      break;
    case Coll::sendrecv:
      block((r + n - 1) % n, 0, 0);
      break;
  }
  return out;
}

/// The ranks worth checking: all of them for small worlds, a few otherwise
/// (at 65536 ranks each one reduces 65536 inputs).
inline std::vector<int> ranks_to_check(int n) {
  if (n <= 8) {
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    return all;
  }
  if (n > 4096) return {1, n - 1};
  return {0, 1, n / 2, n - 1};
}

}  // namespace gpudiag::testing
