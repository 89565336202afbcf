#include "comm/tcp_links.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace gpudiag {

namespace {

constexpr std::uint32_t kMaxPartnerChannel = 32;  // k + 1 for distances 2^k, k < 32
constexpr std::uint32_t kMeshChannel = 64;
constexpr char kMagic[8] = {'G', 'D', 'R', 'I', 'N', 'G', '0', '2'};

struct Hello {
  char magic[8];
  std::uint32_t rank;
  std::uint32_t token;
  std::uint32_t channel;
};

std::uint32_t token_hash(const std::string& token) {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : token) h = (h ^ c) * 16777619u;
  return h;
}

std::pair<std::string, int> split_endpoint(const std::string& ep) {
  auto colon = ep.rfind(':');
  auto port = colon == std::string::npos ? std::nullopt : parse_int(ep.substr(colon + 1));
  std::string host = ep.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (!port) throw Error(ExitCode::broken, "malformed ring endpoint '" + ep + "' from a peer");
  return {host, static_cast<int>(*port)};
}

/// Large kernel buffers let one send() hand over megabytes and cut round trips.
void set_buffers(int fd) {
  int bytes = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

/// Gives up early when `abort_check` reports a reason (a peer announced dead).
void check_abort(const AbortCheck& abort_check, const std::string& what) {
  if (abort_check)
    if (auto why = abort_check()) throw Error(ExitCode::broken, what + " abandoned: " + *why);
}

net::Fd open_to(const RingPeers& peers, int to, std::uint32_t channel, Deadline deadline,
                const AbortCheck& abort_check = {}) {
  auto [host, port] = split_endpoint(peers.endpoints[to]);
  net::Fd fd;
  while (!fd) {
    try {
      // In slices, so a peer's announced death ends the wait.
      fd = net::connect_with_retry(
          host, port,
          abort_check ? deadline.min(Deadline::after(std::chrono::seconds(1))) : deadline);
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      check_abort(abort_check, "connecting to " + peers.labels[to]);
      if (!abort_check || deadline.expired())
        throw Error(e.code(),
                    "cannot connect to " + peers.labels[to] + " for host/tcp: " + e.what(),
                    e.remedy());
    }
  }
  set_buffers(fd.get());
  Hello h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.rank = static_cast<std::uint32_t>(peers.rank);
  h.token = token_hash(peers.token);
  h.channel = channel;
  if (net::send_all(fd.get(), &h, sizeof h, deadline) != net::Io::ok)
    throw Error(ExitCode::broken, peers.labels[to] + " closed the host/tcp connection at once");
  return fd;
}

/// Accepts until every (rank, channel) in `want` has called.
std::map<std::pair<int, int>, net::Fd> accept_all(RingListener& listener,
                                                  std::map<std::pair<int, int>, net::Fd> want,
                                                  const RingPeers& peers, Deadline deadline,
                                                  const AbortCheck& abort_check = {}) {
  const auto token = token_hash(peers.token);
  const int n = static_cast<int>(peers.endpoints.size());
  for (auto& [key, fd] : want) {
    auto it = listener.early().find(key);
    if (it == listener.early().end()) continue;
    fd = std::move(it->second);
    listener.early().erase(it);
  }
  auto missing = [&] {
    for (auto& [key, fd] : want)
      if (!fd) return key;
    return std::pair{-1, -1};
  };
  while (missing().first >= 0) {
    pollfd p{listener.fd().get(), POLLIN, 0};
    if (::poll(&p, 1, deadline.poll_ms(200)) > 0) {
      net::Fd c(::accept4(listener.fd().get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!c && (errno == EMFILE || errno == ENFILE))
        throw Error(ExitCode::broken,
                    "out of file descriptors accepting host/tcp connections (" +
                        std::to_string(n - 1) + " peers)",
                    "raise the open-files limit (ulimit -n) for the job");
      if (!c) continue;
      Hello h{};
      if (net::recv_exact(c.get(), &h, sizeof h, Deadline::after(std::chrono::seconds(5))) !=
              net::Io::ok ||
          std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.token != token)
        continue;  // not one of ours
      if (h.rank >= static_cast<std::uint32_t>(n) || static_cast<int>(h.rank) == peers.rank ||
          (h.channel > kMaxPartnerChannel && h.channel != kMeshChannel))
        continue;  // a peer of this job would never say this
      const std::pair<int, int> key{static_cast<int>(h.rank), static_cast<int>(h.channel)};
      net::set_stream_options(c.get());
      set_buffers(c.get());
      auto it = want.find(key);
      if (it == want.end())
        listener.early().emplace(key, std::move(c));  // for a later accept_all; first one wins
      else if (!it->second)
        it->second = std::move(c);
      continue;
    }
    check_abort(abort_check, "accepting host/tcp connections");
    if (deadline.expired())
      throw TimeoutError(
          peers.labels[missing().first] + " never connected to this rank's host/tcp port",
          "a firewall may block the ports between hosts; check that every "
          "host can reach the others' addresses (GPUDIAG_HOST_ADDR to choose one)");
  }
  return want;
}

}  // namespace

void lost_link(const std::string& who) {
  throw Error(ExitCode::broken, "lost the host/tcp connection to " + who +
                                    ": its process exited or was killed, or the link dropped");
}

Links connect_links(RingListener& listener, const RingPeers& peers, Deadline deadline,
                    const AbortCheck& abort_check) {
  const int n = static_cast<int>(peers.endpoints.size()), r = peers.rank;
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  int levels = 0;
  if (n >= 4 && (n & (n - 1)) == 0)
    while ((1 << levels) < n) ++levels;
  // Open every outgoing connection first: the peers' listeners are open since
  // before the exchange, so this completes without waiting for them to accept.
  Links links;
  links.ring.out = open_to(peers, next, 0, deadline, abort_check);
  links.ring.out_label = peers.labels[next];
  links.partners.resize(levels);
  for (int k = 0; k < levels; ++k) {
    const int p = r ^ (1 << k);
    links.partners[k].out = open_to(peers, p, k + 1, deadline, abort_check);
    links.partners[k].out_label = links.partners[k].in_label = peers.labels[p];
  }
  std::map<std::pair<int, int>, net::Fd> want;
  want[{prev, 0}];
  for (int k = 0; k < levels; ++k) want[{r ^ (1 << k), k + 1}];
  auto got = accept_all(listener, std::move(want), peers, deadline, abort_check);
  links.ring.in = std::move(got[{prev, 0}]);
  links.ring.in_label = peers.labels[prev];
  for (int k = 0; k < levels; ++k) links.partners[k].in = std::move(got[{r ^ (1 << k), k + 1}]);
  return links;
}

std::vector<Link> connect_mesh(RingListener& listener, const RingPeers& peers, Deadline deadline,
                               const AbortCheck& abort_check) {
  const int n = static_cast<int>(peers.endpoints.size()), r = peers.rank;
  // Two sockets per peer: a large world needs more than the usual soft
  // limit of 1024; raise it as far as needed, within the hard limit.
  rlimit lim{};
  const rlim_t need = 2 * static_cast<rlim_t>(n) + 256;
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < need) {
    lim.rlim_cur = std::min(need, lim.rlim_max);
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  std::vector<Link> mesh(n);
  std::map<std::pair<int, int>, net::Fd> want;
  for (int p = 0; p < n; ++p) {
    if (p == r) continue;
    mesh[p].out = open_to(peers, p, kMeshChannel, deadline, abort_check);
    mesh[p].out_label = mesh[p].in_label = peers.labels[p];
    want[{p, static_cast<int>(kMeshChannel)}];
  }
  auto got = accept_all(listener, std::move(want), peers, deadline, abort_check);
  for (auto& [key, fd] : got) mesh[key.first].in = std::move(fd);
  return mesh;
}

}  // namespace gpudiag
