// Misbehaving peers on a TcpStoreServer's port: each is dropped (and counted)
// while well-behaved clients, working at the same time, still complete.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "store/store_wire.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace gpudiag {
namespace tcp_store_robustness_test {  // named: the unity build puts this folder's tests in one unit

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace sw = storewire;

/// A hand-driven TCP connection to 127.0.0.1:port, to send what no client would.
class RawPeer {
 public:
  explicit RawPeer(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~RawPeer() { ::close(fd_); }

  void send(std::string_view bytes) {
    EXPECT_EQ(::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  /// Magic + HELLO, and the server's answer read back.
  void handshake(const std::string& token) {
    send(std::string(sw::kMagic) +
         sw::Writer(sw::Type::hello, 0).u16(sw::kVersion).str(token).finish());
    char reply[64];
    EXPECT_GT(::recv(fd_, reply, sizeof reply, 0), 0);
  }
  /// Reads until `n` bytes came, the server closed, or `limit` passed; how many came.
  std::size_t read_bytes(std::size_t n, std::chrono::milliseconds limit) {
    auto end = Clock::now() + limit;
    std::vector<char> buf(1 << 16);
    std::size_t got = 0;
    while (got < n && Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      auto r = ::recv(fd_, buf.data(), buf.size(), 0);
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
    }
    return got;
  }
  /// True when the server closes the connection within `limit` (data is discarded).
  bool closed_within(std::chrono::milliseconds limit) {
    auto end = Clock::now() + limit;
    char buf[65536];
    while (Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      auto r = ::recv(fd_, buf, sizeof buf, 0);
      if (r <= 0) return true;
    }
    return false;
  }

 private:
  int fd_ = -1;
};

TcpStoreServerOptions local() {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.token = "job-1";
  return o;
}

/// Eight clients meet at a barrier and read each other's keys; how many made it.
std::future<int> others_work(int port, const std::string& barrier) {
  return std::async(std::launch::async, [port, barrier] {
    std::atomic<int> ok{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 8; ++i)
      ts.emplace_back([&, i] {
        try {
          auto d = Deadline::after(10s);
          TcpStoreClient c("127.0.0.1", port, "job-1", d);
          c.set(barrier + "/" + std::to_string(i), "v", d);
          if (c.add(barrier, 1, d) == 8) c.set(barrier + "/go", "1", d);
          if (c.wait({barrier + "/go"}, d) && c.get(barrier + "/7", d) == "v") ++ok;
        } catch (const std::exception& e) {
          ADD_FAILURE() << "a well-behaved client failed: " << e.what();
        }
      });
    for (auto& t : ts) t.join();
    return ok.load();
  });
}

TEST(TcpStoreRobustness, GarbageBytesAreDropped) {
  TcpStoreServer server(local());
  RawPeer http(server.port());
  http.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  auto others = others_work(server.port(), "g");
  EXPECT_TRUE(http.closed_within(2s));
  EXPECT_EQ(others.get(), 8);
  EXPECT_GE(server.stats().dropped, 1u);
}

TEST(TcpStoreRobustness, OversizedLengthsAreDroppedWithoutWaitingForTheBytes) {
  TcpStoreServer server(local());
  RawPeer before_hello(server.port());
  before_hello.send(std::string(sw::kMagic) + std::string("\x00\x00\x00\x40", 4));  // 1 GiB
  RawPeer after_hello(server.port());
  after_hello.handshake("job-1");
  after_hello.send(std::string("\xff\xff\xff\xff", 4));
  auto others = others_work(server.port(), "o");
  EXPECT_TRUE(before_hello.closed_within(2s));
  EXPECT_TRUE(after_hello.closed_within(2s));
  EXPECT_EQ(others.get(), 8);
  EXPECT_EQ(server.stats().dropped, 2u);
}

TEST(TcpStoreRobustness, MalformedRequestAfterHandshakeIsDropped) {
  TcpStoreServer server(local());
  RawPeer peer(server.port());
  peer.handshake("job-1");
  peer.send(sw::Writer(static_cast<sw::Type>(0x42), 1).str("x").finish());  // unknown type
  EXPECT_TRUE(peer.closed_within(2s));
  RawPeer lying(server.port());
  lying.handshake("job-1");
  lying.send(sw::Writer(sw::Type::wait, 1).u32(50).finish());  // 50 keys, no bytes for them
  EXPECT_TRUE(lying.closed_within(2s));
  EXPECT_EQ(others_work(server.port(), "m").get(), 8);
}

TEST(TcpStoreRobustness, HalfOpenConnectionsAreDroppedAfterTheHandshakeDeadline) {
  auto o = local();
  o.handshake_timeout = 300ms;
  TcpStoreServer server(o);
  RawPeer silent(server.port());
  RawPeer partial(server.port());
  partial.send("GPD");  // the start of the magic, then nothing
  auto t0 = Clock::now();
  auto others = others_work(server.port(), "h");
  EXPECT_EQ(others.get(), 8);  // served while the half-open ones sit there
  EXPECT_TRUE(silent.closed_within(3s));
  EXPECT_TRUE(partial.closed_within(3s));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - t0).count(), 0.25);
  EXPECT_EQ(server.stats().dropped, 2u);
}

TEST(TcpStoreRobustness, ClientThatDoesNotReadWaitsWithoutStallingOthersAndGetsEverything) {
  TcpStoreServer server(local());
  TcpStoreClient writer("127.0.0.1", server.port(), "job-1", Deadline::after(5s));
  const std::string big(256 * 1024, 'b');
  writer.set("big", big, Deadline::after(5s));
  RawPeer slow(server.port(), /*rcvbuf=*/4096);
  slow.handshake("job-1");
  std::string requests;
  std::size_t replies = 0;
  for (std::uint32_t id = 1; id <= 400; ++id) {  // 100 MiB of replies, not read for now
    requests += sw::Writer(sw::Type::get, id).str("big").finish();
    replies += sw::Writer(sw::Type::value, id).str(big).finish().size();
  }
  slow.send(requests);
  auto t0 = Clock::now();
  while (server.stats().paused == 0 && Clock::now() - t0 < 20s)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server.stats().paused, 1u);  // its requests wait; the server holds ~4 MiB for it
  EXPECT_EQ(others_work(server.port(), "s").get(), 8);
  EXPECT_EQ(writer.get("big", Deadline::after(5s)).size(), big.size());
  // Once it reads, every reply comes, in full: it was slowed, not dropped.
  EXPECT_EQ(slow.read_bytes(replies, 60s), replies);
  EXPECT_EQ(server.stats().dropped, 0u);
}

TEST(TcpStoreRobustness, ClientWhoseWokenRepliesPassTheCapIsDropped) {
  auto o = local();
  o.max_pending_output = 1u << 20;
  TcpStoreServer server(o);
  RawPeer slow(server.port(), /*rcvbuf=*/4096);
  slow.handshake("job-1");
  std::string requests;
  for (std::uint32_t id = 1; id <= 16; ++id)  // parked (the most a connection may): the key does not exist yet
    requests += sw::Writer(sw::Type::get, id).str("late").finish();
  slow.send(requests);
  auto t0 = Clock::now();
  while (server.stats().requests < 16 && Clock::now() - t0 < 20s)
    std::this_thread::sleep_for(20ms);
  ASSERT_EQ(server.stats().requests, 16u);  // all parked before the key is set
  TcpStoreClient writer("127.0.0.1", server.port(), "job-1", Deadline::after(5s));
  const std::string late(1000 * 1000, 'l');
  writer.set("late", late, Deadline::after(5s));  // 16 MB of replies at once, cap 1 MiB
  // Not read before the verdict: a reader draining as they come would keep
  // them under the cap.
  t0 = Clock::now();
  while (server.stats().dropped == 0 && Clock::now() - t0 < 20s)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(server.stats().dropped, 1u);
  EXPECT_TRUE(slow.closed_within(20s));
  EXPECT_EQ(writer.get("late", Deadline::after(5s)).size(), late.size());
}

TEST(TcpStoreRobustness, ClientLeavingWhileParkedIsForgotten) {
  TcpStoreServer server(local());
  {
    RawPeer leaver(server.port());
    leaver.handshake("job-1");
    leaver.send(sw::Writer(sw::Type::wait, 1).strs({"k", "j"}).finish());
    leaver.send(sw::Writer(sw::Type::get, 2).str("k").finish());
    std::this_thread::sleep_for(100ms);
  }  // closed while both requests are parked
  std::this_thread::sleep_for(100ms);
  TcpStoreClient c("127.0.0.1", server.port(), "job-1", Deadline::after(5s));
  c.set("k", "v", Deadline::after(5s));
  c.set("j", "w", Deadline::after(5s));
  EXPECT_EQ(c.get("k", Deadline::after(5s)), "v");
  EXPECT_EQ(server.stats().connections, 1u);
  EXPECT_EQ(server.stats().dropped, 0u);  // leaving is not misbehaving
}

}  // namespace
}  // namespace gpudiag
