#include "store/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::net {

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string host_port(std::string_view host, int port) {
  std::string h(host);
  if (h.find(':') != std::string::npos && !h.starts_with("[")) h = "[" + h + "]";
  return h + ":" + std::to_string(port);
}

namespace {

std::string numeric_host(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST] = "?";
  getnameinfo(addr, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  std::string_view h(host);
  // An IPv4 client of a dual-stack socket shows as ::ffff:a.b.c.d: print a.b.c.d.
  if (h.starts_with("::ffff:") && h.find('.') != std::string_view::npos) h.remove_prefix(7);
  return std::string(h);
}

int sockaddr_port(const sockaddr* addr) {
  if (addr->sa_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  if (addr->sa_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
  return 0;
}

/// The interface that owns local address `ip`, or empty.
std::string interface_of(const std::string& ip) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> guard(list, freeifaddrs);
  for (auto* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr) continue;
    auto fam = a->ifa_addr->sa_family;
    if (fam != AF_INET && fam != AF_INET6) continue;
    socklen_t len = fam == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (numeric_host(a->ifa_addr, len) == ip) return a->ifa_name;
  }
  return {};
}

void sleep_for(std::chrono::milliseconds d, Deadline deadline) {
  std::this_thread::sleep_for(std::min(d, deadline.remaining()));
}

/// One non-blocking connect attempt bounded by `deadline`; returns the
/// connected socket or an invalid Fd with `error` describing why not.
Fd try_connect(const addrinfo* ai, Deadline deadline, std::string& error, bool& refused) {
  refused = false;
  Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
  if (!s && (errno == EMFILE || errno == ENFILE)) {
    // Retrying cannot help, and the deadline's message would blame the network.
    auto limit = raise_fd_limit();
    throw Error(
        ExitCode::broken,
        std::string("cannot open a socket to reach the store: ") + std::strerror(errno) +
            (errno == EMFILE ? " (this process has " + std::to_string(limit.open) +
                                   " open, `ulimit -n` allows " + std::to_string(limit.soft) + ")"
                             : " (the system-wide limit, fs.file-max)"),
        "raise `ulimit -n` (LimitNOFILE= under systemd, nofile in "
        "/etc/security/limits.conf) or find what holds so many descriptors");
  }
  if (!s) {
    error = std::strerror(errno);
    return {};
  }
  if (::connect(s.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
    refused = errno == ECONNREFUSED;
    error = std::strerror(errno);
    return {};
  }
  pollfd p{s.get(), POLLOUT, 0};
  while (true) {
    int n = ::poll(&p, 1, deadline.poll_ms());
    if (n > 0) break;
    if (n < 0 && errno != EINTR) {
      error = std::strerror(errno);
      return {};
    }
    if (deadline.expired()) {
      error =
          "no answer to the connection attempt (packets dropped: a firewall, a wrong address, "
          "or a server too busy to accept)";
      return {};
    }
  }
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    refused = err == ECONNREFUSED;
    error = std::strerror(err);
    return {};
  }
  return s;
}

}  // namespace

FdLimit raise_fd_limit() {
  FdLimit out;
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rlimit raised = rl;
      raised.rlim_cur = rl.rlim_max;
      if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
    }
    auto as_ll = [](rlim_t v) {
      return v == RLIM_INFINITY ? (1LL << 30) : static_cast<long long>(v);
    };
    out.soft = as_ll(rl.rlim_cur);
    out.hard = as_ll(rl.rlim_max);
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++out.open;
  return out;
}

std::string sockaddr_text(const sockaddr* addr, socklen_t len) {
  return host_port(numeric_host(addr, len), sockaddr_port(addr));
}

