// The client against a socket that answers as RAS does (client_support.cc rasClientEventLoop),
// and against ones that do not: refused, silent, garbage, too much, too slow. The model of
// RAS in tests/ras_model runs against the real binary in tests/integration/test_ras.py;
// this stand-in is the unit seam.
#include "nccl_ras/client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

namespace gpudiag::ras {
namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(GPUDIAG_RAS_FIXTURES) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A listening socket on 127.0.0.1 whose connections each run `handler` on a thread.
class FakeRas {
 public:
  using Handler = std::function<void(FakeRas&, int fd, int connection)>;
  explicit FakeRas(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] {
      for (int n = 0;; ++n) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        workers_.emplace_back([this, c, n] {
          handler_(*this, c, n);
          ::close(c);
        });
      }
    });
  }
  ~FakeRas() {
    stop = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    for (auto& w : workers_) w.join();
  }
  Endpoint endpoint() const { return {"127.0.0.1", port_}; }

  /// One line from the client ("" at EOF or after 5 s), remembered.
  std::string line(int fd) {
    std::string s;
    char c;
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, 5000) == 1 && ::read(fd, &c, 1) == 1) {
      if (c == '\n') break;
      s += c;
    }
    std::lock_guard lock(mu_);
    lines.push_back(s);
    return s;
  }
  static void send(int fd, const std::string& s) {
    for (std::size_t at = 0; at < s.size();) {
      auto n = ::send(fd, s.data() + at, s.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return;
      at += static_cast<std::size_t>(n);
    }
  }
  /// Waits (at most 10 s) until the client closes or the test ends.
  void hold(int fd) {
    pollfd p{fd, POLLIN, 0};
    char c;
    for (int i = 0; i < 100 && !stop; ++i)
      if (::poll(&p, 1, 100) == 1 && ::read(fd, &c, 1) <= 0) return;
  }

  std::vector<std::string> lines;
  std::atomic<bool> stop{false};

 private:
  Handler handler_;
  int fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
};

/// RAS as client_support.cc answers, `json` telling 2.28.7+ from older, `reply` for STATUS.
FakeRas::Handler nccl(bool json, std::string reply) {
  return [json, reply](FakeRas& ras, int fd, int) {
    while (true) {
      auto l = ras.line(fd);
      if (l.empty()) return;
      if (l.starts_with("CLIENT PROTOCOL "))
        FakeRas::send(fd, "SERVER PROTOCOL 2\n");
      else if (l.starts_with("TIMEOUT "))
        FakeRas::send(fd, "OK\n");
      else if (l == "SET FORMAT json" && json)
        FakeRas::send(fd, "OK\n");
      else if (l == "VERBOSE STATUS" || l == "STATUS")
        return FakeRas::send(fd, reply);
      else
        FakeRas::send(fd, "ERROR: Unknown command " + l + "\n");
    }
  };
}

QueryOptions quick() {
  QueryOptions o;
  o.deadline_s = 3;
  o.greeting_s = 0.3;
  return o;
}

TEST(RasClient, AsksForJsonWhereRasHasIt) {
  FakeRas ras(nccl(true, fixture("behind-2.30.7.json")));
  auto out = query(ras.endpoint(), quick());
  ASSERT_TRUE(out.answered) << out.error;
  EXPECT_EQ(out.format, "json");
  EXPECT_EQ(out.protocol, 2);
  EXPECT_EQ(out.connections, 1);
  EXPECT_EQ(ras.lines, (std::vector<std::string>{"CLIENT PROTOCOL 2", "TIMEOUT 5",
                                                 "SET FORMAT json", "VERBOSE STATUS"}));
  EXPECT_EQ(out.report.mismatches.size(), 1u);
}

TEST(RasClient, ReadsTextFromNcclBefore2287) {
  FakeRas ras(nccl(false, fixture("behind-2.26.6.txt")));
  auto out = query(ras.endpoint(), quick());
  ASSERT_TRUE(out.answered) << out.error;
  EXPECT_EQ(out.format, "text");
  EXPECT_NE(out.format_note.find("2.28.7"), std::string::npos);
  EXPECT_EQ(out.report.nccl_version, "2.26.6");
  auto o = quick();
  o.format = Format::json;
  auto forced = query(ras.endpoint(), o);
  EXPECT_FALSE(forced.answered);
  EXPECT_NE(forced.error.find("before 2.28.7"), std::string::npos) << forced.error;
}

