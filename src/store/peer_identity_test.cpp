// peer_identity.h on real sockets: a loopback connection's peer socket is
// found in /proc/net/tcp (IPv4 and IPv6), and it is the job's only when a
// descendant of this process holds it (a forked child here), not when this
// process itself or an unrelated one does.
#include "store/peer_identity.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

namespace gpudiag::net {
namespace {

struct Listener {
  int fd = -1, port = 0;
  explicit Listener(bool v6) {
    fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    sockaddr_storage ss{};
    socklen_t len = 0;
    if (v6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      a->sin6_family = AF_INET6;
      a->sin6_addr = in6addr_loopback;
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      len = sizeof *a;
    }
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&ss), len), 0);
    EXPECT_EQ(::listen(fd, 4), 0);
    socklen_t l = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &l);
    port = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                    : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  }
  ~Listener() { ::close(fd); }
  int connect_to(bool v6) const {
    int c = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    if (v6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_loopback;
      a.sin6_port = htons(static_cast<std::uint16_t>(port));
      ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<std::uint16_t>(port));
      ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    return c;
  }
};

TEST(PeerIdentity, OwnSocketIsFoundButIsNotADescendants) {
  for (bool v6 : {false, true}) {
    Listener l(v6);
    const int c = l.connect_to(v6);
    const int s = ::accept(l.fd, nullptr, nullptr);
    bool loop = false;
    EXPECT_NE(peer_address(s, loop), "?");
    EXPECT_TRUE(loop);
    auto sock = local_peer_socket(s);
    ASSERT_TRUE(sock) << (v6 ? "IPv6" : "IPv4");
    EXPECT_EQ(sock->uid, ::getuid());
    // The kernel's exact lookup and a read of /proc/net agree.
    auto read = local_peer_socket(s, "/proc/.");
    ASSERT_TRUE(read);
    EXPECT_EQ(read->inode, sock->inode);
    EXPECT_EQ(read->uid, sock->uid);
    EXPECT_FALSE(held_by_descendant(::getpid(), sock->inode));  // this process holds it
    ::close(s), ::close(c);
  }
}

// The store listens dual-stack: an IPv4 client shows as ::ffff:127.0.0.1, and
// its own socket is in /proc/net/tcp, not tcp6.
TEST(PeerIdentity, AnIpv4ClientOfADualStackListenerIsFound) {
  const int l = ::socket(AF_INET6, SOCK_STREAM, 0);
  int off = 0;
  ::setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(l, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len);
  const int c = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in b{};
  b.sin_family = AF_INET;
  b.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  b.sin_port = a.sin6_port;
  ASSERT_EQ(::connect(c, reinterpret_cast<sockaddr*>(&b), sizeof b), 0);
  const int s = ::accept(l, nullptr, nullptr);
  bool loop = false;
  EXPECT_EQ(peer_address(s, loop), "::ffff:127.0.0.1");
  EXPECT_TRUE(loop);
  auto sock = local_peer_socket(s);
  ASSERT_TRUE(sock);
  EXPECT_TRUE(held_by_process(::getpid(), sock->inode));
  auto read = local_peer_socket(s, "/proc/.");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->inode, sock->inode);
  ::close(s), ::close(c), ::close(l);
}

// A peer that has closed its end is nobody's: its socket is orphaned.
TEST(PeerIdentity, APeerThatClosedIsNotFound) {
  Listener l(false);
  const int c = l.connect_to(false);
  const int s = ::accept(l.fd, nullptr, nullptr);
  ::close(c);
  EXPECT_FALSE(local_peer_socket(s).has_value());  // orphaned: no inode, nobody's
  ::close(s);
}

TEST(PeerIdentity, AChildsSocketIsTheJobs) {
  Listener l(false);
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  if (child == 0) {  // a rank: connects, says so, waits to be told to go
    const int c = l.connect_to(false);
    char b = 'x';
    (void)!::write(ready[1], &b, 1);
    (void)!::read(done[0], &b, 1);
    ::close(c);
    ::_exit(0);
  }
  char b = 0;
  ASSERT_EQ(::read(ready[0], &b, 1), 1);
  const int s = ::accept(l.fd, nullptr, nullptr);
  auto sock = local_peer_socket(s);
  ASSERT_TRUE(sock);
  EXPECT_TRUE(held_by_descendant(::getpid(), sock->inode));
  EXPECT_FALSE(held_by_descendant(child, sock->inode));  // the child has no children
  EXPECT_EQ(descendant_uids(::getpid()), std::vector<std::uint32_t>{::geteuid()});
  EXPECT_TRUE(descendant_uids(child).empty());
  (void)!::write(done[1], &b, 1);
  ::waitpid(child, nullptr, 0);
  ::close(s);
}

// The process that holds a socket is found, and whether it runs: a child
// that holds the server's end of a connection, running, then stopped.
TEST(PeerIdentity, TheHolderOfASocketAndItsState) {
  Listener l(false);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {  // a store's process: accepts, says so, waits
    const int s = ::accept(l.fd, nullptr, nullptr);
    char b = s >= 0 ? 'x' : 'n';
    (void)!::write(ready[1], &b, 1);
    ::pause();
    ::_exit(0);
  }
  const int c = l.connect_to(false);
  char b = 0;
  ASSERT_EQ(::read(ready[0], &b, 1), 1);
  ASSERT_EQ(b, 'x');
  auto sock = local_peer_socket(c);  // the child's accepted end
  ASSERT_TRUE(sock);
  EXPECT_EQ(holder_of(sock->inode), std::optional<pid_t>(child));
  const char running = process_state(child);
  EXPECT_TRUE(running == 'S' || running == 'R') << running;
  ::kill(child, SIGSTOP);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, WUNTRACED), child);  // the stop has happened
  EXPECT_EQ(process_state(child), 'T');
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(process_state(child), 0);  // gone
  ::close(c);
}

}  // namespace
}  // namespace gpudiag::net
