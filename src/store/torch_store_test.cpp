// TorchStoreClient against a real c10d TCPStore served by Debian's
// /usr/bin/python3 with torch (1.13 here: the legacy dialect). Skipped, with
// the reason, where that Python has no torch.
#include "store/torch_store.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <thread>

#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag {
namespace torch_store_test {  // named: the unity build puts this folder's tests in one unit

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr const char* kPython = "/usr/bin/python3";

// Serves a TCPStore on an ephemeral port, prints "PORT <n>", then runs
// commands from stdin ("set K V", "get K") with torch's own client.
constexpr const char* kServer = R"(
import sys, torch.distributed as d
s = d.TCPStore("127.0.0.1", 0, 1, True, wait_for_workers=False)
print("PORT", s.port, flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "set":
        s.set(cmd[1], cmd[2]); print("ok", flush=True)
    elif cmd[0] == "get":
        print(s.get(cmd[1]).decode(), flush=True)
)";

// An emulation of the "validated" dialect (torch >= 2.1), written from the
// protocol description in torch_store.h, for the client's code path that
// this machine's torch 1.13 cannot exercise. Like torch's servers it drops a
// connection whose first message is not VALIDATE and answers waits when keys
// appear, or WAIT_CANCELED on CANCEL_WAIT. Needs no torch.
constexpr const char* kValidatedServer = R"(
import socketserver, struct, sys, threading
lock = threading.Lock(); store = {}; conns = set()
class H(socketserver.BaseRequestHandler):
    def n(self, k):
        b = b""
        while len(b) < k:
            x = self.request.recv(k - len(b))
            if not x: raise EOFError
            b += x
        return b
    def q(self): return struct.unpack("<Q", self.n(8))[0]
    def s(self):
        k = self.q()
        if k > 8192: raise ValueError
        return self.n(k)
    def keys(self): return [self.s() for _ in range(self.q())]
    def wake(self):
        for c in conns:
            if c.parked is not None and all(k in store for k in c.parked):
                c.parked = None; c.request.sendall(b"\0")
    def handle(self):
        self.parked = None
        if self.n(1) != b"\0" or struct.unpack("<I", self.n(4))[0] != 0x3C85F7CE: return
        with lock: conns.add(self)
        try:
            while True:
                t = self.n(1)[0]
                with lock:
                    if t == 1: k = self.s(); store[k] = self.s(); self.wake()
                    elif t == 3: v = store[self.s()]; self.request.sendall(struct.pack("<Q", len(v)) + v)
                    elif t == 4:
                        k = self.s(); v = int(store.get(k, b"0")) + struct.unpack("<q", self.n(8))[0]
                        store[k] = str(v).encode(); self.request.sendall(struct.pack("<q", v)); self.wake()
                    elif t == 5: self.request.sendall(b"\0" if all(k in store for k in self.keys()) else b"\1")
                    elif t == 6:
                        ks = self.keys()
                        if all(k in store for k in ks): self.request.sendall(b"\0")
                        else: self.parked = ks
                    elif t == 7: self.request.sendall(struct.pack("<q", len(store)))
                    elif t == 12: self.parked = None; self.request.sendall(b"\1")
                    else: return
        except (EOFError, ValueError, ConnectionError): pass
        finally:
            with lock: conns.discard(self)
class S(socketserver.ThreadingTCPServer): daemon_threads = True; allow_reuse_address = True
srv = S(("127.0.0.1", 0), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
print("PORT", srv.server_address[1], flush=True)
sys.stdin.read()
)";

bool have_torch() {
  static bool ok = std::system("/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null") == 0;
  return ok;
}

/// A python process serving a torch TCPStore, killed on destruction.
class TorchServer {
 public:
  explicit TorchServer(const char* script = kServer) {
    int to_child[2], from_child[2];
    EXPECT_EQ(pipe(to_child), 0);
    EXPECT_EQ(pipe(from_child), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      execl(kPython, "python3", "-c", script, static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = to_child[1];
    out_ = from_child[0];
    auto first = line(60s);  // importing torch takes a few seconds
    port_ = first.starts_with("PORT ") ? std::atoi(first.c_str() + 5) : 0;
  }
  ~TorchServer() {
    close(in_);
    close(out_);
    kill();
  }
  int port() const { return port_; }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  /// Runs a command in the python process with torch's own client; its output line.
  std::string command(const std::string& cmd) {
    auto text = cmd + "\n";
    EXPECT_EQ(write(in_, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    return line(10s);
  }

 private:
  std::string line(std::chrono::milliseconds limit) {
    std::string s;
    auto end = Clock::now() + limit;
    char ch;
    while (Clock::now() < end) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      if (read(out_, &ch, 1) != 1) break;
      if (ch == '\n') return s;
      s += ch;
    }
    return s;
  }
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
  int port_ = 0;
};

class TorchStore : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_torch()) GTEST_SKIP() << kPython << " cannot import torch.distributed";
    server_ = std::make_unique<TorchServer>();
    ASSERT_GT(server_->port(), 0) << "the python TCPStore did not start";
  }
  TorchStoreClient client(const std::string& prefix = "gpudiag/run-1/0/") {
    return TorchStoreClient("127.0.0.1", server_->port(), prefix, Deadline::after(20s));
  }
  std::unique_ptr<TorchServer> server_;
};

Deadline in_s(double s) { return Deadline::after_seconds(s); }
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST_F(TorchStore, EveryOperationAgainstARealTCPStore) {
  auto c = client();
  EXPECT_EQ(c.dialect(), TorchStoreClient::Dialect::legacy);  // torch 1.13
  c.set("a", std::string("x\0y", 3), in_s(5));
  EXPECT_EQ(c.get("a", in_s(5)), std::string("x\0y", 3));
  EXPECT_EQ(c.try_get("a", in_s(5)), std::string("x\0y", 3));
  EXPECT_EQ(c.try_get("nope", in_s(5)), std::nullopt);
  EXPECT_EQ(c.add("n", 4, in_s(5)), 4);
  EXPECT_EQ(c.add("n", -1, in_s(5)), 3);
  EXPECT_EQ(c.get("n", in_s(5)), "3");
  EXPECT_TRUE(c.wait({"a", "n"}, in_s(5)));
  auto v = c.multi_get({"n", "nope", "a"}, in_s(5));
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0], "3");
  EXPECT_EQ(v[1], std::nullopt);
  EXPECT_EQ(v[2], std::string("x\0y", 3));
}

