// host/tcp's run(): every collective of collective.h, for every type and
// reduction, laid out as a schedule for the engines of tcp_ring.cpp.
//
//   all_reduce      ring reduce-scatter + all-gather streamed (or halving and
//                   doubling for small buffers in power-of-two worlds);
//                   2(n-1)/n of the buffer each way per rank
//   reduce_scatter  ring: step s forwards the partial sum of block r-s-1 and
//                   adds this rank's part to block r-s-2, ending at block r;
//                   (n-1)/n of the send buffer each way
//   all_gather      ring: step s forwards the block step s-1 received
//   broadcast       a chain from root around the ring, forwarded as it arrives
//   reduce          a chain from root+1 around the ring to root: each rank
//                   adds its part to the partial sum and forwards it as it
//                   arrives, so every link carries the buffer once
//   alltoall        pairwise over the mesh (open_links): at step s rank r
//                   swaps blocks with rank s-r, each pair at the same step
//   sendrecv        the ring link: to r+1, from r-1
// avg sums, then divides once where the sum completes (finish_avg). Partial
// sums in flight sit in a few scratch slots, never in the caller's buffers
// (reduce's non-root ranks leave recv untouched, in place or not). In-place
// alltoall and sendrecv stage the outgoing block, which the incoming one
// would overwrite.
#include "comm/tcp_collectives.h"

#include <algorithm>
#include <cstring>

#include "comm/host_reduce.h"

