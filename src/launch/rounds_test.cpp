// The rounds of a rendezvous: who is left out of a round (pure, and in whole
// rounds of launchers on threads against a real TcpStoreServer), a launcher
// that arrives late waiting for the next round, node ranks renumbered per
// round, and which deaths are the node's (node_fault.h).
#include <gtest/gtest.h>

#include <csignal>
#include <future>
#include <thread>

#include "launch/node_fault.h"
#include "launch/round_meeting.h"
#include "launch/rounds.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "util/error.h"

namespace gpudiag::launch {
namespace rounds_test {

NodeView node(std::string host, int lo, int hi) { return {std::move(host), 100, 1, lo, hi, -1}; }

TEST(LeaveOut, EachWhileMinRemains) {
  EXPECT_EQ(leave_out(3, {2}, 2), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(leave_out(3, {0, 2}, 2), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(leave_out(3, {1}, 3), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(leave_out(2, {5}, 1), (std::vector<bool>{false, false}));  // out of range: ignored
}

TEST(LeaveOut, TheFaultFlagSurvivesTheView) {
  auto v = node("n3", 2, 3);
  v.faulty = true;
  v.serves = true;
  auto back = decode_view(encode_view(v));
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->faulty);
  EXPECT_TRUE(back->serves);
  EXPECT_FALSE(decode_view(encode_view(v) + " fault"));
  EXPECT_FALSE(decode_view("gpudiag-node/1 " + std::string(300, 'h') + " 1 1 1 1 -1"));
}

struct Store1 {
  TcpStoreServer server{[] {
    TcpStoreServerOptions o;
    o.bind_host = "127.0.0.1";
    o.token = "t";
    return o;
  }()};
  std::future<RoundOutcome> meet(NodeView v, std::string fault, RendezvousTimes t,
                                 std::string prefix = "rdzv/0/") {
    return std::async(std::launch::async, [=, this] {
      TcpStoreClient c("127.0.0.1", server.port(), "t", Deadline::after_seconds(5));
      return meet_round(c, v, fault, t, "test", prefix);
    });
  }
  /// A launcher's job at this store, under a rendezvous.
  JobInfo job() const {
    JobInfo j;
    j.master_addr = "127.0.0.1";
    j.master_port = server.port();
    j.token = "t";
    j.rendezvous = true;
    return j;
  }
};

/// The launchers here serve no store of their own: Store1's is the job's.
static std::unique_ptr<TcpStoreServer> no_server(int) { return nullptr; }

TEST(MeetRound, ANodeAtFaultIsLeftOutWhileMinRemains) {
  Store1 s;
  auto a = s.meet(node("a", 2, 3), "", {10, 10});
  auto b = s.meet(node("b", 2, 3), "", {10, 10});
  auto c = s.meet(node("c", 2, 3), "rank 5 [c-1] was killed by SIGBUS", {10, 10});
  auto ra = a.get(), rb = b.get(), rc = c.get();
  EXPECT_TRUE(ra.admitted);
  EXPECT_TRUE(rb.admitted);
  EXPECT_FALSE(rc.admitted);
  EXPECT_EQ(ra.nnodes, 2);
  EXPECT_EQ(ra.node_rank + rb.node_rank, 1);  // renumbered 0 and 1
  for (const auto* r : {&ra, &rb, &rc}) {
    ASSERT_EQ(r->left_out.size(), 1u);
    EXPECT_EQ(r->left_out[0].node.host, "c");
    EXPECT_EQ(r->left_out[0].why, "rank 5 [c-1] was killed by SIGBUS");
  }
}

TEST(MeetRound, ANodeAtFaultStaysWhenMinNeedsIt) {
  Store1 s;
  auto a = s.meet(node("a", 2, 2), "", {10, 0.2});
  auto b = s.meet(node("b", 2, 2), "rank 1 [b-0] was killed by SIGSEGV", {10, 0.2});
  auto ra = a.get(), rb = b.get();
  EXPECT_TRUE(ra.admitted);
  EXPECT_TRUE(rb.admitted);
  EXPECT_EQ(ra.nnodes, 2);
  ASSERT_EQ(ra.kept.size(), 1u);
  EXPECT_TRUE(ra.left_out.empty());
}

TEST(MeetRound, ALateLauncherIsToldNotFailed) {
  Store1 s;
  auto a = s.meet(node("a", 1, 2), "", {10, 0});
  ASSERT_TRUE(a.get().admitted);  // the event: the round closed with one node
  auto late = s.meet(node("b", 1, 2), "", {10, 0}).get();
  EXPECT_TRUE(late.late);
  EXPECT_NE(late.late_why.find("closed with 1 node(s) (a (launcher pid 100))"), std::string::npos);
  // The next round is another prefix: it admits it.
  auto next = s.meet(node("b", 1, 2), "", {10, 0}, "rdzv/1/").get();
  EXPECT_TRUE(next.admitted);
  EXPECT_EQ(next.node_rank, 0);
}

TEST(MeetRound, AForeignSizeIsBounded) {
  Store1 s;
  TcpStoreClient c("127.0.0.1", s.server.port(), "t", Deadline::after_seconds(5));
  c.set("rdzv/0/size", "99999999999999999999", Deadline::after_seconds(5));
  auto r = s.meet(node("a", 1, 2), "", {2, 0}).get();
  EXPECT_TRUE(r.admitted);  // the size is cut to MAX; its one view is the round
  EXPECT_EQ(r.nnodes, 1);
}

/// Rounds across attempts: a launcher of two restarts, one that comes late.
TEST(Rounds, ALateLauncherIsAdmittedWhenTheNextRoundOpens) {
  Store1 s;
  auto job = [&] { return s.job(); };
  Rounds first("a", {10, 0});
  JobInfo ja = job();
  first.connect(ja, "", no_server);
  ASSERT_TRUE(first.join(ja, node("a", 1, 2)).admitted);
  EXPECT_EQ(ja.restart_count, 0);
  // The late one waits for round 1, which opens when the first restarts.
  // Its last call outlasts the test: the round closes at MAX. It outlives the
  // join below (a launcher's Rounds ending says the job ended).
  Rounds r("b", {10, 10});
  auto late = std::async(std::launch::async, [&] {
    JobInfo jb = job();
    r.connect(jb, "", no_server);
    auto got = r.join(jb, node("b", 1, 2));
    return std::make_pair(got, jb);
  });
  // The event the test waits for: the late one counted as an arrival of round 0.
  TcpStoreClient c("127.0.0.1", s.server.port(), "t", Deadline::after_seconds(5));
  while (c.add("rdzv/0/arrivals", 0, Deadline::after_seconds(5)) < 2)
    c.wait({"never"}, Deadline::after(std::chrono::milliseconds(20)));
  AttemptEnd end;
  end.then = AfterAttempt::restart;
  end.exit_status = 1;
  first.after_attempt(end, "");
  // The event: the late one arrived in round 1, which it found open.
  while (c.add("rdzv/1/arrivals", 0, Deadline::after_seconds(5)) < 1)
    c.wait({"never"}, Deadline::after(std::chrono::milliseconds(20)));
  JobInfo ja2 = job();
  auto again = first.join(ja2, node("a", 1, 2));
  auto [got, jb] = late.get();
  EXPECT_TRUE(got.admitted);
  EXPECT_EQ(again.nnodes, 2);
  EXPECT_EQ(jb.restart_count, 1);
  EXPECT_EQ(ja2.restart_count, 1);
  EXPECT_EQ(ja2.node_rank + jb.node_rank, 1);
}

TEST(Rounds, AWaitingLauncherEndsWhenTheJobDoes) {
  Store1 s;
  JobInfo j;
  j.master_addr = "127.0.0.1";
  j.master_port = s.server.port();
  j.token = "t";
  Rounds first("a", {10, 0});
  first.connect(j, "", no_server);
  ASSERT_TRUE(first.join(j, node("a", 1, 1)).admitted);
  auto late = std::async(std::launch::async, [&] {
    Rounds r("b", {10, 0});
    JobInfo jb = j;
    r.connect(jb, "", no_server);
    try {
      r.join(jb, node("b", 1, 1));
    } catch (const JobEndedWithout& e) {
      return std::make_pair(e.status(), std::string(e.what()));
    }
    return std::make_pair(-1, std::string());
  });
  TcpStoreClient c("127.0.0.1", s.server.port(), "t", Deadline::after_seconds(5));
  while (c.add("rdzv/waiting", 0, Deadline::after_seconds(5)) < 1)
    c.wait({"never"}, Deadline::after(std::chrono::milliseconds(20)));
  AttemptEnd end;
  end.then = AfterAttempt::done;
  first.after_attempt(end, "");
  auto [status, why] = late.get();
  EXPECT_EQ(status, 2);
  EXPECT_NE(why.find("the job ended with exit status 0 on a"), std::string::npos) << why;
}

/// Three launchers, MIN 2: node c's rank dies in round 0, c is left out of
/// round 1, comes back at round 2, dies again and is left out of round 3: left
/// out twice, it stays out until the job's end, and so does a launcher started
/// again on c.
TEST(Rounds, ANodeLeftOutTwiceStaysOut) {
  Store1 s;
  auto job = [&] { return s.job(); };
  // MAX 3: a round with all three closes at once; no last call to wait out.
  Rounds a("a", {10, 10}), b("b", {10, 10}), c("c", {10, 10});
  JobInfo ja = job(), jb = job(), jc = job();
  a.connect(ja, "", no_server);
  b.connect(jb, "", no_server);
  c.connect(jc, "", no_server);
  auto join = [](Rounds& r, JobInfo& j, const char* host) {
    return std::async(std::launch::async, [&r, &j, host] { return r.join(j, node(host, 2, 3)); });
  };
  /// c's join, to its end: (admitted round, "") or (-1, the JobEndedWithout's words).
  auto join_c = [](Rounds& r, JobInfo& j) {
    return std::async(std::launch::async, [&r, &j] {
      try {
        r.join(j, node("c", 2, 3));
        return std::make_pair(j.restart_count, std::string());
      } catch (const JobEndedWithout& e) {
        return std::make_pair(-e.status(), std::string(e.what()));
      }
    });
  };
  AttemptEnd restart;
  restart.then = AfterAttempt::restart;
  restart.exit_status = 135;
  const std::string sigbus = "rank 5 [c-1] was killed by SIGBUS";

  auto fa = join(a, ja, "a"), fb = join(b, jb, "b");
  auto fc = join_c(c, jc);
  ASSERT_EQ(fa.get().nnodes, 3);
  ASSERT_EQ(fb.get().nnodes, 3);
  ASSERT_EQ(fc.get().first, 0);  // round 0, all three
  a.after_attempt(restart, "");
  b.after_attempt(restart, "");
  c.after_attempt(restart, sigbus);

  fa = join(a, ja, "a"), fb = join(b, jb, "b");
  fc = join_c(c, jc);  // left out of round 1: waits in here for round 2
  auto r1 = fa.get();
  EXPECT_EQ(r1.nnodes, 2);
  ASSERT_EQ(r1.left_out.size(), 1u);
  EXPECT_EQ(r1.left_out[0].node.host, "c");
  fb.get();
  a.after_attempt(restart, "");
  b.after_attempt(restart, "");

  fa = join(a, ja, "a"), fb = join(b, jb, "b");
  EXPECT_EQ(fc.get().first, 2);  // back at round 2, not at fault there
  EXPECT_EQ(fa.get().nnodes, 3);
  fb.get();
  a.after_attempt(restart, "");
  b.after_attempt(restart, "");
  c.after_attempt(restart, sigbus);

  fa = join(a, ja, "a"), fb = join(b, jb, "b");
  fc = join_c(c, jc);  // left out of round 3, the second time: stays out
  auto r3 = fa.get();
  EXPECT_EQ(r3.nnodes, 2);
  ASSERT_EQ(r3.left_out.size(), 1u);
  fb.get();
  // A launcher started again on c stays out too, without meeting anyone.
  Rounds again("c", {10, 10});
  JobInfo jc2 = job();
  again.connect(jc2, "", no_server);
  auto fc2 = join_c(again, jc2);
  // The event: both of c's launchers wait (a and b are through with round 3).
  TcpStoreClient watch("127.0.0.1", s.server.port(), "t", Deadline::after_seconds(5));
  while (watch.add("rdzv/waiting", 0, Deadline::after_seconds(5)) < 2)
    watch.wait({"never"}, Deadline::after(std::chrono::milliseconds(20)));
  // a and b restart once more: round 4 opens, and neither of c's launchers comes.
  a.after_attempt(restart, "");
  b.after_attempt(restart, "");
  fa = join(a, ja, "a"), fb = join(b, jb, "b");
  auto r4 = fa.get();
  EXPECT_EQ(r4.nnodes, 2);
  EXPECT_TRUE(r4.left_out.empty());
  fb.get();
  AttemptEnd done;
  done.then = AfterAttempt::done;
  a.after_attempt(done, "");
  b.after_attempt(done, "");
  auto [status, why] = fc.get();
  EXPECT_EQ(status, -135) << why;  // its last attempt's status
  EXPECT_NE(why.find("left out"), std::string::npos) << why;
  auto [status2, why2] = fc2.get();
  EXPECT_EQ(status2, -2) << why2;  // it ran no attempt
  EXPECT_NE(why2.find("left out twice"), std::string::npos) << why2;
}

RankOutcome outcome(int rank, ExitStatus s, bool by_launcher = false) {
  RankOutcome o;
  o.rank = rank;
  o.status = s;
  o.killed_by_launcher = by_launcher;
  return o;
}

TEST(NodeFault, OnlyASignalTheRankDidNotAskFor) {
  auto none = [](int) { return false; };
  EXPECT_EQ(node_fault({outcome(4, ExitStatus::killed(SIGTERM), true),
                        outcome(5, ExitStatus::killed(SIGBUS))},
                       4, "n3", none)
                .value_or(""),
            "rank 5 [n3-1] was killed by SIGBUS, a signal it did not ask for");
  // A Python error, a kill by the launcher, an abort, an OOM kill: not the node's.
  EXPECT_FALSE(node_fault({outcome(0, ExitStatus::exited(1))}, 0, "n", none));
  EXPECT_FALSE(node_fault({outcome(0, ExitStatus::killed(SIGKILL), true)}, 0, "n", none));
  EXPECT_FALSE(node_fault({outcome(0, ExitStatus::killed(SIGABRT))}, 0, "n", none));
  EXPECT_FALSE(node_fault({outcome(0, ExitStatus::killed(SIGKILL))}, 0, "n",
                          [](int) { return true; }));
  EXPECT_TRUE(node_fault({outcome(0, ExitStatus::killed(SIGKILL))}, 0, "n", none));
  EXPECT_TRUE(node_fault({outcome(0, ExitStatus::killed(SIGSEGV))}, 0, "n", none));
}

// Node-class evidence in the kernel log is the node's; the workload's is not.
TEST(NodeFault, NodeClassEvidenceOfTheKernelLog) {
  EXPECT_EQ(node_class_evidence({"workload (the application's fault): Xid 13 ...",
                                 "node: Xid 79 (GPU fallen off the bus) on 0000:3b:00 at 12:03:44: "
                                 "reboot the node"},
                                "n3")
                .value_or(""),
            "the kernel log of n3 since the attempt started: Xid 79 (GPU fallen off the bus) on "
            "0000:3b:00 at 12:03:44: reboot the node");
  EXPECT_FALSE(node_class_evidence({"workload (the application's fault): Xid 13 ...",
                                    "notice: a link flapped"},
                                   "n3"));
  EXPECT_FALSE(kernel_fault(0, "n3", "/nonexistent/kmsg"));
}

// Rounds renumber a node's ranks: its launcher compares its own slot.
TEST(NodeFault, ARenumberedRankRaisingAgainIsTheSameError) {
  AttemptError a{5, 1, "ValueError: bad", "job.py", 15};
  AttemptError b{3, 1, "ValueError: bad", "job.py", 15};
  AttemptError c{5, 0, "ValueError: bad", "job.py", 15};
  EXPECT_TRUE(a.same_as(b));
  EXPECT_FALSE(a.same_as(c));
  b.local = c.local = -1;  // without a slot: the global rank
  EXPECT_FALSE(a.same_as(b));
}

}  // namespace rounds_test
}  // namespace gpudiag::launch