TEST_F(TorchStore, SpeaksWithTorchsOwnClients) {
  // torch's clients put their keys under "/": with that prefix both sides see the same keys.
  auto c = client("/");
  EXPECT_EQ(server_->command("set from_torch 42"), "ok");
  EXPECT_EQ(c.get("from_torch", in_s(5)), "42");
  c.set("from_gpudiag", "hi", in_s(5));
  EXPECT_EQ(server_->command("get from_gpudiag"), "hi");
  // Our namespaced keys stay out of torch's way.
  auto ours = client("gpudiag/run-1/0/");
  EXPECT_EQ(ours.try_get("from_torch", in_s(5)), std::nullopt);
}

TEST_F(TorchStore, GetWaitsForAnotherClientsSet) {
  auto waiter = client();
  auto setter = client();
  auto got = std::async(std::launch::async, [&] { return waiter.get("k", in_s(20)); });
  EXPECT_EQ(got.wait_for(300ms), std::future_status::timeout);
  setter.set("k", "v", in_s(5));
  EXPECT_EQ(got.get(), "v");
}

TEST_F(TorchStore, DeadlinesAreHonouredAndTheClientRecovers) {
  auto c = client();
  auto other = client();
  auto t0 = Clock::now();
  EXPECT_FALSE(c.wait({"never"}, in_s(0.5)));
  EXPECT_GE(since(t0), 0.45);
  EXPECT_LT(since(t0), 3.0);
  t0 = Clock::now();
  try {
    c.get("late", in_s(0.5));
    ADD_FAILURE() << "get of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'late'"), std::string::npos) << e.what();
  }
  EXPECT_LT(since(t0), 3.0);
  other.set("late", "L", in_s(5));
  other.set("never", "N", in_s(5));
  EXPECT_EQ(c.add("cnt", 1, in_s(5)), 1);  // no stale STOP_WAITING mistaken for a reply
  EXPECT_EQ(c.get("late", in_s(5)), "L");
}

TEST_F(TorchStore, LostServerIsReportedPromptly) {
  auto c = client();
  auto waiting = std::async(std::launch::async, [&]() -> std::string {
    try {
      c.get("never", in_s(60));
      return "returned";
    } catch (const TimeoutError& e) {
      return std::string("timeout: ") + e.what();
    } catch (const Error& e) {
      return e.what();
    }
  });
  std::this_thread::sleep_for(300ms);
  auto t0 = Clock::now();
  server_->kill();
  ASSERT_EQ(waiting.wait_for(10s), std::future_status::ready);
  EXPECT_LT(since(t0), 5.0);
  EXPECT_NE(waiting.get().find("lost the store at 127.0.0.1:"), std::string::npos);
}

TEST_F(TorchStore, ProbeLeavesTheServerUsableForOthers) {
  // Many clients each probe the dialect; torch's own client still works after.
  for (int i = 0; i < 20; ++i) client().set("p" + std::to_string(i), "x", in_s(5));
  EXPECT_EQ(server_->command("set still ok"), "ok");
  EXPECT_EQ(client("/").get("still", in_s(5)), "ok");
}