TEST(RasClient, RefusedIsOneLineWithARemedy) {
  int port;
  {
    FakeRas gone([](FakeRas&, int, int) {});
    port = gone.endpoint().port;
  }
  auto out = query({"127.0.0.1", port}, quick());
  EXPECT_FALSE(out.answered);
  EXPECT_NE(out.error.find("nothing answered at 127.0.0.1:"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("refused"), std::string::npos) << out.error;
  EXPECT_NE(out.error.find("; try: "), std::string::npos);
  EXPECT_EQ(out.error.find('\n'), std::string::npos);
}

TEST(RasClient, ASilentProcessOnThePortIsPassedOver) {
  // The kernel hands each connection to one of the processes on the port (SO_REUSEPORT):
  // a stopped one takes the first, a live one the next.
  FakeRas ras([](FakeRas& r, int fd, int n) {
    if (n == 0) return r.hold(fd);
    nccl(true, fixture("healthy-2.30.7.json"))(r, fd, n);
  });
  auto out = query(ras.endpoint(), quick());
  ASSERT_TRUE(out.answered) << out.error;
  EXPECT_EQ(out.connections, 2);
}

TEST(RasClient, OnlySilentProcessesEndAtTheDeadline) {
  FakeRas ras([](FakeRas& r, int fd, int) { r.hold(fd); });
  auto o = quick();
  o.deadline_s = 1.2;
  const auto t0 = std::chrono::steady_clock::now();
  auto out = query(ras.endpoint(), o);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(out.answered);
  EXPECT_NE(out.error.find("never answered"), std::string::npos) << out.error;
  EXPECT_GE(out.connections, 2);
  EXPECT_LT(took, 2.5);
  ras.stop = true;
}

TEST(RasClient, SetFormatIsWaitedForAsNcclrasWaits) {
  // ncclras reads the answer to SET FORMAT after raising SO_RCVTIMEO to 1 + TIMEOUT + 5 s
  // (client.cc connectToNCCL, setOutputFormat): a RAS busy for longer than the handshake's
  // 1 s is still answered.
  FakeRas ras([](FakeRas& r, int fd, int n) {
    auto slow = [&](FakeRas& rr, int f, int) {
      while (true) {
        auto l = rr.line(f);
        if (l.empty()) return;
        if (l.starts_with("CLIENT PROTOCOL ")) FakeRas::send(f, "SERVER PROTOCOL 2\n");
        if (l.starts_with("TIMEOUT ")) FakeRas::send(f, "OK\n");
        if (l == "SET FORMAT json") {
          std::this_thread::sleep_for(std::chrono::milliseconds(1500));
          FakeRas::send(f, "OK\n");
        }
        if (l == "VERBOSE STATUS") return FakeRas::send(f, fixture("healthy-2.30.7.json"));
      }
    };
    slow(r, fd, n);
  });
  QueryOptions o;
  o.collect_timeout_s = 1;
  auto out = query(ras.endpoint(), o);
  ASSERT_TRUE(out.answered) << out.error;
  EXPECT_EQ(out.format, "json");
  EXPECT_EQ(out.connections, 1);
}

TEST(RasClient, GarbageIsNotRas) {
  FakeRas ras([](FakeRas& r, int fd, int) {
    r.line(fd);
    FakeRas::send(fd, std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x1b[2J\n", 13));
  });
  auto out = query(ras.endpoint(), quick());
  EXPECT_FALSE(out.answered);
  EXPECT_NE(out.error.find("not NCCL RAS at 127.0.0.1:"), std::string::npos) << out.error;
  EXPECT_EQ(out.error.find('\x1b'), std::string::npos);
}

TEST(RasClient, AReplyThatIsNotAReport) {
  FakeRas ras(nccl(false, "HTTP/1.1 400 Bad Request\r\n\r\n"));
  auto out = query(ras.endpoint(), quick());
  EXPECT_FALSE(out.answered);
  EXPECT_NE(out.error.find("not NCCL RAS's report"), std::string::npos) << out.error;
}

TEST(RasClient, AnEndlessReplyStopsAtTheCap) {
  FakeRas ras([](FakeRas& r, int fd, int n) {
    std::string chunk(65536, 'x');
    nccl(true, "")(r, fd, n);  // the handshake as RAS answers it, then a reply that never ends
    for (int i = 0; i < 400 && !r.stop; ++i) FakeRas::send(fd, chunk);
  });
  auto o = quick();
  o.max_reply = 1 << 20;
  auto out = query(ras.endpoint(), o);
  EXPECT_FALSE(out.answered);
  EXPECT_NE(out.error.find("passed 1 MiB"), std::string::npos) << out.error;
  EXPECT_LE(out.reply.size(), (1u << 20) + 65536);
  ras.stop = true;
}

TEST(RasClient, ATrickleEndsAtTheDeadline) {
  FakeRas ras([](FakeRas& r, int fd, int n) {
    nccl(true, "")(r, fd, n);
    for (int i = 0; i < 100 && !r.stop; ++i) {
      FakeRas::send(fd, "{");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  auto o = quick();
  o.deadline_s = 1;
  auto out = query(ras.endpoint(), o);
  EXPECT_FALSE(out.answered);
  EXPECT_NE(out.error.find("did not finish"), std::string::npos) << out.error;
  ras.stop = true;
}

TEST(RasClient, CutShortIsSaid) {
  auto whole = fixture("dead-2.30.7.json");
  FakeRas ras(nccl(true, whole.substr(0, whole.size() / 3)));
  auto out = query(ras.endpoint(), quick());
  EXPECT_FALSE(out.answered);
  EXPECT_NE(out.error.find("does not parse"), std::string::npos) << out.error;
}

}  // namespace
}  // namespace gpudiag::ras
