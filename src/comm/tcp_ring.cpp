// host/tcp's engines (see tcp_ring.h) over the links of tcp_links.h, and
// the float interface on top of them.
//
// stream_ring() runs a schedule of ring steps (tcp_collectives.h) as one
// stream: every step's send may start as soon as the bytes it forwards are
// in, so no step waits for a whole segment to round-trip. Reductions land
// through reduce_into() a received run of whole elements at a time, for any
// type and operation.
//
// All-reduce has two algorithms. The ring streams its 2(n-1) steps back to
// back and moves the fewest bytes, which wins for large buffers. Recursive
// halving then doubling (Rabenseifner's reduce-scatter + all-gather) moves
// the same bytes in 2 log2(n) steps between pairs of ranks, so fewer ranks
// wait on each other; it wins for buffers up to kHalvingMaxBytes when the
// world is a power of two (bench/host_collectives.py, docs/BENCHMARKS.md).
#include "comm/tcp_ring.h"

#include <algorithm>
#include <cstring>

#include "comm/host_reduce.h"
#include "comm/tcp_collectives.h"

namespace gpudiag {

namespace {

constexpr std::size_t kHalvingMaxBytes = 16u << 20;

}  // namespace

void land_reduced(char* in, const char* with, const char* incoming, std::size_t from,
                  std::size_t to, DType type, RedOp op, bool finish, int nranks) {
  if (to <= from) return;
  const std::size_t e = dtype_size(type), n = (to - from) / e;
  if (in != with) std::memcpy(in + from, with + from, to - from);
  reduce_into(in + from, incoming + from, n, type, op);
  if (finish) finish_avg(in + from, n, type, nranks);
}

TcpCollectives::TcpCollectives(Links links, RingListener& listener, const RingPeers& peers)
    : listener_(listener),
      peers_(peers),
      ring_(std::move(links.ring)),
      partners_(std::move(links.partners)),
      rank_(peers.rank),
      size_(static_cast<int>(peers.endpoints.size())) {}

void TcpCollectives::all_reduce_sum(float* data, std::size_t count, Deadline deadline) {
  auto* bytes = reinterpret_cast<char*>(data);
  all_reduce(bytes, bytes, count, DType::float32, RedOp::sum, deadline);
}

void TcpCollectives::all_gather(float* data, std::size_t count, Deadline deadline) {
  auto* bytes = reinterpret_cast<char*>(data);
  const std::size_t block = count * sizeof(float);
  all_gather_bytes(bytes + static_cast<std::size_t>(rank_) * block, bytes, block, deadline);
}

void TcpCollectives::broadcast(float* data, std::size_t count, int root, Deadline deadline) {
  auto* bytes = reinterpret_cast<char*>(data);
  broadcast_bytes(bytes, bytes, count * sizeof(float), root, deadline);
}

void TcpCollectives::barrier(Deadline deadline) {
  float one = 1.0f;
  all_reduce_sum(&one, 1, deadline);
}

void TcpCollectives::open_links(Deadline deadline) {
  if (mesh_.empty()) mesh_ = connect_mesh(listener_, peers_, deadline, abort_check_);
}

void TcpCollectives::send_recv(int peer, const float* out, float* in, std::size_t count,
                               Deadline deadline) {
  open_links(deadline);
  exchange(mesh_.at(peer), out, count * sizeof(float), in, count * sizeof(float), deadline,
           abort_check_);
}

void TcpCollectives::all_reduce(const char* src, char* dst, std::size_t count, DType type, RedOp op,
                                Deadline deadline) {
  const std::size_t e = dtype_size(type);
  if (count == 0) return;
  if (!partners_.empty() && count * e <= kHalvingMaxBytes)
    return halving_doubling(src, dst, count, type, op, deadline);
  // The ring: segment i is elements [count*i/n, count*(i+1)/n). Reduce-scatter
  // step s sends segment r-s and receives r-s-1, adding this rank's part;
  // all-gather step t sends r+1-t and receives r-t. Every step sends what
  // the step before received, so all 2(n-1) stream back to back.
  const int n = size_;
  auto off = [&](int i) { return count * static_cast<std::size_t>(i) / n * e; };
  auto len = [&](int i) { return off(i + 1) - off(i); };
  std::vector<RingStep> steps;
  for (int s = 0; s < n - 1; ++s) {
    const int o = mod(rank_ - s), i = mod(rank_ - s - 1);
    steps.push_back({(s == 0 ? src : dst) + off(o), len(o), s - 1, dst + off(i), len(i),
                     src + off(i), op == RedOp::avg && s == n - 2, -1});
  }
  for (int t = 0; t < n - 1; ++t) {
    const int o = mod(rank_ + 1 - t), i = mod(rank_ - t);
    steps.push_back({dst + off(o), len(o), n - 2 + t, dst + off(i), len(i), nullptr, false, -1});
  }
  stream_ring(steps, type, op, deadline, "all-reduce");
}

/// Recursive halving: with the partner at distance n/2, n/4, ..., 1, keep
/// one half of the current range (the lower rank the lower half), send the
/// other, and reduce the partner's copy of the kept half into it as it
/// arrives. Each rank ends owning 1/n of the result; recursive doubling then
/// retraces the steps, sending what it owns and receiving the partner's part.
/// The first step reads this rank's contribution from `src`, every later one
/// from `data`, so out of place costs no copy.
void TcpCollectives::halving_doubling(const char* src, char* data, std::size_t count, DType type,
                                      RedOp op, Deadline deadline) {
  struct Split {
    std::size_t keep_lo, keep_hi, send_lo, send_hi;  // bytes
    int k;
  };
  const std::size_t e = dtype_size(type);
  std::vector<Split> splits;
  std::size_t lo = 0, hi = count;  // elements
  if (tmp_.size() < (count / 2 + 1) * e) tmp_.resize((count / 2 + 1) * e);
  for (int k = static_cast<int>(partners_.size()) - 1; k >= 0; --k) {
    const std::size_t mid = lo + (hi - lo) / 2;
    const bool lower = (rank_ & (1 << k)) == 0;
    Split s = lower ? Split{lo * e, mid * e, mid * e, hi * e, k}
                    : Split{mid * e, hi * e, lo * e, mid * e, k};
    const char* from = splits.empty() ? src : data;
    char* keep = data + s.keep_lo;
    const char* with = from + s.keep_lo;
    const char* t = tmp_.data();
    const bool finish = op == RedOp::avg && k == 0;
    std::size_t done = 0;
    exchange(partners_[k], from + s.send_lo, s.send_hi - s.send_lo, tmp_.data(),
             s.keep_hi - s.keep_lo, deadline, abort_check_, [&](std::size_t got) {
               const std::size_t whole = got / e * e;
               land_reduced(keep, with, t, done, whole, type, op, finish, size_);
               done = whole;
             });
    splits.push_back(s);
    lo = s.keep_lo / e, hi = s.keep_hi / e;
  }
  for (auto s = splits.rbegin(); s != splits.rend(); ++s)
    exchange(partners_[s->k], data + s->keep_lo, s->keep_hi - s->keep_lo, data + s->send_lo,
             s->send_hi - s->send_lo, deadline, abort_check_);
}

/// Runs a ring schedule as one stream over ring_. A send need not wait for
/// its step to start: it may go as far as the receive it forwards has stored
/// (and reduced), so the sends of all steps flow back to back with the
/// receives, never waiting for a whole segment to round-trip. `side`, if
/// any, is copied while the ring waits and is complete on return.
void TcpCollectives::stream_ring(const std::vector<RingStep>& steps, DType type, RedOp op,
                                 Deadline deadline, const char* what, SideCopy* side) {
  const std::size_t e = dtype_size(type);
  const int n = static_cast<int>(steps.size());
  std::size_t need = 0;
  for (const auto& s : steps)
    if (s.with) need = std::max(need, s.in_bytes);
  if (tmp_.size() < need) tmp_.resize(need);
  std::vector<std::size_t> done(n, 0);      // bytes received and stored per step
  int ss = 0, rs = 0;                       // current send and receive steps
  std::size_t sent = 0, got = 0;            // bytes of the current steps
  auto send_ready = [&]() -> std::size_t {  // bytes step ss may have sent by now
    const RingStep& s = steps[ss];
    return s.out_after < 0 ? s.out_bytes : std::min(s.out_bytes, done[s.out_after]);
  };
  int idle = 0;
  while (ss < n || rs < n) {
    // A step is over once its bytes are out / in (at once when empty, as
    // when count < n).
    if (ss < n && sent == steps[ss].out_bytes) {
      ++ss, sent = 0;
      continue;
    }
    if (rs < n && got == steps[rs].in_bytes) {
      ++rs, got = 0;
      continue;
    }
    const bool want_send = ss < n && sent < send_ready();
    const bool want_recv = rs < n && steps[rs].in_after < ss;
    // Try both directions first; poll only when neither can move, which
    // saves a system call per round while data flows.
    bool moved = false;
    if (want_send) {
      ssize_t k = ::send(ring_.out.get(), steps[ss].out + sent,
                         std::min(kIoChunk, send_ready() - sent), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k < 0 && errno != EAGAIN && errno != EINTR) lost_link(ring_.out_label);
      if (k > 0) sent += static_cast<std::size_t>(k), moved = true;
      if (k > 0 && side) side->sent_from(steps[ss].out, sent);
    }
    if (want_recv) {
      const RingStep& s = steps[rs];
      char* into = s.with ? tmp_.data() : s.in;
      ssize_t k =
          ::recv(ring_.in.get(), into + got, std::min(kIoChunk, s.in_bytes - got), MSG_DONTWAIT);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) lost_link(ring_.in_label);
      if (k > 0) {
        moved = true;
        got += static_cast<std::size_t>(k);
        if (s.with) {  // reduce the elements that are now whole
          const std::size_t whole = got / e * e;
          land_reduced(s.in, s.with, tmp_.data(), done[rs], whole, type, op, s.finish, size_);
          done[rs] = whole;
        } else {
          done[rs] = got;
        }
      }
    }
    if (moved) {
      idle = 0;
      continue;
    }
    if (side && side->step()) continue;
    if (wait_for_link(ring_, want_send, want_recv, idle, deadline, abort_check_, what))
      throw TimeoutError(std::string(what) + " over TCP stalled at step " +
                             std::to_string(std::min(ss, rs) + 1) + " of " + std::to_string(n) +
                             " (sending to " + ring_.out_label + ", receiving from " +
                             ring_.in_label + ")",
                         "one of them is stuck or its link is down");
  }
  if (side) side->finish();
}

RingListener::RingListener() : fd_(net::listen_on("", 0)), port_(net::bound_port(fd_.get())) {}

std::unique_ptr<Communicator> make_tcp_ring(RingListener& listener, const RingPeers& peers,
                                            Deadline deadline, const AbortCheck& abort_check) {
  if (peers.endpoints.size() == 1) return make_self_communicator("host/tcp");
  return std::make_unique<TcpCollectives>(connect_links(listener, peers, deadline, abort_check),
                                          listener, peers);
}

}  // namespace gpudiag
