// The event loop of TcpStoreServer: level-triggered epoll over the listening
// socket, an eventfd that asks the loop to stop, and the client connections.
// Each connection has an input buffer parsed into frames and an output buffer
// flushed as the socket allows; a connection is closed at the end of the
// event batch in which it was condemned, so handlers never touch a closed one.
#include "rendezvous/tcp_store_server.h"

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

#include "rendezvous/server_conn.h"
#include "util/error.h"

namespace gpudiag {

namespace sw = storewire;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t kListenerTag = 0, kStopTag = 1;

/// Binds and listens on host:port; throws UsageError with a remedy on failure.
net::Fd listen_on(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints,
                       &res);
  if (rc != 0)
    throw UsageError("store bind address '" + host + "' does not resolve: " + gai_strerror(rc),
                     "give an address of this host, or none to listen on every interface");
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  std::vector<addrinfo*> candidates;
  for (auto* ai = res; ai; ai = ai->ai_next) candidates.push_back(ai);
  // On the wildcard address prefer one dual-stack IPv6 socket that also takes IPv4.
  std::stable_sort(candidates.begin(), candidates.end(), [&](addrinfo* a, addrinfo* b) {
    return host.empty() && a->ai_family == AF_INET6 && b->ai_family != AF_INET6;
  });
  std::string last = "no usable address";
  for (auto* ai : candidates) {
    net::Fd s(::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s) {
      last = std::strerror(errno);
      continue;
    }
    int one = 1, zero = 0;
    setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ai->ai_family == AF_INET6)
      setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    if (::bind(s.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      int err = errno;
      auto where = net::sockaddr_text(ai->ai_addr, ai->ai_addrlen);
      if (err == EADDRINUSE)
        throw UsageError("port " + std::to_string(port) + " is already in use on this host (" +
                             where + "): another job or process listens there",
                         "pick another MASTER_PORT, or stop the process holding it (`ss -ltnp "
                         "'sport = :" +
                             std::to_string(port) + "'` names it)");
      if (err == EADDRNOTAVAIL)
        throw UsageError("store bind address " + where + " is not an address of this host",
                         "give one of this host's addresses, or none to listen on all of them");
      last = where + ": " + std::strerror(err);
      continue;
    }
    if (::listen(s.get(), SOMAXCONN) != 0) {
      last = std::strerror(errno);
      continue;
    }
    return s;
  }
  throw UsageError("cannot listen for the store on port " + std::to_string(port) + ": " + last);
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

}  // namespace

class TcpStoreServer::Loop : public ServerCore {
 public:
  explicit Loop(TcpStoreServerOptions o) : ServerCore(std::move(o)) {
    listener_ = listen_on(opts_.bind_host, opts_.port);
    port_ = bound_port(listener_.get());
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

  void accept_all() {
    while (true) {
      int fd = accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          // Out of descriptors: stop accepting briefly instead of spinning.
          spdlog::warn("store: cannot accept a client: {} (raise `ulimit -n`)",
                       std::strerror(errno));
          accept_paused_ = true;
          accept_resume_ = Clock::now() + std::chrono::milliseconds(200);
          set_events(listener_.get(), kListenerTag, 0);
        }
        return;
      }
      net::set_stream_options(fd);
      auto id = next_conn_id_++;
      auto conn = std::make_unique<Conn>(net::Fd(fd), id, net::peer_text(fd));
      watch(fd, id, EPOLLIN | EPOLLRDHUP);
      hellos_.emplace_back(Clock::now() + opts_.handshake_timeout, id);
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
      bury();
    }
    conns_.clear();  // closes every client now: they see the store as lost
    connections_ = 0;
  }

  net::Fd listener_, epoll_, stop_;
  int port_ = 0;
  std::thread thread_;
  std::deque<std::pair<Clock::time_point, std::uint64_t>> hellos_;
  std::uint64_t next_conn_id_ = 2;
  bool accept_paused_ = false;
  Clock::time_point accept_resume_{};
};

TcpStoreServer::TcpStoreServer(TcpStoreServerOptions options)
    : loop_(std::make_unique<Loop>(std::move(options))) {}

TcpStoreServer::~TcpStoreServer() = default;

int TcpStoreServer::port() const { return loop_->port(); }

TcpStoreServer::Stats TcpStoreServer::stats() const { return loop_->stats(); }

}  // namespace gpudiag
