// TcpStoreServer and TcpStoreClient over real sockets on 127.0.0.1: the
// operations, parked waits, deadlines, hundreds of concurrent clients, and the
// errors a user meets (wrong token, lost server, port in use, bad host,
// nothing listening).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <future>
#include <thread>

#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TcpStoreServerOptions local(std::string token = "job-1") {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.token = std::move(token);
  return o;
}

Deadline in_s(double s) { return Deadline::after_seconds(s); }

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// A port nothing listens on (bound once by the kernel's choice, then released).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(TcpStore, Operations) {
  TcpStoreServer server(local());
  ASSERT_GT(server.port(), 0);
  TcpStoreClient c("127.0.0.1", server.port(), "job-1", in_s(5));
  EXPECT_EQ(c.address(), "127.0.0.1:" + std::to_string(server.port()));
  c.set("a", std::string("x\0y", 3), in_s(5));
  EXPECT_EQ(c.get("a", in_s(5)), std::string("x\0y", 3));
  c.set("a", "second", in_s(5));
  EXPECT_EQ(c.try_get("a", in_s(5)), "second");
  EXPECT_EQ(c.try_get("missing", in_s(5)), std::nullopt);
  EXPECT_EQ(c.add("n", 3, in_s(5)), 3);
  EXPECT_EQ(c.add("n", -5, in_s(5)), -2);
  EXPECT_EQ(c.get("n", in_s(5)), "-2");
  EXPECT_TRUE(c.wait({"a", "n"}, in_s(5)));
  EXPECT_TRUE(c.wait({}, in_s(5)));
  auto v = c.multi_get({"a", "missing", "n"}, in_s(5));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], "second");
  EXPECT_EQ(v[1], std::nullopt);
  EXPECT_EQ(v[2], "-2");
  EXPECT_THROW(c.add("a", 1, in_s(5)), Error);  // "second" is not an integer
  EXPECT_EQ(c.add("n", 1, in_s(5)), -1);        // and the connection is still fine
}

TEST(TcpStore, GetBlocksUntilAnotherClientSets) {
  TcpStoreServer server(local());
  // One client per waiting thread: a client serialises its calls.
  TcpStoreClient waiter("127.0.0.1", server.port(), "job-1", in_s(5));
  TcpStoreClient waiter2("127.0.0.1", server.port(), "job-1", in_s(5));
  TcpStoreClient setter("127.0.0.1", server.port(), "job-1", in_s(5));
  auto got = std::async(std::launch::async, [&] { return waiter.get("ready", in_s(20)); });
  auto all = std::async(std::launch::async, [&] {
    return waiter2.wait({"ready", "later"}, in_s(20));
  });
  EXPECT_EQ(got.wait_for(300ms), std::future_status::timeout);
  auto t0 = Clock::now();
  setter.set("ready", "yes", in_s(5));
  EXPECT_EQ(got.get(), "yes");
  EXPECT_LT(since(t0), 5.0);
  EXPECT_EQ(all.wait_for(200ms), std::future_status::timeout);  // "later" is still missing
  setter.add("later", 1, in_s(5));
  EXPECT_TRUE(all.get());
}

TEST(TcpStore, DeadlinesAreHonouredAndTheClientStaysUsable) {
  TcpStoreServer server(local());
  TcpStoreClient c("127.0.0.1", server.port(), "job-1", in_s(5));
  TcpStoreClient other("127.0.0.1", server.port(), "job-1", in_s(5));
  auto t0 = Clock::now();
  EXPECT_FALSE(c.wait({"never", "late"}, in_s(0.5)));
  EXPECT_GE(since(t0), 0.45);
  EXPECT_LT(since(t0), 3.0);
  t0 = Clock::now();
  try {
    c.get("late", in_s(0.5));
    ADD_FAILURE() << "get of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'late'"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ExitCode::timeout);
  }
  EXPECT_LT(since(t0), 3.0);
  // The abandoned requests must not answer later calls.
  other.set("late", "L", in_s(5));
  other.set("k", "K", in_s(5));
  EXPECT_EQ(c.get("k", in_s(5)), "K");
  EXPECT_EQ(c.add("cnt", 2, in_s(5)), 2);
  EXPECT_EQ(c.get("late", in_s(5)), "L");
}

TEST(TcpStore, ManyConcurrentClientsMeetAtABarrier) {
  constexpr int kClients = 256;
  TcpStoreServer server(local());
  std::atomic<int> passed{0};
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      try {
        TcpStoreClient c("127.0.0.1", server.port(), "job-1", in_s(60));
        c.set("rank/" + std::to_string(i), std::to_string(i), in_s(60));
        if (c.add("arrived", 1, in_s(60)) == kClients) c.set("go", "1", in_s(60));
        if (c.wait({"go"}, in_s(60)) && c.get("rank/0", in_s(60)) == "0") ++passed;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) EXPECT_EQ(errors[i], "") << "client " << i;
  EXPECT_EQ(passed, kClients);
  EXPECT_LT(since(t0), 60.0);
  EXPECT_EQ(server.stats().dropped, 0u);
}

