// The ring (see tcp_ring.h): connection set-up and the poll loop that moves
// one segment each way per step.
#include "comm/tcp_ring.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

constexpr int kYieldsBeforePoll = 64;
constexpr char kMagic[8] = {'G', 'D', 'R', 'I', 'N', 'G', '0', '1'};

std::uint32_t token_hash(const std::string& token) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : token) h = (h ^ c) * 16777619u;
  return h;
}

struct Hello {
  char magic[8];
  std::uint32_t rank;
  std::uint32_t token;
};

std::pair<std::string, int> split_endpoint(const std::string& ep) {
  auto colon = ep.rfind(':');
  auto port = parse_int(ep.substr(colon + 1));
  std::string host = ep.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (colon == std::string::npos || !port)
    throw Error(ExitCode::broken, "malformed ring endpoint '" + ep + "' from a peer");
  return {host, static_cast<int>(*port)};
}

/// Ring sockets move megabytes per step: large kernel buffers let one
/// send() hand over a whole segment and cut the poll round trips.
void set_ring_buffers(int fd) {
  int bytes = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

/// Accepts connections until one says hello as `want` from this job.
net::Fd accept_neighbour(net::Fd& listener, int want, std::uint32_t token, const std::string& label,
                         Deadline deadline) {
  while (true) {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, deadline.poll_ms(200)) > 0) {
      net::Fd c(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!c) continue;
      Hello h{};
      if (net::recv_exact(c.get(), &h, sizeof h, Deadline::after(std::chrono::seconds(5))) ==
              net::Io::ok &&
          std::memcmp(h.magic, kMagic, sizeof kMagic) == 0 && h.token == token &&
          static_cast<int>(h.rank) == want) {
        net::set_stream_options(c.get());
        set_ring_buffers(c.get());
        return c;
      }
      // Anything else (a port scanner, a stale job) is dropped.
    }
    if (deadline.expired())
      throw TimeoutError(label + " never connected to this rank's ring port",
                         "a firewall may block the ports between hosts; check that every "
                         "host can reach the others' addresses (GPUDIAG_HOST_ADDR to choose one)");
  }
}

class TcpRing : public Communicator {
 public:
  TcpRing(net::Fd next, net::Fd prev, const RingPeers& peers)
      : next_(std::move(next)),
        prev_(std::move(prev)),
        rank_(peers.rank),
        size_(static_cast<int>(peers.endpoints.size())),
        next_label_(peers.labels[(rank_ + 1) % size_]),
        prev_label_(peers.labels[(rank_ + size_ - 1) % size_]) {}

  std::string name() const override { return "host/tcp"; }

