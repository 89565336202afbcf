#include "rendezvous/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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
Fd try_connect(const addrinfo* ai, Deadline deadline, std::string& error) {
  Fd s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
  if (!s) {
    error = std::strerror(errno);
    return {};
  }
  if (::connect(s.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
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
          "no answer to the connection attempt (packets dropped: a firewall, or a wrong address)";
      return {};
    }
  }
  int err = 0;
  socklen_t len = sizeof err;
  getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    error = std::strerror(err);
    return {};
  }
  return s;
}

}  // namespace

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

Fd connect_with_retry(const std::string& given_host, int port, Deadline deadline) {
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
    for (auto* ai = res; ai; ai = ai->ai_next) {
      // Cap one attempt so a black-holed address does not eat the whole deadline.
      auto attempt = deadline.min(Deadline::after(std::chrono::seconds(3)));
      Fd s = try_connect(ai, attempt, last_error);
      if (s) {
        set_stream_options(s.get());
        return s;
      }
      resolved = sockaddr_text(ai->ai_addr, ai->ai_addrlen);
      route = route_hint(ai->ai_addr, ai->ai_addrlen);
    }
    if (deadline.expired()) break;
    sleep_for(backoff, deadline);
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

}  // namespace gpudiag::net