TEST(TcpStore, ClientWaitsForAServerThatStartsLater) {
  int port = free_port();
  auto client = std::async(std::launch::async, [&] {
    TcpStoreClient c("127.0.0.1", port, "job-1", in_s(20));
    return c.get("hello", in_s(20));
  });
  std::this_thread::sleep_for(500ms);
  auto o = local();
  o.port = port;
  TcpStoreServer server(o);
  TcpStoreClient setter("127.0.0.1", port, "job-1", in_s(5));
  setter.set("hello", "world", in_s(5));
  EXPECT_EQ(client.get(), "world");
}

TEST(TcpStore, WrongTokenIsRejectedAtOnce) {
  TcpStoreServer server(local("job-1"));
  auto t0 = Clock::now();
  try {
    TcpStoreClient c("127.0.0.1", server.port(), "job-2", in_s(30));
    FAIL() << "a client with another job's token was let in";
  } catch (const UsageError& e) {
    EXPECT_NE(e.one_line().find("belongs to another job (token mismatch)"), std::string::npos)
        << e.one_line();
    EXPECT_NE(e.one_line().find("GPUDIAG_TOKEN"), std::string::npos);
    EXPECT_NE(e.one_line().find("MASTER_PORT is not shared"), std::string::npos);
  }
  EXPECT_LT(since(t0), 5.0);
}

TEST(TcpStore, ServerGoneWhileAClientWaitsIsReportedPromptly) {
  auto server = std::make_unique<TcpStoreServer>(local());
  int port = server->port();
  TcpStoreClient c("127.0.0.1", port, "job-1", in_s(5));
  auto waiting = std::async(std::launch::async, [&]() -> std::string {
    try {
      c.get("never", in_s(60));
      return "returned";
    } catch (const TimeoutError& e) {
      return std::string("timeout: ") + e.what();
    } catch (const Error& e) {
      return e.one_line();
    }
  });
  std::this_thread::sleep_for(300ms);
  auto t0 = Clock::now();
  server.reset();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  auto msg = waiting.get();
  EXPECT_LT(since(t0), 5.0);
  EXPECT_NE(msg.find("lost the store at 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("exited or hung"), std::string::npos) << msg;
}

TEST(TcpStore, PortInUseSaysWhatToDo) {
  TcpStoreServer first(local());
  auto o = local();
  o.port = first.port();
  try {
    TcpStoreServer second(o);
    FAIL() << "two servers bound one port";
  } catch (const UsageError& e) {
    auto line = e.one_line();
    EXPECT_NE(line.find("port " + std::to_string(o.port) + " is already in use"), std::string::npos)
        << line;
    EXPECT_NE(line.find("MASTER_PORT"), std::string::npos) << line;
  }
}

TEST(TcpStore, UnresolvableHostNamesMasterAddr) {
  try {
    TcpStoreClient c("no-such-host.invalid", 29500, "job-1", in_s(5));
    FAIL() << "connected to a host that does not exist";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_ADDR=no-such-host.invalid does not resolve"),
              std::string::npos)
        << e.what();
  }
}

TEST(TcpStore, NothingListeningFailsAfterTheDeadlineNamingHostPort) {
  int port = free_port();
  auto t0 = Clock::now();
  try {
    TcpStoreClient c("127.0.0.1", port, "job-1", in_s(1));
    FAIL() << "connected to a port nothing listens on";
  } catch (const TimeoutError& e) {
    auto line = e.one_line();
    EXPECT_NE(line.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << line;
    EXPECT_NE(line.find("refused"), std::string::npos) << line;
    EXPECT_NE(line.find("from 127.0.0.1"), std::string::npos) << line;  // the local route
    EXPECT_NE(line.find("MASTER_ADDR/MASTER_PORT"), std::string::npos) << line;
  }
  EXPECT_GE(since(t0), 0.9);
  EXPECT_LT(since(t0), 5.0);
}

TEST(TcpStore, ARefusalAtAnAddressItsServerPublishedIsFinalAtOnce) {
  // A tree judge's address is published once it listens: refused there means
  // gone, and its children go up a level instead of retrying to the deadline.
  int port = free_port();
  auto t0 = Clock::now();
  EXPECT_THROW(TcpStoreClient("127.0.0.1", port, "job-1", in_s(120), "", storewire::kNoRank,
                              in_s(0.2)),
               TimeoutError);
  EXPECT_LT(since(t0), 60.0);  // not the 120 s a server starting later is given
}

}  // namespace
}  // namespace gpudiag