TEST_F(TorchStore, GpudiagClientOnATorchStoreSaysSo) {
  try {
    TcpStoreClient c("127.0.0.1", server_->port(), "job-1", in_s(1));
    FAIL() << "gpudiag's client accepted a torch store";
  } catch (const Error& e) {
    EXPECT_NE(e.one_line().find("torch store"), std::string::npos) << e.one_line();
  }
  EXPECT_EQ(server_->command("set after ok"), "ok");  // and the torch store is unharmed
}

TEST(TorchStoreOnGpudiagStore, IsNamedAsNotATorchStore) {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  TcpStoreServer server(o);
  auto t0 = Clock::now();
  try {
    TorchStoreClient c("127.0.0.1", server.port(), "p/", in_s(10));
    FAIL() << "the torch client accepted gpudiag's store";
  } catch (const UsageError& e) {
    EXPECT_NE(e.one_line().find("is not a torch TCPStore"), std::string::npos) << e.one_line();
  }
  EXPECT_LT(since(t0), 5.0);
}

class ValidatedDialect : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPython, X_OK) != 0) GTEST_SKIP() << kPython << " is missing";
    server_ = std::make_unique<TorchServer>(kValidatedServer);
    ASSERT_GT(server_->port(), 0) << "the emulated server did not start";
  }
  TorchStoreClient client() {
    return TorchStoreClient("127.0.0.1", server_->port(), "gpudiag/r/0/", Deadline::after(20s));
  }
  std::unique_ptr<TorchServer> server_;
};

TEST_F(ValidatedDialect, IsDetectedAndEveryOperationWorks) {
  auto c = client();
  EXPECT_EQ(c.dialect(), TorchStoreClient::Dialect::validated);
  c.set("a", "1", in_s(5));
  EXPECT_EQ(c.get("a", in_s(5)), "1");
  EXPECT_EQ(c.add("n", 5, in_s(5)), 5);
  EXPECT_TRUE(c.wait({"a", "n"}, in_s(5)));
  auto v = c.multi_get({"a", "zz", "n"}, in_s(5));
  EXPECT_EQ(v[0], "1");
  EXPECT_EQ(v[1], std::nullopt);
  EXPECT_EQ(v[2], "5");
  auto other = client();
  auto got = std::async(std::launch::async, [&] { return c.get("later", in_s(20)); });
  EXPECT_EQ(got.wait_for(300ms), std::future_status::timeout);
  other.set("later", "L", in_s(5));
  EXPECT_EQ(got.get(), "L");
}

TEST_F(ValidatedDialect, TimedOutWaitIsCancelledAndTheConnectionStaysInSync) {
  auto c = client();
  auto other = client();
  auto t0 = Clock::now();
  EXPECT_FALSE(c.wait({"never"}, in_s(0.5)));
  EXPECT_LT(since(t0), 3.0);
  other.set("never", "N", in_s(5));
  EXPECT_EQ(c.add("cnt", 2, in_s(5)), 2);
  EXPECT_EQ(c.get("never", in_s(5)), "N");
}


// gpudiag's own store with torch clients allowed (server_torch.cpp, the side
// gpudiag launch serves to a torch program): gpudiag's torch client finds the
// validated dialect there, a wait that times out is cancelled (the server
// reads CANCEL_WAIT behind the parked WAIT), and the store goes on serving.
TEST(TorchClientsOnGpudiagStore, ValidatedDialectWaitsCancelsAndServes) {
  TcpStoreServerOptions o;
  o.bind_host = "127.0.0.1";
  o.torch_clients = true;
  o.world_size = 2;
  TcpStoreServer server(o);
  TorchStoreClient c("127.0.0.1", server.port(), "p/", in_s(10));
  EXPECT_EQ(c.dialect(), TorchStoreClient::Dialect::validated);
  auto t0 = Clock::now();
  EXPECT_FALSE(c.wait({"never"}, in_s(0.3)));
  EXPECT_LT(since(t0), 3.0);
  c.set("k", std::string("v\0w", 3), in_s(5));
  EXPECT_EQ(c.get("k", in_s(5)), std::string("v\0w", 3));
  EXPECT_EQ(c.add("n", 7, in_s(5)), 7);
  EXPECT_EQ(c.add("n", -9, in_s(5)), -2);
  auto many = c.multi_get({"k", "absent"}, in_s(5));
  ASSERT_EQ(many.size(), 2u);
  EXPECT_TRUE(many[0]);
  EXPECT_FALSE(many[1]);
  // A second client's SET wakes the first one's WAIT.
  auto waiter = std::async(std::launch::async, [&] { return c.wait({"later"}, in_s(10)); });
  TorchStoreClient d("127.0.0.1", server.port(), "p/", in_s(10));
  d.set("later", "1", in_s(5));
  EXPECT_TRUE(waiter.get());
}

}  // namespace
}  // namespace gpudiag
