// The event loop of TcpStoreServer: level-triggered epoll over the listening
// socket, an eventfd that asks the loop to stop, and the client connections.
// Each connection has an input buffer parsed into frames and an output buffer
// flushed as the socket allows; a connection is closed at the end of the
// event batch in which it was condemned, so handlers never touch a closed one.
//
// Descriptors: the loop raises RLIMIT_NOFILE's soft limit to the hard one,
// refuses to start when even that cannot hold a connection per rank, and holds
// at most max_connections, well below the limit, so accept() does not run out:
// at the cap the oldest connection still in its handshake (an idle or slow
// peer) is dropped to make room, and when every connection is a joined client
// the newcomer is told the store is full. Should accept() fail with EMFILE or
// ENFILE all the same (descriptors taken elsewhere in the process), that is
// logged as what it is and accepting pauses briefly.
//
// A flood of connections cannot starve the job: at most kAcceptBatch are
// accepted per wakeup before the loop serves its clients again (the listener
// is level-triggered, so the rest wait in the backlog), a newcomer is
// identified by one kernel lookup of its socket, and an outsider whose uid
// owns no process of the job is known as one without reading any descriptor.
#include "store/tcp_store_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "store/peer_identity.h"
#include "store/server_conn.h"
#include "util/error.h"

namespace gpudiag {

namespace sw = storewire;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kListenerTag = 0, kStopTag = 1;
/// Connections accepted past the cap only to be told "overloaded" at their HELLO.
constexpr std::size_t kRefusedAtOnce = 16;
/// Connections accepted per wakeup of the loop before it serves its clients.
constexpr int kAcceptBatch = 64;
/// How long the owners of the job's processes are taken as known.
constexpr auto kUidsFresh = std::chrono::seconds(1);

/// The descriptor budget for clients; throws when it cannot hold the job.
std::size_t connection_cap(const TcpStoreServerOptions& o, std::string& why) {
  const auto limit = net::raise_fd_limit();
  const long long budget = limit.soft - limit.open - storelimits::kFdMargin;
  const long long world = o.expected_clients > 0 ? o.expected_clients : o.world_size;
  why = "descriptors: `ulimit -n` " + std::to_string(limit.soft) + ", " +
        std::to_string(limit.open) + " open at start";
  if (world > 0 && budget < world + 8) {
    const long long need = limit.open + world + 8 + storelimits::kFdMargin;
    throw UsageError("cannot serve the store for " + std::to_string(world) +
                         " ranks: this process may open " + std::to_string(limit.soft) +
                         " files (hard limit " + std::to_string(limit.hard) + ", `ulimit -n`), " +
                         std::to_string(limit.open) + " are open, and it needs one per rank",
                     "raise the limit to at least " + std::to_string(need) +
                         " where the store runs (`ulimit -n " + std::to_string(need) +
                         "`; LimitNOFILE= under systemd, nofile in "
                         "/etc/security/limits.conf)");
  }
  std::size_t cap = o.max_connections ? o.max_connections
                                      : storelimits::max_connections(static_cast<int>(world));
  return std::min<std::size_t>(cap, static_cast<std::size_t>(std::max(budget, 16LL)));
}

}  // namespace

class TcpStoreServer::Loop : public ServerCore {
 public:
  explicit Loop(TcpStoreServerOptions o) : ServerCore(std::move(o)) {
    max_conns_ = connection_cap(opts_, limit_why_);
    listener_ = net::listen_on(opts_.bind_host, opts_.port);
    port_ = net::bound_port(listener_.get());
    epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
    stop_.reset(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!epoll_ || !stop_) throw Error(ExitCode::internal, "store: epoll/eventfd setup failed");
    watch(listener_.get(), kListenerTag, EPOLLIN);
    watch(stop_.get(), kStopTag, EPOLLIN);
    thread_ = std::thread([this] { run(); });
  }

  ~Loop() {
    std::uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }

  int port() const { return port_; }

 private:
  void watch(int fd, std::uint64_t tag, std::uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
  }

  std::string overloaded_why() const override {
    return std::to_string(conns_.size()) + " connections, limit " + std::to_string(max_conns_) +
           "; " + limit_why_;
  }

