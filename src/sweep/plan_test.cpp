// The sweep's plan: encodings that every rank decodes alike (and refuses when
// malformed), partners that pair ranks disjointly with every rail measured,
// and the planner's verdicts on pools with a slow node, a node that dies, a
// failure only a deciding round can place, and two nodes that cannot be told
// apart.
#include "sweep/plan.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "util/error.h"

namespace gpudiag::sweep {
namespace {

std::vector<std::optional<std::string>> hosts(int nodes, int per, bool cyclic = false) {
  std::vector<std::optional<std::string>> h(nodes * per);
  for (int r = 0; r < nodes * per; ++r)
    h[r] = "h" + std::to_string(cyclic ? r % nodes : r / per);
  return h;
}

TEST(SweepLayout, BlockCyclicAndListRoundTrip) {
  auto l = make_layout(hosts(3, 4));
  EXPECT_EQ(encode_layout(l), "block 4 3");
  EXPECT_EQ(l.local_index(6), 2);
  auto c = make_layout(hosts(3, 2, true));
  EXPECT_EQ(encode_layout(c), "cyclic 3");
  auto odd = hosts(2, 2);
  odd[1].reset();  // a rank that never arrived
  auto m = make_layout(odd);
  EXPECT_EQ(encode_layout(m), "list 0 -1 1 1");
  for (const Layout* x : {&l, &c, &m}) {
    auto back = decode_layout(encode_layout(*x), x->ranks());
    EXPECT_EQ(back.node_of, x->node_of);
    EXPECT_EQ(back.members, x->members);
  }
  for (const char* bad : {"", "block 3 3", "block 0 12", "cyclic 0", "list 0 1", "list 0 1 2 x",
                          "list 0 9 0 0", "mesh 4"})
    EXPECT_THROW(decode_layout(bad, 4), Error) << bad;
}

TEST(SweepRound, EncodingsAndDisjointPairs) {
  Round r;
  r.index = 7;
  r.kind = RoundKind::pairs;
  r.node_pairs = {{3, 0}, {5, 2}};
  auto back = decode_round(encode_round(r), 6);
  EXPECT_EQ(back.index, 7);
  EXPECT_EQ(back.node_pairs, r.node_pairs);
  EXPECT_EQ(decode_round("2 circle 1", 6).kind, RoundKind::circle);
  EXPECT_EQ(decode_round("9 done", 6).kind, RoundKind::done);
  for (const char* bad : {"", "1", "x circle 1", "1 circle", "1 pairs 0-0", "1 pairs 0-1 1-2",
                          "1 pairs 0-6", "1 pairs 0+1", "0 done", "1 fly 2"})
    EXPECT_THROW(decode_round(bad, 6), Error) << bad;
}

TEST(SweepRound, PartnersAreMutualAndMeasureEveryRail) {
  const auto l = make_layout(hosts(5, 3));
  for (int turn = 0; turn < 5; ++turn) {
    Round r;
    r.kind = RoundKind::circle;
    r.turn = turn;
    for (int rank = 0; rank < l.ranks(); ++rank) {
      const int p = partner_in(r, l, rank);
      if (p < 0) continue;
      EXPECT_EQ(partner_in(r, l, p), rank);
      EXPECT_NE(l.node_of[p], l.node_of[rank]);
      EXPECT_EQ(l.local_index(p), l.local_index(rank));  // rail i meets rail i
    }
  }
  Round w;
  w.kind = RoundKind::within;
  std::set<int> met;
  for (w.turn = 0; w.turn < 3; ++w.turn) {
    const int p = partner_in(w, l, 4);
    if (p >= 0) {
      EXPECT_EQ(l.node_of[p], 1);
      met.insert(p);
    }
  }
  EXPECT_EQ(met, (std::set<int>{3, 5}));
}

/// Runs the planner to the end; `speed(a, b, round)` is the GB/s of the
/// rank pair (<= 0: the exchange failed); `gone(round)` ranks that stop.
std::vector<NodeVerdict> sweep(Planner& p, const std::function<double(int, int, int)>& speed,
                               const std::function<std::vector<int>(int)>& gone = {}) {
  std::set<int> dead;
  double t = 0;
  for (Round r = p.next(t); r.kind != RoundKind::done; r = p.next(t += 1)) {
    std::vector<int> now = gone ? gone(r.index) : std::vector<int>{};
    dead.insert(now.begin(), now.end());
    std::vector<PairResult> results;
    for (int a = 0; a < p.layout().ranks(); ++a) {
      const int b = partner_in(r, p.layout(), a);
      if (b < 0 || dead.count(a)) continue;
      const double g = dead.count(b) ? 0 : speed(std::min(a, b), std::max(a, b), r.index);
      results.push_back({r.index, std::min(a, b), std::max(a, b), g > 0, std::max(g, 0.0),
                         g > 0 ? "" : "lost the connection"});
    }
    p.record(r, results, now);
  }
  return p.verdicts();
}

/// Like sweep(), but each end of a pair reports its own figure:
/// `end_speed(a, b, round, reporter)`.
std::vector<NodeVerdict> sweep_ends(Planner& p,
                                    const std::function<double(int, int, int, int)>& end_speed) {
  double t = 0;
  for (Round r = p.next(t); r.kind != RoundKind::done; r = p.next(t += 1)) {
    std::vector<PairResult> results;
    for (int a = 0; a < p.layout().ranks(); ++a) {
      const int b = partner_in(r, p.layout(), a);
      if (b < 0) continue;
      const double g = end_speed(std::min(a, b), std::max(a, b), r.index, a);
      results.push_back({r.index, std::min(a, b), std::max(a, b), true, g, ""});
    }
    p.record(r, results, {});
  }
  return p.verdicts();
}

std::map<int, NodeState> states(const std::vector<NodeVerdict>& v) {
  std::map<int, NodeState> out;
  for (const auto& n : v) out[n.node] = n.state;
  return out;
}

// Each backend's own threshold, at the boundary: on GPUs a node at 40% of its
// peers' speed is slow and one at 60% is not; on the host backend (CPUs move
// the bytes, so only a quarter counts) 20% is slow and 40% is not.
TEST(SweepPlanner, EachBackendsSlowThresholdAtItsBoundary) {
  auto pool = [](bool gpu, double slow3, double slow5) {
    Planner p(make_layout(hosts(8, 1)), planner_options(gpu, 300));
    return states(sweep(p, [&](int a, int b, int) {
      double g = 10.0;
      if (a == 3 || b == 3) g = std::min(g, 10.0 * slow3);
      if (a == 5 || b == 5) g = std::min(g, 10.0 * slow5);
      return g;
    }));
  };
  auto gpu = pool(true, 0.4, 0.6);
  EXPECT_EQ(gpu[3], NodeState::slow);
  EXPECT_EQ(gpu[5], NodeState::ok);
  for (int n : {0, 1, 2, 4, 6, 7}) EXPECT_EQ(gpu[n], NodeState::ok) << n;
  auto host = pool(false, 0.2, 0.4);
  EXPECT_EQ(host[3], NodeState::slow);
  EXPECT_EQ(host[5], NodeState::ok);
  for (int n : {0, 1, 2, 4, 6, 7}) EXPECT_EQ(host[n], NodeState::ok) << n;
  // A node at 40%: slow on GPUs, OK on the host backend: the fractions differ.
  EXPECT_EQ(pool(false, 0.4, 0.6)[3], NodeState::ok);
  EXPECT_FALSE(planner_options(false, 300).within);
  EXPECT_TRUE(planner_options(true, 300).within);
}

// A pair's two ends report different figures when one starts late (its
// partner's clock runs while it arrives): the faster end's figure is the
// link's, and healthy nodes stay OK.
TEST(SweepPlanner, APairsFasterEndIsBelieved) {
  Planner p(make_layout(hosts(6, 1)), planner_options(true, 300));
  // Node 1 starts every test late: its partners' timings include waiting for
  // it (a third of the speed), its own do not. Believing the slower end would
  // make node 1 SLOW (or its partners SUSPECT).
  auto v = sweep_ends(p, [](int a, int b, int, int reporter) {
    const bool with_late = a == 1 || b == 1;
    return with_late && reporter != 1 ? 1.0 : 3.0;
  });
  for (const auto& n : v) EXPECT_EQ(n.state, NodeState::ok) << n.node;
}

TEST(SweepPlanner, ASlowNodeIsNamedAndItsPartnersAreNot) {
  Planner p(make_layout(hosts(6, 1)), {});
  auto v = sweep(p, [](int a, int b, int) { return a == 3 || b == 3 ? 0.05 : 3.0; });
  for (const auto& n : v) {
    EXPECT_EQ(n.state, n.node == 3 ? NodeState::slow : NodeState::ok) << n.node;
    ASSERT_TRUE(n.evidence);
  }
  EXPECT_NEAR(v[3].evidence->gbps, 0.05, 1e-9);
  EXPECT_NEAR(v[3].threshold_gbps, 1.5, 1e-9);
  // Every turn fits the default budget; then two deciding rounds, each
  // against another node known good, confirm the slowness (slowness alone
  // never excludes a node, nor does one slow deciding test).
  EXPECT_EQ(v[3].evidence->stage, "deciding");
  EXPECT_EQ(v[3].confirmations, 2);
  EXPECT_NE(v[3].reason.find("slow in 2 deciding tests in a row against nodes known good"),
            std::string::npos)
      << v[3].reason;
  EXPECT_EQ(p.rounds_run(), 7);
}

TEST(SweepPlanner, InAPoolOfThreeTheDecidingTestsDoNotBecomeTheReference) {
  // Two of the three node pairs hold the slow node, and both deciding tests
  // do: were they in the reference, the slow speed would be the norm.
  Planner p(make_layout(hosts(3, 1)), planner_options(false, 300));
  auto v = sweep(p, [](int a, int b, int) { return a == 2 || b == 2 ? 0.02 : 0.5; });
  EXPECT_EQ(v[2].state, NodeState::slow) << v[2].reason;
  EXPECT_EQ(v[2].confirmations, 2);
  EXPECT_EQ(v[0].state, NodeState::ok);
  EXPECT_EQ(v[1].state, NodeState::ok);
}

TEST(SweepPlanner, ASlowDecidingTestThatTheNextDoesNotConfirmExcludesNothing) {
  // Node 3 is slow in every test up to its first deciding round (a busy
  // machine), then fast against another node known good: nothing is excluded.
  Planner p(make_layout(hosts(6, 1)), {});
  auto v = sweep(p, [](int a, int b, int round) {
    return (a == 3 || b == 3) && round <= 6 ? 0.05 : 3.0;
  });
  for (const auto& n : v) EXPECT_EQ(n.state, NodeState::ok) << n.node << " " << n.reason;
  EXPECT_EQ(v[3].evidence->stage, "deciding");
  EXPECT_EQ(v[3].evidence->round, 7);
  EXPECT_EQ(p.rounds_run(), 7);
  // Had the budget no round left for the confirmation, the node would be a
  // suspect that says why, not SLOW.
  Planner one(make_layout(hosts(6, 1)), {300, 1});
  auto w = sweep(one, [](int a, int b, int) { return a == 3 || b == 3 ? 0.05 : 3.0; });
  EXPECT_EQ(w[3].state, NodeState::suspect);
  EXPECT_NE(w[3].reason.find("not confirmed by a second one"), std::string::npos) << w[3].reason;
}

TEST(SweepPlanner, ANodeThatStopsIsMissingAndExplainsItsPartnersFailure) {
  Planner p(make_layout(hosts(6, 2)), {});
  auto v = sweep(
      p, [](int, int, int) { return 3.0; },
      [](int round) { return round == 3 ? std::vector<int>{8, 9} : std::vector<int>{}; });
  for (const auto& n : v) EXPECT_EQ(n.state, n.node == 4 ? NodeState::missing : NodeState::ok) << n.node;
  EXPECT_EQ(v[4].reason, "stopped answering in round 3 (node pairs)");
}

TEST(SweepPlanner, ADecidingRoundPlacesAFailureTwoNodesShared) {
  // Two turns only (no budget): turn 0 meets 0-3 and 1-2, turn 1 0-2 and 1-3.
  // Only 1-3 fails: 1 and 3 are suspects, 0 and 2 known good; 1 fails again
  // against 0, 3 passes against 2.
  // against 0 in round 3, and again against 2 (not 0) in round 4.
  Planner p(make_layout(hosts(4, 1)), {0, 2});
  auto v = sweep(p, [](int a, int b, int round) {
    const bool one = a == 1 || b == 1, three = a == 3 || b == 3;
    return one && (three || round >= 3) ? -1 : 3.0;
  });
  EXPECT_EQ(v[1].state, NodeState::failed);
  EXPECT_EQ(v[1].evidence->stage, "deciding");
  EXPECT_EQ(v[1].evidence->partner, 2);
  EXPECT_EQ(v[1].confirmations, 2);
  EXPECT_EQ(v[3].state, NodeState::ok);
  EXPECT_EQ(v[0].state, NodeState::ok);
  EXPECT_EQ(p.rounds_run(), 4);
}

TEST(SweepPlanner, TwoNodesAloneCannotBeToldApart) {
  Planner p(make_layout(hosts(2, 1)), {});
  auto v = sweep(p, [](int, int, int) { return -1; });
  EXPECT_EQ(v[0].state, NodeState::suspect);
  EXPECT_EQ(v[1].state, NodeState::suspect);
  EXPECT_NE(v[0].reason.find("h1"), std::string::npos) << v[0].reason;
}

TEST(SweepPlanner, ASlowPairWithinANodeIsThatNodes) {
  Planner p(make_layout(hosts(3, 2)), {});
  auto v = sweep(p, [](int a, int b, int) { return a == 2 && b == 3 ? 1.0 : 20.0; });
  EXPECT_EQ(v[1].state, NodeState::slow);
  EXPECT_EQ(v[1].evidence->partner, -1);
  EXPECT_EQ(v[1].evidence->where, "ranks 2<->3");
  EXPECT_EQ(v[0].state, NodeState::ok);
}

TEST(SweepPlanner, HostsThatNeverArrivedAreMissing) {
  Planner p(make_layout(hosts(3, 1)), {});
  p.never_arrived({"h9"});
  auto v = sweep(p, [](int, int, int) { return 3.0; });
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[3].state, NodeState::missing);
  EXPECT_EQ(p.hosts()[3], "h9");
}

TEST(SweepPlanner, ANoisyPairIsNotHeldAgainstNodesFastAtTheirMedian) {
  // One slow measurement (0-5 in the first round, a busy moment) among many
  // fast ones of both nodes: neither is slow at its median, so neither is a
  // suspect. Node 3 is slow at its median (a slow NIC): confirmed by a
  // deciding round against a node known good, and its partners are OK.
  Planner p(make_layout(hosts(6, 1)), {});
  auto v = sweep(p, [](int a, int b, int round) {
    if (a == 3 || b == 3) return 0.05;
    return a == 0 && b == 5 && round == 1 ? 0.2 : 3.0;  // 0 meets 5 in turn 0
  });
  for (const auto& n : v) EXPECT_EQ(n.state, n.node == 3 ? NodeState::slow : NodeState::ok) << n.node;
  EXPECT_EQ(v[3].evidence->stage, "deciding");
  EXPECT_EQ(p.rounds_run(), 7);
}

TEST(SweepPlanner, ANodeThatLosesOneOfItsRanksIsFailedNotMissing) {
  Planner p(make_layout(hosts(4, 2)), {});
  auto v = sweep(
      p, [](int, int, int) { return 3.0; },
      [](int round) { return round == 2 ? std::vector<int>{5} : std::vector<int>{}; });
  EXPECT_EQ(v[2].state, NodeState::failed);
  EXPECT_EQ(v[1].state, NodeState::ok);
}

TEST(SweepPlanner, ANodeThatFailedBeforeTheRoundsIsFailedWithItsReason) {
  Planner p(make_layout(hosts(4, 1)), {});
  p.node_failed(2, "rank 2 [h2] failed in device: no GPU");
  auto v = sweep(p, [](int a, int b, int) { return a == 2 || b == 2 ? -1 : 3.0; });
  EXPECT_EQ(v[2].state, NodeState::failed);
  EXPECT_EQ(v[2].reason, "rank 2 [h2] failed in device: no GPU");
  for (int x : {0, 1, 3}) EXPECT_EQ(v[x].state, NodeState::ok) << x;
}

}  // namespace
}  // namespace gpudiag::sweep
