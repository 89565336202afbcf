// host/tcp collectives (see tcp_ring.h) over the links of tcp_links.h.
//
// All-reduce has two algorithms. The ring streams its 2(n-1) steps back to
// back and moves the fewest bytes, which wins for large buffers. Recursive
// halving then doubling (Rabenseifner's reduce-scatter + all-gather) moves
// the same bytes in 2 log2(n) steps between pairs of ranks, so fewer ranks
// wait on each other; it wins for buffers up to kHalvingMaxBytes when the
// world is a power of two (bench/host_allreduce.py, docs/BENCHMARKS.md).
#include "comm/tcp_ring.h"

#include "comm/tcp_links.h"

namespace gpudiag {

namespace {

constexpr std::size_t kHalvingMaxBytes = 16u << 20;

class TcpCollectives : public Communicator {
 public:
  TcpCollectives(Links links, RingListener& listener, const RingPeers& peers)
      : listener_(listener),
        peers_(peers),
        ring_(std::move(links.ring)),
        partners_(std::move(links.partners)),
        rank_(peers.rank),
        size_(static_cast<int>(peers.endpoints.size())) {}

  std::string name() const override { return "host/tcp"; }

  void all_reduce_sum(float* data, std::size_t count, Deadline deadline) override {
    if (!partners_.empty() && count * sizeof(float) <= kHalvingMaxBytes)
      halving_doubling(data, count, deadline);
    else
      ring_all_reduce(data, count, deadline);
  }

  void all_gather(float* data, std::size_t count, Deadline deadline) override {
    const int n = size_;
    for (int s = 0; s < n - 1; ++s) {
      int out = ((rank_ - s) % n + n) % n, in = ((rank_ - s - 1) % n + n) % n;
      exchange(ring_, data + out * count, count, data + in * count, count, deadline, abort_check_,
               [](std::size_t) {});
    }
  }

  /// A pipelined chain from root along the ring: each rank forwards chunk k-1
  /// to the next while chunk k arrives from the previous one.
  void broadcast(float* data, std::size_t count, int root, Deadline deadline) override {
    const int n = size_;
    const bool is_root = rank_ == root, is_last = rank_ == (root + n - 1) % n;
    const std::size_t chunk = 64 * 1024, chunks = (count + chunk - 1) / chunk;
    auto at = [&](std::size_t k) { return data + k * chunk; };
    auto len = [&](std::size_t k) { return std::min(chunk, count - k * chunk); };
    for (std::size_t k = 0; k <= chunks; ++k) {
      bool send = !is_last && (is_root ? k < chunks : k > 0);
      std::size_t send_k = is_root ? k : k - 1;
      bool recv = !is_root && k < chunks;
      exchange(ring_, send ? at(send_k) : data, send ? len(send_k) : 0, recv ? at(k) : data,
               recv ? len(k) : 0, deadline, abort_check_, [](std::size_t) {});
    }
  }

  void barrier(Deadline deadline) override {
    float one = 1.0f;
    all_reduce_sum(&one, 1, deadline);
  }

  void open_links(Deadline deadline) override {
    if (mesh_.empty()) mesh_ = connect_mesh(listener_, peers_, deadline, abort_check_);
  }

  void send_recv(int peer, const float* out, float* in, std::size_t count,
                 Deadline deadline) override {
    open_links(deadline);
    exchange(mesh_.at(peer), out, count, in, count, deadline, abort_check_, [](std::size_t) {});
  }

 private:
  /// Recursive halving: with the partner at distance n/2, n/4, ..., 1, keep
  /// one half of the current range (the lower rank the lower half), send the
  /// other, and add the partner's copy of the kept half as it arrives. Each
  /// rank ends owning 1/n of the sum; recursive doubling then retraces the
  /// steps, sending what it owns and receiving the partner's part.
  void halving_doubling(float* data, std::size_t count, Deadline deadline) {
    struct Split {
      std::size_t keep_lo, keep_hi, send_lo, send_hi;
      int k;
    };
    std::vector<Split> splits;
    std::size_t lo = 0, hi = count;
    tmp_.resize(count / 2 + 1);
    for (int k = static_cast<int>(partners_.size()) - 1; k >= 0; --k) {
      const std::size_t mid = lo + (hi - lo) / 2;
      const bool lower = (rank_ & (1 << k)) == 0;
      Split s = lower ? Split{lo, mid, mid, hi, k} : Split{mid, hi, lo, mid, k};
      float* __restrict keep = data + s.keep_lo;
      const float* __restrict t = tmp_.data();
      std::size_t done = 0;
      exchange(partners_[k], data + s.send_lo, s.send_hi - s.send_lo, tmp_.data(),
               s.keep_hi - s.keep_lo, deadline, abort_check_, [&](std::size_t whole) {
                 for (std::size_t i = done; i < whole; ++i) keep[i] += t[i];
                 done = whole;
               });
      splits.push_back(s);
      lo = s.keep_lo, hi = s.keep_hi;
    }
    for (auto s = splits.rbegin(); s != splits.rend(); ++s)
      exchange(partners_[s->k], data + s->keep_lo, s->keep_hi - s->keep_lo, data + s->send_lo,
               s->send_hi - s->send_lo, deadline, abort_check_, [](std::size_t) {});
  }