  void set_events(int fd, std::uint64_t tag, std::uint32_t events) override {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = tag;
    epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev);
  }

  /// Milliseconds until the next handshake deadline or paused accept, capped.
  int next_timeout_ms() {
    auto now = Clock::now();
    auto next = now + std::chrono::seconds(1);
    while (!hellos_.empty()) {
      auto [when, id] = hellos_.front();
      auto* c = find(id);
      if (!c || c->greeted) {
        hellos_.pop_front();
        continue;
      }
      next = std::min(next, when);
      break;
    }
    if (accept_paused_) next = std::min(next, accept_resume_);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
    return static_cast<int>(std::clamp<long long>(ms + 1, 0, 1000));
  }

  void expire_handshakes() {
    auto now = Clock::now();
    while (!hellos_.empty() && hellos_.front().first <= now) {
      auto id = hellos_.front().second;
      hellos_.pop_front();
      if (auto* c = find(id); c && !c->greeted)
        condemn(*c, "no handshake within " + std::to_string(opts_.handshake_timeout.count()) +
                        " ms (a half-open connection, or not a gpudiag client)");
    }
    if (accept_paused_ && now >= accept_resume_) {
      accept_paused_ = false;
      set_events(listener_.get(), kListenerTag, EPOLLIN);
    }
  }

  /// Whose connection `c` is (TcpStoreServerOptions::job_peers_by_process):
  /// the job's, or an outsider's counted against its peer; false when that
  /// peer holds all the connections it may.
  bool identify(Conn& c) {
    bool loopback = false;
    const std::string address = net::peer_address(c.fd.get(), loopback);
    // A peer on this host (loopback, or any of the host's own addresses:
    // its socket is found here) is known by its process, not its address.
    if (loopback || c.peer_socket) {
      const auto& sock = c.peer_socket;
      // A process of our own user is trusted as the job's: it could signal
      // or trace the launcher anyway (another node's launcher and ranks when
      // several "nodes" share this host). Other users are outsiders, but for
      // a descendant's socket (a rank run as another user).
      c.job_peer = sock && (sock->uid == ::geteuid() ||
                            (owns_a_descendant(sock->uid) &&
                             net::held_by_descendant(::getpid(), sock->inode)));
      if (!c.job_peer) c.outsider = sock ? "uid " + std::to_string(sock->uid) : "loopback " + address;
    } else if (job_by_ip_[address] < opts_.job_conns_per_ip) {
      ++job_by_ip_[address];
      c.job_peer = true;
      c.job_address = address;
    } else {
      c.outsider = address;
    }
    if (c.job_peer) return true;
    if (outsiders_open_[c.outsider] >= TcpStoreServerOptions::kOutsiderConnsPerPeer) {
      ++refused_;
      if (log_budget())
        spdlog::warn("store: refusing client {}: {} already holds {} connections and is not a "
                     "process of this job", c.peer, c.outsider,
                     TcpStoreServerOptions::kOutsiderConnsPerPeer);
      c.outsider.clear();
      return false;
    }
    ++outsiders_open_[c.outsider];
    return true;
  }

  /// Whether `uid` owns a process descended from this one (cached a while:
  /// a flood of one outsider costs one walk of the process tree a second).
  bool owns_a_descendant(std::uint32_t uid) {
    const auto now = Clock::now();
    if (now - uids_at_ >= kUidsFresh) {
      descendant_uids_ = net::descendant_uids(::getpid());
      uids_at_ = now;
    }
    return std::find(descendant_uids_.begin(), descendant_uids_.end(), uid) !=
           descendant_uids_.end();
  }

  /// At the connection cap: drops the oldest connection still in its
  /// handshake to make room. False when every connection has joined.
  bool make_room() {
    while (!hellos_.empty()) {  // joined or gone: no handshake to expire any more
      auto* c = find(hellos_.front().second);
      if (c && !c->greeted) break;
      hellos_.pop_front();
    }
    for (auto& [when, id] : hellos_)
      if (auto* c = find(id); c && !c->greeted && !c->doomed && !c->refused) {
        condemn(*c, "making room for a new client: " + overloaded_why() +
                        " (this one has not finished its handshake)");
        close_conn(*c);
        return true;
      }
    return false;
  }

  void accept_all() {
    bury();  // connections already leaving do not count against the cap
    for (int batch = 0; batch < kAcceptBatch; ++batch) {
      int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: say so (clients would otherwise only see a
          // silent server) and stop accepting briefly instead of spinning.
          spdlog::error(
              "store: cannot accept a client: out of file descriptors ({}; {}, {}): raise "
              "`ulimit -n` where the store runs",
              std::strerror(errno), errno == EMFILE ? "this process" : "the whole system",
              overloaded_why());
          accept_paused_ = true;
          accept_resume_ = Clock::now() + std::chrono::milliseconds(200);
          set_events(listener_.get(), kListenerTag, 0);
        }
        return;
      }
      net::set_stream_options(fd);
      auto id = next_conn_id_++;
      auto conn = std::make_unique<Conn>(net::Fd(fd), id, net::peer_text(fd));
      if (opts_.own_process_trusted || opts_.job_peers_by_process) {
        conn->peer_socket = net::local_peer_socket(fd);
        // Only a socket of our own user can be one this process holds.
        if (opts_.own_process_trusted && conn->peer_socket &&
            conn->peer_socket->uid == ::geteuid())
          conn->own_process = net::held_by_process(::getpid(), conn->peer_socket->inode);
      }
      if (opts_.job_peers_by_process && !identify(*conn)) continue;  // `conn` closes the socket
      if (conns_.size() - refused_open_ >= max_conns_ && !make_room()) {
        // Every connection is a joined client: tell the newcomer at its HELLO,
        // a few at a time; past that, close at once.
        if (refused_open_ >= kRefusedAtOnce) {
          ++refused_;
          continue;  // `conn` closes the socket
        }
        conn->refused = true;
        ++refused_open_;
        if (log_budget())
          spdlog::warn("store: refusing client {}: {}", conn->peer, overloaded_why());
      }
      watch(fd, id, EPOLLIN | EPOLLRDHUP);
      // The job's own processes are never timed out, silent or not.
      if (!conn->job_peer) hellos_.emplace_back(Clock::now() + opts_.handshake_timeout, id);
      spdlog::debug("store: client {} connected", conn->peer);
      conns_.emplace(id, std::move(conn));
      connections_ = conns_.size();
    }
  }

  void run() {
    std::vector<epoll_event> events(256);
    bool stopping = false;
    while (!stopping) {
      int n = epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()),
                         next_timeout_ms());
      if (n < 0 && errno != EINTR) {
        spdlog::error("store: epoll_wait failed: {}", std::strerror(errno));
        break;
      }
      for (int i = 0; i < n; ++i) {
        auto tag = events[i].data.u64;
        if (tag == kStopTag) {
          stopping = true;
        } else if (tag == kListenerTag) {
          accept_all();
        } else if (auto* c = find(tag); c && !c->doomed) {
          try {
            on_event(*c, events[i].events);
          } catch (const std::exception& e) {  // e.g. no memory for a huge message
            condemn(*c, std::string("cannot serve it: ") + e.what());
          }
        }
      }
      expire_handshakes();
      shed_over_budget();
      bury();
    }
    conns_.clear();  // closes every client now: they see the store as lost
    connections_ = 0;
  }

  net::Fd listener_, epoll_, stop_;
  int port_ = 0;
  std::size_t max_conns_ = 0;
  std::string limit_why_;  ///< the descriptor limit, for log lines
  std::thread thread_;
  std::deque<std::pair<Clock::time_point, std::uint64_t>> hellos_;
  std::uint64_t next_conn_id_ = 2;
  bool accept_paused_ = false;
  Clock::time_point accept_resume_{};
  std::vector<std::uint32_t> descendant_uids_;
  Clock::time_point uids_at_{};
};

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options)
    : loop_(std::make_unique<Loop>(std::move(options))) {}

TcpStoreServer::~TcpStoreServer() = default;

int TcpStoreServer::port() const { return loop_->port(); }

TcpStoreServer::Stats TcpStoreServer::stats() const { return loop_->stats(); }

}  // namespace gpudiag
