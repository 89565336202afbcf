// --preflight: what a preflight's end says of the node (pure), the check it
// runs, and whole rounds of launchers on threads against a real
// TcpStoreServer where one node's preflight fails: that node is left out of
// the round with the preflight's words, checked again when the next round
// opens, and back in when it passes; healthy preflights leave nobody out.
#include "launch/preflight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <future>
#include <mutex>

#include "launch/rounds.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace gpudiag::launch {
namespace preflight_test {

PreflightRun ended(ExitStatus s, std::string launch_line = "", std::string summary = "") {
  PreflightRun r;
  r.status = s;
  r.timeout_s = 60;
  r.seconds = 3.2;
  r.launch_line = std::move(launch_line);
  r.check_summary = std::move(summary);
  return r;
}

TEST(PreflightFault, APassingCheckIsNoFaultHoweverSlowWithinItsTime) {
  auto v = preflight_fault(
      ended(ExitStatus::exited(0), "2/2 ranks OK", "2/2 ranks OK on 1 host, backend host/tcp"));
  EXPECT_EQ(v.fault, "");
  EXPECT_EQ(v.line,
            "preflight: this node passed gpudiag check (2/2 ranks OK on 1 host, backend "
            "host/tcp, 3.2 s)");
  auto slow = ended(ExitStatus::exited(0), "2/2 ranks OK");
  slow.seconds = 59.9;  // a loaded node, just inside its time
  EXPECT_EQ(preflight_fault(slow).fault, "");
}

TEST(PreflightFault, ABrokenRankIsTheNodesFaultInTheChecksWords) {
  auto v =
      preflight_fault(ended(ExitStatus::exited(1), "1/2 ranks OK; rank 1 exited with status 1",
                            "1/2 ranks OK on 1 host, backend host/tcp; rank 1 broken in compute"));
  EXPECT_EQ(v.fault,
            "preflight: gpudiag check found this node broken (1/2 ranks OK on 1 host, backend "
            "host/tcp; rank 1 broken in compute)");
  EXPECT_EQ(v.line, v.fault);
  // A rank killed: no summary from rank 0, the launcher's line says it.
  auto killed = preflight_fault(
      ended(ExitStatus::exited(139), "0/2 ranks OK; rank 0 killed by SIGSEGV (first failure)"));
  EXPECT_EQ(killed.fault,
            "preflight: gpudiag check found this node broken (0/2 ranks OK; rank 0 killed by "
            "SIGSEGV (first failure))");
  // Its launcher itself killed, saying nothing.
  EXPECT_EQ(preflight_fault(ended(ExitStatus::killed(SIGKILL))).fault,
            "preflight: gpudiag check found this node broken (its launcher killed by SIGKILL)");
}

TEST(PreflightFault, TooSlowIsTheNodesFaultAndSaysItsLimit) {
  auto v = preflight_fault(ended(ExitStatus::exited(3), "0/2 ranks OK; stopped by --timeout 60 s"));
  EXPECT_EQ(v.fault,
            "preflight: gpudiag check did not finish within --preflight-timeout 60 s (0/2 ranks "
            "OK; stopped by --timeout 60 s)");
  PreflightRun hung;  // its own launcher hung: killed here
  hung.timeout_s = 60;
  EXPECT_EQ(preflight_fault(hung).fault,
            "preflight: gpudiag check did not end within --preflight-timeout 60 s (its launcher "
            "killed 20 s later)");
}

TEST(PreflightFault, APreflightThatCouldNotRunLeavesTheNodeIn) {
  for (int code : {2, 4}) {
    auto v = preflight_fault(ended(ExitStatus::exited(code), "no free port"));
    EXPECT_EQ(v.fault, "") << code;
    EXPECT_EQ(v.line,
              "preflight: gpudiag check could not run on this node (no free port): not counted "
              "against the node");
  }
}

TEST(PreflightFault, TheCheckIsAOneNodeJobOfItsOwnBoundedByTheTimeout) {
  EXPECT_EQ(preflight_arguments(4, 30),
            (std::vector<std::string>{"launch", "--standalone", "--nproc-per-node", "4",
                                      "--timeout", "30", "--nccl-ras-timeout", "0", "--", "check",
                                      "--timeout", "30"}));
}

/// A job's store, and launchers meeting in it on threads.
struct JobStore {
  TcpStoreServer server{[] {
    TcpStoreServerOptions o;
    o.bind_host = "127.0.0.1";
    o.token = "t";
    return o;
  }()};
  JobInfo job() const {
    JobInfo j;
    j.master_addr = "127.0.0.1";
    j.master_port = server.port();
    j.token = "t";
    j.rendezvous = true;
    return j;
  }
};

std::unique_ptr<TcpStoreServer> no_server(int) { return nullptr; }

NodeView node(std::string host, int lo, int hi) { return {std::move(host), 100, 1, lo, hi, -1}; }

/// A launcher: its Rounds, its job, and a preflight that answers `fault` and counts.
struct Launcher {
  Launcher(const JobStore& s, std::string host, int lo = 2, int hi = 3)
      : host(host), lo(lo), hi(hi), rounds(host, {10, 10}), job(s.job()) {
    rounds.connect(job, "", no_server);
    rounds.set_preflight([this](int round) {
      asked_rounds.push_back(round);
      std::lock_guard lock(mu);
      return fault;
    });
  }
  void set_fault(std::string why) {
    std::lock_guard lock(mu);
    fault = std::move(why);
  }
  std::future<std::pair<int, std::string>> join() {
    return std::async(std::launch::async, [this] {
      try {
        auto got = rounds.join(job, node(host, lo, hi));
        return std::make_pair(got.nnodes, std::string());
      } catch (const JobEndedWithout& e) {
        return std::make_pair(-e.status(), std::string(e.what()));
      }
    });
  }
  std::string host;
  int lo, hi;
  Rounds rounds;
  JobInfo job;
  std::mutex mu;
  std::string fault;
  std::vector<int> asked_rounds;
};

TEST(PreflightRounds, HealthyPreflightsLeaveNobodyOut) {
  JobStore s;
  Launcher a(s, "a"), b(s, "b"), c(s, "c");
  auto fa = a.join(), fb = b.join(), fc = c.join();
  EXPECT_EQ(fa.get().first, 3);
  EXPECT_EQ(fb.get().first, 3);
  EXPECT_EQ(fc.get().first, 3);
  for (auto* l : {&a, &b, &c}) {
    EXPECT_EQ(l->asked_rounds, std::vector<int>{0});
    ASSERT_EQ(l->rounds.history().size(), 1u);
    EXPECT_TRUE(l->rounds.history()[0].left_out.empty());
    EXPECT_TRUE(l->rounds.history()[0].kept.empty());
    EXPECT_EQ(l->rounds.history()[0].preflight, "");
  }
}

TEST(PreflightRounds, ANodeWhosePreflightFailsIsLeftOutAndCheckedAgainAtTheNextRound) {
  JobStore s;
  Launcher a(s, "a"), b(s, "b"), c(s, "c");
  const std::string why =
      "preflight: gpudiag check found this node broken (rank 1 broken in compute)";
  c.set_fault(why);
  auto fa = a.join(), fb = b.join(), fc = c.join();
  EXPECT_EQ(fa.get().first, 2);
  EXPECT_EQ(fb.get().first, 2);
  for (auto* l : {&a, &b}) {
    const auto& rec = l->rounds.history().back();
    ASSERT_EQ(rec.left_out.size(), 1u);
    EXPECT_EQ(rec.left_out[0].node.host, "c");
    EXPECT_EQ(rec.left_out[0].why, why);
  }
  // The event: c, left out of round 0, waits in its join for round 1.
  TcpStoreClient watch("127.0.0.1", s.server.port(), "t", Deadline::after_seconds(5));
  while (watch.add("rdzv/waiting", 0, Deadline::after_seconds(5)) < 1)
    watch.wait({"never"}, Deadline::after(std::chrono::milliseconds(20)));
  // a and b fail and restart; c's node is fixed meanwhile: checked again, admitted.
  c.set_fault("");
  AttemptEnd restart;
  restart.then = AfterAttempt::restart;
  restart.exit_status = 1;
  a.rounds.after_attempt(restart, "");
  b.rounds.after_attempt(restart, "");
  fa = a.join(), fb = b.join();
  EXPECT_EQ(fc.get().first, 3);
  EXPECT_EQ(fa.get().first, 3);
  fb.get();
  EXPECT_EQ(c.asked_rounds, (std::vector<int>{0, 1}));
  EXPECT_EQ(a.asked_rounds,
            (std::vector<int>{0, 1}));  // a preflight per round, not per restart left
  ASSERT_EQ(c.rounds.history().size(), 2u);
  EXPECT_EQ(c.rounds.history()[0].preflight, why);
  EXPECT_EQ(c.rounds.history()[0].node_rank, -1);
  EXPECT_EQ(c.rounds.history()[1].preflight, "");
  EXPECT_GE(c.rounds.history()[1].node_rank, 0);
  AttemptEnd done;
  for (auto* l : {&a, &b, &c}) l->rounds.after_attempt(done, "");
}

TEST(PreflightRounds, AFailedPreflightStaysInWhenMinNeedsIt) {
  JobStore s;
  // MIN and MAX 2: b is needed (the round closes once both came).
  Launcher a(s, "a", 2, 2), b(s, "b", 2, 2);
  const std::string why = "preflight: gpudiag check did not finish within --preflight-timeout 60 s";
  b.set_fault(why);
  auto fa = a.join(), fb = b.join();
  EXPECT_EQ(fa.get().first, 2);
  EXPECT_EQ(fb.get().first, 2);
  ASSERT_EQ(a.rounds.history().back().kept.size(), 1u);
  EXPECT_EQ(a.rounds.history().back().kept[0].why, why);
}

}  // namespace preflight_test
}  // namespace gpudiag::launch