  /// The ring all-reduce as one stream. Step i (reduce-scatter for i < n-1,
  /// then all-gather) sends one segment and receives another, and the
  /// segment step i+1 sends is the one step i received. So a send need not
  /// wait for its step to start: it may go as far as the previous step's
  /// received (and, while reducing, summed) floats, and the sends of all
  /// 2(n-1) steps flow back to back with the receives, never waiting for a
  /// whole segment to round-trip.
  void all_reduce_sum(float* data, std::size_t count, Deadline deadline) override {
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
            ::send(next_.get(), src + sent, send_ready() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno != EAGAIN && errno != EINTR) lost(next_label_);
        if (k > 0) sent += static_cast<std::size_t>(k), moved = true;
      }
      if (want_recv) {
        const bool reduce = rs < n - 1;
        float* dst = data + off(in_seg(rs));
        char* into = reinterpret_cast<char*>(reduce ? tmp_.data() : dst);
        ssize_t k = ::recv(prev_.get(), into + got, seg_len(in_seg(rs)) * 4 - got, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) lost(prev_label_);
        if (k > 0) {
          moved = true;
          got += static_cast<std::size_t>(k);
          std::size_t& d = done[rs];
          if (reduce)
            for (; d < got / 4; ++d) dst[d] += tmp_[d];
          else
            d = got / 4;
          if (got == seg_len(in_seg(rs)) * 4) ++rs, got = 0;
        }
      }
      if (moved) {
        idle = 0;
        continue;
      }
      // Briefly yield instead of sleeping: on a busy host the peer that owes
      // us data may be waiting for this very core.
      if (++idle < kYieldsBeforePoll) {
        sched_yield();
        continue;
      }
      idle = 0;
      pollfd p[2] = {{next_.get(), static_cast<short>(want_send ? POLLOUT : 0), 0},
                     {prev_.get(), static_cast<short>(want_recv ? POLLIN : 0), 0}};
      int rc = ::poll(p, 2, deadline.poll_ms(100));
      if (rc < 0 && errno != EINTR) throw Error(ExitCode::broken, "poll failed on the ring");
      if (p[0].revents & (POLLERR | POLLHUP)) lost(next_label_);
      if (rc == 0) {
        if (abort_check_)
          if (auto why = abort_check_())
            throw Error(ExitCode::broken, "all-reduce abandoned: " + *why);
        if (deadline.expired())
          throw TimeoutError("all-reduce over TCP stalled at step " +
                                 std::to_string(std::min(ss, rs) + 1) + " of " +
                                 std::to_string(steps) + " (sending to " + next_label_ +
                                 ", receiving from " + prev_label_ + ")",
                             "one of them is stuck or its link is down");
      }
    }
  }

  void all_gather(float* data, std::size_t count, Deadline deadline) override {
    const int n = size_;
    for (int s = 0; s < n - 1; ++s) {
      int out = ((rank_ - s) % n + n) % n, in = ((rank_ - s - 1) % n + n) % n;
      exchange(data + out * count, count, data + in * count, count, deadline, [](std::size_t) {});
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
      exchange(send ? at(send_k) : data, send ? len(send_k) : 0, recv ? at(k) : data,
               recv ? len(k) : 0, deadline, [](std::size_t) {});
    }
  }

  void barrier(Deadline deadline) override {
    float one = 1.0f;
    all_reduce_sum(&one, 1, deadline);
  }

 private:
  /// Sends `out_n` floats to the next rank while receiving `in_n` from the
  /// previous one; `arrived(k)` runs whenever the first k floats are in.
  template <class F>
  void exchange(const float* out, std::size_t out_n, float* in, std::size_t in_n, Deadline deadline,
                F arrived) {
    const char* o = reinterpret_cast<const char*>(out);
    char* i = reinterpret_cast<char*>(in);
    std::size_t sent = 0, got = 0;
    const std::size_t out_b = out_n * 4, in_b = in_n * 4;
    while (sent < out_b || got < in_b) {
      pollfd p[2] = {{next_.get(), static_cast<short>(sent < out_b ? POLLOUT : 0), 0},
                     {prev_.get(), static_cast<short>(got < in_b ? POLLIN : 0), 0}};
      int rc = ::poll(p, 2, deadline.poll_ms(100));
      if (rc < 0 && errno != EINTR) throw Error(ExitCode::broken, "poll failed on the ring");
      if (p[0].revents & (POLLERR | POLLHUP)) lost(next_label_);
      if (p[0].revents & POLLOUT) {
        ssize_t k = ::send(next_.get(), o + sent, std::min<std::size_t>(out_b - sent, 4 << 20),
                           MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN && errno != EINTR) lost(next_label_);
        if (k > 0) sent += static_cast<std::size_t>(k);
      }
      if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t k = ::recv(prev_.get(), i + got, in_b - got, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) lost(prev_label_);
        if (k > 0) {
          got += static_cast<std::size_t>(k);
          arrived(got / 4);
        }
      }
      if (rc == 0 || !(sent < out_b || got < in_b)) {
        if (sent >= out_b && got >= in_b) break;
        if (abort_check_)
          if (auto why = abort_check_())
            throw Error(ExitCode::broken, "all-reduce abandoned: " + *why);
        if (deadline.expired())
          throw TimeoutError("all-reduce over TCP stalled: " + human_bytes(sent) + " of " +
                                 human_bytes(out_b) + " sent to " + next_label_ + ", " +
                                 human_bytes(got) + " of " + human_bytes(in_b) + " received from " +
                                 prev_label_,
                             "one of them is stuck or its link is down");
      }
    }
  }

  [[noreturn]] void lost(const std::string& who) {
    throw Error(ExitCode::broken, "lost the ring connection to " + who +
                                      ": its process exited or was killed, or the link dropped");
  }

  net::Fd next_, prev_;
  int rank_, size_;
  std::string next_label_, prev_label_;
  std::vector<float> tmp_;
};

}  // namespace

RingListener::RingListener() : fd_(net::listen_on("", 0)), port_(net::bound_port(fd_.get())) {}

std::unique_ptr<Communicator> make_tcp_ring(RingListener& listener, const RingPeers& peers,
                                            Deadline deadline) {
  const int n = static_cast<int>(peers.endpoints.size());
  if (n == 1) return make_self_communicator("host/tcp");
  const int next = (peers.rank + 1) % n, prev = (peers.rank + n - 1) % n;
  const auto token = token_hash(peers.token);
  // Connect first: the neighbour's listener is open since before the exchange,
  // so this completes without waiting for it to accept.
  auto [host, port] = split_endpoint(peers.endpoints[next]);
  net::Fd out;
  try {
    out = net::connect_with_retry(host, port, deadline);
  } catch (const Error& e) {
    throw Error(e.code(), "cannot connect to " + peers.labels[next] + " for the ring: " + e.what(),
                e.remedy());
  }
  Hello h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.rank = static_cast<std::uint32_t>(peers.rank);
  h.token = token;
  set_ring_buffers(out.get());
  if (net::send_all(out.get(), &h, sizeof h, deadline) != net::Io::ok)
    throw Error(ExitCode::broken, peers.labels[next] + " closed the ring connection at once");
  net::Fd in = accept_neighbour(listener.fd(), prev, token, peers.labels[prev], deadline);
  return std::make_unique<TcpRing>(std::move(out), std::move(in), peers);
}

}  // namespace gpudiag
