// The store's limits against a client that knows the protocol and abuses it
// (store_limits.h): a large frame before the handshake, a request for more
// keys than the job has, values and keys past their caps, a full store, too
// many parked requests, buffers past the server's total, connections past the
// cap; and the client against a server that lies (a reply count sized to make
// it allocate, an oversized frame). Each ends in a refusal or one error line
// while well-behaved clients keep working.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <thread>

#include "store/store_wire.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag {
namespace tcp_store_limits_test {  // named: the unity build puts this folder's tests in one unit

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace sw = storewire;

TcpStoreServerOptions local(int world = 4) {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.token = "job";
  o.world_size = world;
  return o;
}

Deadline in_s(double s) { return Deadline::after_seconds(s); }

TcpStoreClient client(int port, double s = 5) {
  return TcpStoreClient("127.0.0.1", port, "job", in_s(s));
}

/// A raw TCP connection to 127.0.0.1:port, to send what no client would.
class Raw {
 public:
  explicit Raw(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~Raw() { ::close(fd_); }
  void send(std::string_view b) { ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL); }
  void hello() {
    send(std::string(sw::kMagic) +
         sw::Writer(sw::Type::hello, 0).u16(sw::kVersion).str("job").finish());
  }
  /// The next frame from the server, or nullopt when it closed or `limit` passed.
  std::optional<std::pair<sw::Type, std::string>> frame(std::chrono::milliseconds limit = 3s) {
    auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      sw::Frame f{};
      if (sw::next_frame(in_, f)) {
        std::pair<sw::Type, std::string> out{f.type, std::string(f.payload)};
        in_.erase(0, f.total);
        return out;
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char buf[65536];
      auto r = ::recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) return std::nullopt;
      in_.append(buf, static_cast<std::size_t>(r));
    }
    return std::nullopt;
  }

 private:
  int fd_ = -1;
  std::string in_;
};

/// The ERROR code of a reply, or -1 when it is not an ERROR.
int error_code(const std::optional<std::pair<sw::Type, std::string>>& f) {
  if (!f || f->first != sw::Type::error) return -1;
  return sw::Reader(f->second).u8();
}

TEST(TcpStoreLimits, AFrameOverFourKiBBeforeTheHandshakeIsDropped) {
  TcpStoreServer server(local());
  Raw peer(server.port());
  peer.send(std::string(sw::kMagic) + std::string("\x00\x20\x00\x00", 4));  // 8 KiB
  EXPECT_FALSE(peer.frame(2s));  // closed without an answer
  EXPECT_EQ(server.stats().dropped, 1u);
  auto c = client(server.port());
  c.set("k", "v", in_s(5));
}

TEST(TcpStoreLimits, MoreKeysThanTheJobHasAreRefusedAndTheConnectionStays) {
  TcpStoreServer server(local(4));  // 2 x 4 + 64 = 72 keys a request
  auto c = client(server.port());
  std::vector<std::string> keys(73, "k");
  try {
    c.wait(keys, in_s(5));
    FAIL() << "a WAIT of 73 keys was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::broken);
    EXPECT_NE(std::string(e.what()).find("73 keys in one request"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c.multi_get(keys, in_s(5)), Error);
  c.set("a", "1", in_s(5));
  EXPECT_EQ(c.multi_get({"a", "b"}, in_s(5)).size(), 2u);
  // A raw 8.4 M-key WAIT is answered at once, not parsed.
  Raw peer(server.port());
  peer.hello();
  ASSERT_TRUE(peer.frame());
  const auto t0 = Clock::now();
  peer.send(sw::Writer(sw::Type::wait, 9).u32(8400000).finish());
  EXPECT_EQ(error_code(peer.frame()), int(sw::ErrorCode::over_limit));
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0);
}

TEST(TcpStoreLimits, KeysValuesAndTheStoreItselfHaveCaps) {
  auto o = local();
  o.max_stored_bytes = 64 * 1024;
  TcpStoreServer server(o);
  auto c = client(server.port());
  EXPECT_THROW(c.set(std::string(600, 'k'), "v", in_s(5)), Error);
  EXPECT_THROW(c.set("big", std::string((1u << 20) + 1, 'v'), in_s(5)), Error);  // caught locally
  c.set("a", std::string(40 * 1024, 'v'), in_s(5));
  try {
    c.set("b", std::string(40 * 1024, 'v'), in_s(5));
    FAIL() << "the store took more than its cap";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the store is full"), std::string::npos) << e.what();
  }
  c.set("a", "small now", in_s(5));  // overwriting frees room
  c.set("b", std::string(40 * 1024, 'v'), in_s(5));
}

TEST(TcpStoreLimits, AConnectionParksAFewRequestsAtMost) {
  TcpStoreServer server(local());
  Raw peer(server.port());
  peer.hello();
  ASSERT_TRUE(peer.frame());
  for (std::uint32_t id = 1; id <= storelimits::kMaxParkedPerConn + 1; ++id)
    peer.send(sw::Writer(sw::Type::get, id).str("never").finish());
  EXPECT_EQ(error_code(peer.frame()), int(sw::ErrorCode::over_limit));
  EXPECT_EQ(server.stats().refused, 1u);
}

TEST(TcpStoreLimits, BuffersPastTheServersTotalShedTheLargestHolder) {
  auto o = local();
  o.max_buffered_total = 4u << 20;
  TcpStoreServer server(o);
  auto c = client(server.port());
  c.set("big", std::string(512 * 1024, 'b'), in_s(5));
  Raw hog(server.port());
  hog.hello();
  ASSERT_TRUE(hog.frame());
  std::string requests;
  for (std::uint32_t id = 1; id <= 200; ++id)  // 100 MiB of replies, never read
    requests += sw::Writer(sw::Type::try_get, id).str("big").finish();
  hog.send(requests);
  auto t0 = Clock::now();
  while (server.stats().dropped == 0 && Clock::now() - t0 < 10s) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server.stats().dropped, 1u);
  EXPECT_EQ(c.get("big", in_s(5)).size(), 512u * 1024);
}

