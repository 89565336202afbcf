// TCP plumbing shared by the store clients and the store server: an owning
// file descriptor, socket options, name resolution, connecting with retries
// until a deadline, and poll(2)-based send/receive that never block past a
// Deadline.
//
// Errors a user meets here name what to fix: an unresolvable host names
// MASTER_ADDR; a refused or unreachable address names host:port, the local
// address and interface the kernel routes through towards it, and what to
// check. Everything here is POSIX sockets; no other library does this small job.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "util/deadline.h"

namespace gpudiag::net {

/// An owned file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }
  /// Closes the current descriptor (if any) and owns `fd` instead.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// "host:port", with brackets around IPv6 literals.
std::string host_port(std::string_view host, int port);
/// Numeric "ip:port" of a socket address.
std::string sockaddr_text(const sockaddr* addr, socklen_t len);
/// The peer's "ip:port" of a connected socket, or "?" when unknown.
std::string peer_text(int fd);

void set_nonblocking(int fd);
/// TCP_NODELAY (small request/reply messages) and TCP keepalive, so a peer
/// whose host died is noticed within about two minutes even when idle.
void set_stream_options(int fd);

/// "from 10.0.0.5 (eth0)": the local address and interface the kernel would
/// use to reach `addr`, found with a connected UDP socket (no packet is sent).
/// Empty when it cannot be determined.
std::string route_hint(const sockaddr* addr, socklen_t len);

/// Connects to host:port, retrying refused/unreachable attempts with backoff
/// until `deadline` (the server may start after the client), refused ones
/// only until `refused_by` when given (an address its server published once
/// it listened: a refusal there means the server is gone). Returns a
/// non-blocking socket with set_stream_options applied.
/// Throws UsageError when the host does not resolve, TimeoutError naming
/// host:port, the route used, the last error and what to check when the
/// deadline passes.
Fd connect_with_retry(const std::string& host, int port, Deadline deadline,
                      std::optional<Deadline> refused_by = std::nullopt);

enum class Io { ok, timeout, closed };

/// Sends all `n` bytes before `deadline`. `closed` when the peer is gone.
Io send_all(int fd, const void* data, std::size_t n, Deadline deadline);
/// Appends whatever is readable (at least one byte) to `buf`, waiting until
/// `deadline` for the first byte. `closed` on EOF or a reset connection.
Io recv_some(int fd, std::string& buf, Deadline deadline);
/// Reads exactly `n` bytes into `out`, waiting until `deadline`.
Io recv_exact(int fd, void* out, std::size_t n, Deadline deadline);

/// Binds and listens on host:port (empty host: every interface, dual-stack),
/// non-blocking. Throws UsageError naming the port when it is in use.
Fd listen_on(const std::string& host, int port);
/// The port a bound socket got (for port 0).
int bound_port(int fd);
/// The descriptor limit of this process (RLIMIT_NOFILE) after raising the
/// soft limit to the hard one, and how many descriptors are open now.
struct FdLimit {
  long long soft = 0;
  long long hard = 0;
  long long open = 0;
};
FdLimit raise_fd_limit();

/// The numeric address of this host that the kernel would use to reach
/// host:port (no packet is sent); empty when it cannot tell.
std::string local_ip_towards(const std::string& host, int port);

}  // namespace gpudiag::net