std::string peer_text(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return sockaddr_text(reinterpret_cast<sockaddr*>(&ss), len);
}

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void set_stream_options(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  int idle = 60, interval = 10, count = 6;
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

std::string route_hint(const sockaddr* addr, socklen_t len) {
  Fd udp(::socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!udp || ::connect(udp.get(), addr, len) != 0) return {};
  sockaddr_storage local{};
  socklen_t local_len = sizeof local;
  if (getsockname(udp.get(), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return {};
  auto ip = numeric_host(reinterpret_cast<sockaddr*>(&local), local_len);
  auto ifname = interface_of(ip);
  return "from " + ip + (ifname.empty() ? "" : " (" + ifname + ")");
}

Fd connect_with_retry(const std::string& given_host, int port, Deadline deadline,
                      std::optional<Deadline> refused_by) {
  const auto start = Deadline::Clock::now();
  // "[::1]" as written in URLs is "::1" to getaddrinfo.
  std::string host = given_host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  const auto where = host_port(host, port);
  std::string last_error = "no attempt made", resolved, route;
  auto backoff = std::chrono::milliseconds(50);
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
    if (rc != 0 && rc != EAI_AGAIN) {
      std::string why = rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc);
      throw UsageError("MASTER_ADDR=" + host + " does not resolve: " + why,
                       "set MASTER_ADDR to the hostname or IP address of rank 0 (or of the host "
                       "running `gpudiag launch`) as this host can resolve it");
    }
    if (rc == EAI_AGAIN) last_error = std::string("name lookup failed: ") + gai_strerror(rc);
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
    bool all_refused = res != nullptr;
    for (auto* ai = res; ai; ai = ai->ai_next) {
      // Cap one attempt so a black-holed address does not eat the whole deadline.
      auto attempt = deadline.min(Deadline::after(std::chrono::seconds(3)));
      bool refused = false;
      Fd s = try_connect(ai, attempt, last_error, refused);
      all_refused = all_refused && refused;
      if (s) {
        set_stream_options(s.get());
        return s;
      }
      resolved = sockaddr_text(ai->ai_addr, ai->ai_addrlen);
      route = route_hint(ai->ai_addr, ai->ai_addrlen);
    }
    if (deadline.expired() || (all_refused && refused_by && refused_by->expired())) break;
    sleep_for(backoff, refused_by && all_refused ? deadline.min(*refused_by) : deadline);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
  std::string what = "cannot reach the store at " + where;
  if (!resolved.empty() && resolved != where) what += " (" + resolved + ")";
  if (!route.empty()) what += " " + route;
  what += " after " + human_seconds(seconds_since(start)) + ": " + last_error;
  throw TimeoutError(what,
                     "check MASTER_ADDR/MASTER_PORT, that rank 0 (or `gpudiag launch`) is running "
                     "and listening there, and that no firewall blocks the port");
}

Io send_all(int fd, const void* data, std::size_t n, Deadline deadline) {
  auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Io::closed;
    if (deadline.expired()) return Io::timeout;
    pollfd pfd{fd, POLLOUT, 0};
    ::poll(&pfd, 1, deadline.poll_ms());
  }
  return Io::ok;
}

Io recv_some(int fd, std::string& buf, Deadline deadline) {
  char chunk[65536];
  while (true) {
    ssize_t r = ::recv(fd, chunk, sizeof chunk, 0);
    if (r > 0) {
      buf.append(chunk, static_cast<std::size_t>(r));
      return Io::ok;
    }
    if (r == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Io::closed;
    if (deadline.expired()) return Io::timeout;
    pollfd pfd{fd, POLLIN, 0};
    ::poll(&pfd, 1, deadline.poll_ms());
  }
}

Io recv_exact(int fd, void* out, std::size_t n, Deadline deadline) {
  auto* p = static_cast<char*>(out);
  while (n > 0) {
    ssize_t r = ::recv(fd, p, n, 0);
    if (r > 0) {
      p += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    if (r == 0) return Io::closed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Io::closed;
    if (deadline.expired()) return Io::timeout;
    pollfd pfd{fd, POLLIN, 0};
    ::poll(&pfd, 1, deadline.poll_ms());
  }
  return Io::ok;
}

Fd listen_on(const std::string& host, int port) {
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
    Fd s(::socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
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
      auto where = sockaddr_text(ai->ai_addr, ai->ai_addrlen);
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

std::string local_ip_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return {};
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  Fd udp(::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!udp || ::connect(udp.get(), res->ai_addr, res->ai_addrlen) != 0) return {};
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (getsockname(udp.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) return {};
  return numeric_host(reinterpret_cast<sockaddr*>(&local), len);
}

}  // namespace gpudiag::net