  /// The ring all-reduce as one stream. Step i (reduce-scatter for i < n-1,
  /// then all-gather) sends one segment and receives another, and the
  /// segment step i+1 sends is the one step i received. So a send need not
  /// wait for its step to start: it may go as far as the previous step's
  /// received (and, while reducing, summed) floats, and the sends of all
  /// 2(n-1) steps flow back to back with the receives, never waiting for a
  /// whole segment to round-trip.
  void ring_all_reduce(float* data, std::size_t count, Deadline deadline) {
    const int n = size_, steps = 2 * (n - 1);
    auto off = [&](int i) { return count * static_cast<std::size_t>(i) / n; };
    auto seg_len = [&](int i) { return off(i + 1) - off(i); };
    auto mod = [&](int x) { return ((x % n) + n) % n; };
    // Reduce-scatter step s sends (r - s) and receives (r - s - 1); all-gather
    // step t sends (r + 1 - t) and receives (r - t).
    auto out_seg = [&](int i) { return i < n - 1 ? mod(rank_ - i) : mod(rank_ + 1 - (i - n + 1)); };
    auto in_seg = [&](int i) { return i < n - 1 ? mod(rank_ - i - 1) : mod(rank_ - (i - n + 1)); };
    tmp_.resize(count / n + 1);
    std::vector<std::size_t> done(steps, 0);  // floats received and stored per step
    int ss = 0, rs = 0;                       // current send and receive steps
    std::size_t sent = 0, got = 0;            // bytes of the current steps
    auto send_ready = [&]() -> std::size_t {  // bytes step ss may have sent by now
      std::size_t whole = seg_len(out_seg(ss)) * 4;
      return ss == 0 ? whole : std::min(whole, done[ss - 1] * 4);
    };
    int idle = 0;
    while (ss < steps || rs < steps) {
      // A send step is over once its segment is out (at once when empty, as
      // when count < n); a receive step with an empty segment likewise.
      if (ss < steps && sent == seg_len(out_seg(ss)) * 4 &&
          (ss == 0 || done[ss - 1] == seg_len(out_seg(ss)))) {
        ++ss, sent = 0;
        continue;
      }
      if (rs < steps && seg_len(in_seg(rs)) == 0) {
        ++rs, got = 0;
        continue;
      }
      const bool want_send = ss < steps && sent < send_ready();
      const bool want_recv = rs < steps;
      // Try both directions first; poll only when neither can move, which
      // saves a system call per round while data flows.
      bool moved = false;
      if (want_send) {
        const char* src = reinterpret_cast<const char*>(data + off(out_seg(ss)));
        ssize_t k =
            ::send(ring_.out.get(), src + sent, send_ready() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno != EAGAIN && errno != EINTR) lost_link(ring_.out_label);
        if (k > 0) sent += static_cast<std::size_t>(k), moved = true;
      }
      if (want_recv) {
        const bool reduce = rs < n - 1;
        float* dst = data + off(in_seg(rs));
        char* into = reinterpret_cast<char*>(reduce ? tmp_.data() : dst);
        ssize_t k = ::recv(ring_.in.get(), into + got, seg_len(in_seg(rs)) * 4 - got, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) lost_link(ring_.in_label);
        if (k > 0) {
          moved = true;
          got += static_cast<std::size_t>(k);
          // Sum the floats that are now whole; local copies keep the loop free
          // of aliasing so it vectorises.
          const std::size_t from = done[rs], to = got / 4;
          if (reduce) {
            float* __restrict d = dst;
            const float* __restrict t = tmp_.data();
            for (std::size_t i = from; i < to; ++i) d[i] += t[i];
          }
          done[rs] = to;
          if (got == seg_len(in_seg(rs)) * 4) ++rs, got = 0;
        }
      }
      if (moved) {
        idle = 0;
        continue;
      }
      if (wait_for_link(ring_, want_send, want_recv, idle, deadline, abort_check_, "all-reduce"))
        throw TimeoutError("all-reduce over TCP stalled at step " +
                               std::to_string(std::min(ss, rs) + 1) + " of " +
                               std::to_string(steps) + " (sending to " + ring_.out_label +
                               ", receiving from " + ring_.in_label + ")",
                           "one of them is stuck or its link is down");
    }
  }

  RingListener& listener_;
  RingPeers peers_;
  Link ring_;
  std::vector<Link> partners_;
  std::vector<Link> mesh_;  ///< to every rank, once open_links ran
  int rank_, size_;
  std::vector<float> tmp_;
};

}  // namespace

RingListener::RingListener() : fd_(net::listen_on("", 0)), port_(net::bound_port(fd_.get())) {}

std::unique_ptr<Communicator> make_tcp_ring(RingListener& listener, const RingPeers& peers,
                                            Deadline deadline) {
  if (peers.endpoints.size() == 1) return make_self_communicator("host/tcp");
  return std::make_unique<TcpCollectives>(connect_links(listener, peers, deadline), listener,
                                          peers);
}

}  // namespace gpudiag