TEST(TcpStoreLimits, AtTheConnectionCapSilentPeersMakeRoomAndJoinedOnesRefuse) {
  auto o = local();
  o.max_connections = 8;
  TcpStoreServer server(o);
  std::vector<std::unique_ptr<Raw>> silent;
  for (int i = 0; i < 8; ++i) silent.push_back(std::make_unique<Raw>(server.port()));
  auto c = client(server.port());  // the oldest silent one made room
  c.set("k", "v", in_s(5));
  silent.clear();
  std::vector<std::unique_ptr<Raw>> joined;
  for (int i = 0; i < 7; ++i) {
    joined.push_back(std::make_unique<Raw>(server.port()));
    joined.back()->hello();
    auto f = joined.back()->frame();
    ASSERT_TRUE(f && f->first == sw::Type::hello_ok);
  }
  try {
    client(server.port(), 1.0);
    FAIL() << "a ninth client joined a store capped at 8";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::broken);
    EXPECT_NE(std::string(e.what()).find("holds all the connections it may"), std::string::npos)
        << e.what();
  }
}

/// A server that answers the handshake, then sends `reply` to the first request.
int lying_server(std::string reply, std::future<void>& done) {
  int ls = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(ls, 1);
  socklen_t len = sizeof a;
  getsockname(ls, reinterpret_cast<sockaddr*>(&a), &len);
  done = std::async(std::launch::async, [ls, reply] {
    int fd = ::accept(ls, nullptr, nullptr);
    char buf[4096];
    ::recv(fd, buf, sizeof buf, 0);  // magic + HELLO
    auto ok = sw::Writer(sw::Type::hello_ok, 0).u16(sw::kVersion).finish();
    ::send(fd, ok.data(), ok.size(), MSG_NOSIGNAL);
    ::recv(fd, buf, sizeof buf, 0);  // the request
    ::send(fd, reply.data(), reply.size(), MSG_NOSIGNAL);
    ::recv(fd, buf, sizeof buf, 0);  // until the client hangs up
    ::close(fd);
    ::close(ls);
  });
  return ntohs(a.sin_port);
}

TEST(TcpStoreLimits, AServerThatLiesGetsOneErrorLineNotACrash) {
  const std::string lies[] = {
      sw::Writer(sw::Type::values, 1).u32(0xffffffffu).finish(),        // a count to allocate
      std::string("\x00\x00\x00\x10", 4) + std::string(64, 'x'),        // a 256 MiB frame
      sw::Writer(sw::Type::values, 1).u32(2).u8(1).u32(1000).finish(),  // a truncated value
      sw::Writer(sw::Type::integer, 1).finish(),                        // the wrong type
  };
  for (const auto& lie : lies) {
    std::future<void> done;
    int port = lying_server(lie, done);
    try {
      auto c = client(port);
      c.multi_get({"a", "b"}, in_s(3));
      ADD_FAILURE() << "a lie was believed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::broken) << e.what();
      EXPECT_NE(std::string(e.what()).find("malformed reply"), std::string::npos) << e.what();
    }
    done.wait();
  }
}

}  // namespace
}  // namespace gpudiag