namespace gpudiag {

namespace {

constexpr int kSlots = 3;                      // partial sums in flight per rank
constexpr std::size_t kChainChunk = 1u << 20;  // reduce's unit of forwarding

}  // namespace

void TcpCollectives::run(const CollCall& c, Deadline deadline) {
  if (coll_has_root(c.coll) && (c.root < 0 || c.root >= size_))
    throw UsageError(describe_call(c) + " with root " + std::to_string(c.root) + " in a world of " +
                     std::to_string(size_) + " ranks");
  const auto* src = static_cast<const char*>(c.send);
  auto* dst = static_cast<char*>(c.recv);
  const std::size_t bytes = c.count * dtype_size(c.type);
  switch (c.coll) {
    case Coll::all_reduce:
      return all_reduce(src, dst, c.count, c.type, c.op, deadline);
    case Coll::reduce_scatter:
      return reduce_scatter(src, dst, c.count, c.type, c.op, deadline);
    case Coll::reduce:
      return reduce(src, dst, c.count, c.type, c.op, c.root, deadline);
    case Coll::all_gather:
      return all_gather_bytes(src, dst, bytes, deadline);
    case Coll::broadcast:
      return broadcast_bytes(src, dst, bytes, c.root, deadline);
    case Coll::alltoall:
      return alltoall(src, dst, bytes, deadline);
    case Coll::sendrecv:
      return sendrecv(src, dst, bytes, deadline);
  }
}

void TcpCollectives::reduce_scatter(const char* src, char* dst, std::size_t count, DType type,
                                    RedOp op, Deadline deadline) {
  const int n = size_;
  const std::size_t b = count * dtype_size(type);
  if (b == 0) return;
  auto block = [&](int i) { return src + static_cast<std::size_t>(i) * b; };
  // Partial sums go through kSlots slots: step s reuses the slot of step
  // s - kSlots, whose bytes went out in send step s - kSlots + 1.
  const int slots = std::min(kSlots, n - 2);
  if (scratch_.size() < slots * b) scratch_.resize(slots * b);
  std::vector<RingStep> steps;
  for (int s = 0; s < n - 1; ++s) {
    const bool last = s == n - 2;
    const char* out = s == 0 ? block(mod(rank_ - 1)) : steps[s - 1].in;
    char* in = last ? dst : scratch_.data() + (s % kSlots) * b;
    const int in_after = !last && s >= kSlots ? s - kSlots + 1 : -1;
    steps.push_back(
        {out, b, s - 1, in, b, block(mod(rank_ - s - 2)), last && op == RedOp::avg, in_after});
  }
  stream_ring(steps, type, op, deadline, "reduce-scatter");
}

void TcpCollectives::reduce(const char* src, char* dst, std::size_t count, DType type, RedOp op,
                            int root, Deadline deadline) {
  const std::size_t bytes = count * dtype_size(type);
  if (bytes == 0) return;
  std::vector<RingStep> steps;
  if (rank_ == mod(root + 1)) {  // the chain's head sends its part as it is
    steps.push_back({src, bytes, -1, nullptr, 0, nullptr, false, -1});
  } else {
    // Chunk by chunk, so that what waits to be reduced (tmp_) stays small.
    // The tail (root) completes the reduction in recv; the middle forwards
    // partial sums through scratch slots.
    if (rank_ != root && scratch_.size() < kSlots * kChainChunk)
      scratch_.resize(kSlots * kChainChunk);
    for (std::size_t at = 0, k = 0; at < bytes; at += kChainChunk, ++k) {
      const int i = static_cast<int>(k);
      const std::size_t len = std::min(kChainChunk, bytes - at);
      if (rank_ == root) {
        steps.push_back({nullptr, 0, -1, dst + at, len, src + at, op == RedOp::avg, -1});
      } else {
        char* slot = scratch_.data() + (k % kSlots) * kChainChunk;
        steps.push_back({slot, len, i, slot, len, src + at, false, i >= kSlots ? i - kSlots : -1});
      }
    }
  }
  stream_ring(steps, type, op, deadline, "reduce");
}

void TcpCollectives::all_gather_bytes(const char* src, char* dst, std::size_t b,
                                      Deadline deadline) {
  if (b == 0) return;
  auto block = [&](int i) { return dst + static_cast<std::size_t>(i) * b; };
  std::vector<RingStep> steps;
  for (int s = 0; s < size_ - 1; ++s)
    steps.push_back({s == 0 ? src : block(mod(rank_ - s)), b, s - 1, block(mod(rank_ - s - 1)), b,
                     nullptr, false, -1});
  SideCopy own{block(rank_), src, block(rank_) == src ? 0 : b};
  stream_ring(steps, DType::uint8, RedOp::sum, deadline, "all-gather", &own);
}

void TcpCollectives::broadcast_bytes(const char* src, char* dst, std::size_t bytes, int root,
                                     Deadline deadline) {
  if (bytes == 0) return;
  RingStep s;
  if (rank_ == root) {
    s.out = src, s.out_bytes = bytes;
    if (dst != src) std::memcpy(dst, src, bytes);
  } else {
    s.in = dst, s.in_bytes = bytes;
    if (rank_ != mod(root - 1)) s.out = dst, s.out_bytes = bytes, s.out_after = 0;
  }
  stream_ring({s}, DType::uint8, RedOp::sum, deadline, "broadcast");
}

void TcpCollectives::alltoall(const char* src, char* dst, std::size_t b, Deadline deadline) {
  open_links(deadline);
  if (b == 0) return;
  const bool in_place = src == dst;
  if (in_place && scratch_.size() < b) scratch_.resize(b);
  // Out of place, the own block is copied while the first exchange waits.
  const std::size_t own_at = static_cast<std::size_t>(rank_) * b;
  SideCopy own{dst + own_at, src + own_at, in_place ? 0 : b};
  for (int s = 0; s < size_; ++s) {
    const int p = mod(s - rank_);
    const std::size_t at = static_cast<std::size_t>(p) * b;
    if (p == rank_) continue;
    const char* out = src + at;
    if (in_place) out = static_cast<const char*>(std::memcpy(scratch_.data(), src + at, b));
    exchange(mesh_.at(p), out, b, dst + at, b, deadline, abort_check_, NoProgress{}, &own);
  }
  own.finish();
}

void TcpCollectives::sendrecv(const char* src, char* dst, std::size_t b, Deadline deadline) {
  if (b == 0) return;
  const char* out = src;
  if (src == dst) {
    if (scratch_.size() < b) scratch_.resize(b);
    out = static_cast<const char*>(std::memcpy(scratch_.data(), src, b));
  }
  exchange(ring_, out, b, dst, b, deadline, abort_check_);
}

}  // namespace gpudiag
