// The store's torch side (server_torch.cpp) against a raw client speaking
// torch 1.x's TCPStore wire (legacy dialect: SET=0 GET=2 ADD=3 WAIT=5, u64
// lengths), for what a local user could send that torch's client would not:
// ADD creating keys until the store is full (held to the store's total, each
// key charged for its map node), a key made of control characters and a fake
// rank line (logged escaped, on one line), and requests behind a parked WAIT
// (served at once, as torch's servers do, so a 1.x client whose wait timed
// out keeps a usable connection), and a WAIT woken by a COMPARE_SET from
// another connection that creates its key (one that does not, does not).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>
#include <thread>

#include "store/tcp_store_server.h"

namespace gpudiag {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string le64(std::uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}
std::string str(const std::string& s) { return le64(s.size()) + s; }

/// torch 1.x's wire over a raw socket.
class TorchWire {
 public:
  explicit TorchWire(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  }
  ~TorchWire() { ::close(fd_); }
  void send(const std::string& b) { ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL); }
  void set(const std::string& k, const std::string& v) { send('\0' + str(k) + str(v)); }
  void get(const std::string& k) { send('\2' + str(k)); }
  void add(const std::string& k, std::int64_t d) { send('\3' + str(k) + le64(d)); }
  void wait(const std::string& k) { send('\5' + le64(1) + str(k)); }
  void compare_set(const std::string& k, const std::string& expected, const std::string& desired) {
    send('\1' + str(k) + str(expected) + str(desired));
  }
  /// `n` bytes of reply, or nullopt when the server closed or 3 s passed.
  std::optional<std::string> read(std::size_t n) {
    std::string out;
    const auto end = Clock::now() + 3s;
    while (out.size() < n && Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      char b[4096];
      const auto r = ::recv(fd_, b, std::min(sizeof b, n - out.size()), 0);
      if (r <= 0) return std::nullopt;
      out.append(b, static_cast<std::size_t>(r));
    }
    return out.size() == n ? std::optional<std::string>(out) : std::nullopt;
  }

 private:
  int fd_ = -1;
};

TcpStoreServerOptions torch_server(std::size_t max_stored) {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.token = "job";
  o.world_size = 4;
  o.torch_clients = true;
  o.max_stored_bytes = max_stored;
  return o;
}

TEST(TorchSide, AddCreatingKeysIsHeldToTheStoresTotal) {
  TcpStoreServer server(torch_server(256 * 1024));
  TorchWire w(server.port());
  // Each new key costs its name, its digits and its node: ~2,000 fit in 256 KiB.
  int made = 0;
  for (; made < 100000; ++made) {
    w.add("k" + std::to_string(made), 1);
    if (!w.read(8)) break;  // dropped: the store is full
  }
  EXPECT_GT(made, 1000);
  EXPECT_LT(made, 3000);
  EXPECT_EQ(server.stats().dropped, 1u);
  TorchWire again(server.port());  // the store still serves what it holds
  again.get("k0");
  auto v = again.read(8 + 1);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->substr(8), "1");
}

TEST(TorchSide, WhatAClientSentIsLoggedEscapedOnOneLine) {
  std::ostringstream log;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(log);
  auto saved = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  {
    TcpStoreServer server(torch_server(1 << 20));
    TorchWire w(server.port());
    w.get("x\n[rank0]: [node-0] is OK\x1b[31m");
    EXPECT_FALSE(w.read(1));  // a missing key closes the connection, as torch's server does
  }
  spdlog::set_default_logger(saved);
  const std::string text = log.str();
  EXPECT_NE(text.find("GET of a key that does not exist"), std::string::npos) << text;
  EXPECT_EQ(text.find("\n[rank0]"), std::string::npos) << text;
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
}

TEST(TorchSide, RequestsBehindAParkedWaitAreServed) {
  TcpStoreServer server(torch_server(1 << 20));
  TorchWire w(server.port());
  w.wait("later");     // parked: the key does not exist
  w.set("now", "v1");  // a 1.x client whose wait timed out goes on with other calls
  w.get("now");
  auto got = w.read(8 + 2);
  ASSERT_TRUE(got) << "nothing was read behind the parked WAIT";
  EXPECT_EQ(got->substr(8), "v1");
  TorchWire other(server.port());
  other.set("later", "x");
  auto stop = w.read(1);  // the parked WAIT's STOP_WAITING, after the GET's reply
  ASSERT_TRUE(stop);
  EXPECT_EQ((*stop)[0], '\0');
}

// torch's clients build barriers and rendezvous on compare_set: a WAIT parked
// on one connection is answered when another connection's COMPARE_SET
// creates the key, and not by one that leaves the key missing.
TEST(TorchSide, CompareSetWakesAWaitParkedOnAnotherConnection) {
  TcpStoreServer server(torch_server(1 << 20));
  TorchWire waiter(server.port()), setter(server.port());
  waiter.wait("ready");
  setter.compare_set("ready", "old", "v");  // expects a value the key does not have: no key
  auto answer = setter.read(8 + 3);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->substr(8), "old");
  waiter.set("now", "1");
  waiter.get("now");  // its reply comes first: the WAIT is still parked
  auto got = waiter.read(8 + 1);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, le64(1) + "1") << "the WAIT was answered by a COMPARE_SET that set nothing";
  setter.compare_set("ready", "", "v");  // creates the key
  answer = setter.read(8 + 1);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->substr(8), "v");
  auto stop = waiter.read(1);
  ASSERT_TRUE(stop) << "the WAIT parked on the key was not answered";
  EXPECT_EQ((*stop)[0], '\0');
}

}  // namespace
}  // namespace gpudiag
