// Groups keyed by name and members, pg_status beside send/recv, and causes reduced across
// groups: small jobs built here, each with its answer known (the dumps of whole meshes are
// tests/fixtures/fr/mesh_*, read by test_fr.py).
#include "flight_recorder/causes.h"

#include <gtest/gtest.h>

#include <string>

#include "flight_recorder/render.h"

namespace gpudiag::fr {
namespace {

/// One op in a rank's buffer, in the order it was queued.
struct Rec {
  std::string group;
  std::int64_t seq;
  State state;
  bool p2p = false;
};

/// A dump of `rank`: pg_config from `groups` (name -> members), entries from `recs` (record
/// ids in order; pg_id the name's number, as ranks create groups in one order).
RankDump dump(int rank, const std::map<std::string, std::vector<int>>& groups,
              const std::vector<Rec>& recs, bool timed = true) {
  RankDump d;
  d.rank = rank;
  d.version = "2.10";
  for (const auto& [name, ranks] : groups) d.groups[name] = GroupConfig{"g" + name, ranks};
  for (std::size_t k = 0; k < recs.size(); ++k) {
    Entry e;
    e.group = recs[k].group;
    e.group_desc = "g" + recs[k].group;
    e.pg_id = std::stoll(recs[k].group);
    e.record_id = static_cast<std::int64_t>(k);
    e.seq = recs[k].seq;
    e.p2p = recs[k].p2p;
    if (e.p2p) e.p2p_seq = recs[k].seq;  // a send/recv: its own counter (seq is unused)
    e.state = recs[k].state;
    e.start_recorded = timed && recs[k].state != State::scheduled;
    e.op.name = e.p2p ? "nccl:send" : "nccl:all_reduce";
    e.op.in_sizes = e.op.out_sizes = {{256}};
    e.op.in_dtypes = e.op.out_dtypes = {"BFloat16"};
    d.entries.push_back(e);
  }
  return d;
}

/// `steps` steps of: TP all_reduce, then DP all_reduce, all completed.
std::vector<Rec> steps(int n) {
  std::vector<Rec> r;
  for (int k = 1; k <= n; ++k) {
    r.push_back({"1", k, State::completed});
    r.push_back({"2", k, State::completed});
  }
  return r;
}

std::vector<Rec> plus(std::vector<Rec> a, const std::vector<Rec>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// Four ranks: TP subgroups {0,1} {2,3} both named "1" (a split), DP {0,2} {1,3} named "2".
std::map<std::string, std::vector<int>> mesh(int rank) {
  return {{"1", rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}},
          {"2", rank % 2 ? std::vector<int>{1, 3} : std::vector<int>{0, 2}}};
}

Report run(std::vector<RankDump> dumps) {
  Inputs in;
  in.dumps = std::move(dumps);
  return analyze(std::move(in), Options{});
}

TEST(FrCauses, ARankHeldInOneGroupIsNotACauseInAnother) {
  // Rank 1 stopped queueing after step 2. Rank 0 waits in TP for it and so never queues DP 3,
  // where rank 2 waits for rank 0: rank 0 is missing there, and a victim.
  auto rep = run({dump(0, mesh(0), plus(steps(2), {{"1", 3, State::started}})),
                  dump(1, mesh(1), steps(2)),
                  dump(2, mesh(2), plus(steps(2), {{"1", 3, State::completed},
                                                   {"2", 3, State::started}})),
                  dump(3, mesh(3), plus(steps(2), {{"1", 3, State::completed},
                                                   {"2", 3, State::started}}))});
  EXPECT_EQ(rep.suspect_ranks, std::vector<int>{1});
  EXPECT_EQ(rep.waiting_ranks, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(rep.exit_code(), 1);
  ASSERT_EQ(rep.waits.size(), 3u);
  EXPECT_EQ(rep.waits[0].rank, 0);
  EXPECT_EQ(rep.waits[0].group_ranks, (std::vector<int>{0, 1}));
  EXPECT_EQ(rep.waits[0].for_ranks, std::vector<int>{1});
  EXPECT_EQ(rep.waits[1].for_ranks, std::vector<int>{0});  // rank 2, in DP {0,2}
  const std::string text = render_text(rep);
  EXPECT_EQ(text.substr(text.find('\n') + 1, 7), "cause: ") << text;
  EXPECT_NE(text.find("cause: rank 1: missing-ranks: group 1 [0,1] (g1): seq 3 nccl:all_reduce "
                      "[[256]] BFloat16: rank 0 started it; rank 1 never scheduled it\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("missing-ranks: group 2 [0,2] (g2): seq 3 nccl:all_reduce [[256]] "
                      "BFloat16: rank 2 started it; rank 0 never scheduled it (rank 0 waiting "
                      "elsewhere: not a cause)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("waiting: rank 0 waits in group 1 [0,1] (g1) at seq 3 nccl:all_reduce "
                      "[[256]] BFloat16 for rank 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("waiting ranks: 0,2,3 (not causes)\nsuspect ranks: 1\n"),
            std::string::npos)
      << text;
}

TEST(FrCauses, AStoppedGpuIsTheCauseAndThePeersItHoldsAreNot) {
  // Rank 1's GPU stopped before TP 3: it queued TP 3 and DP 3 and started neither. Rank 0
  // started TP 3 and its stream waits there, so its DP 3 never starts, where rank 2 started.
  auto rep = run({dump(0, mesh(0), plus(steps(2), {{"1", 3, State::started},
                                                   {"2", 3, State::scheduled}})),
                  dump(1, mesh(1), plus(steps(2), {{"1", 3, State::scheduled},
                                                   {"2", 3, State::scheduled}})),
                  dump(2, mesh(2), plus(steps(2), {{"1", 3, State::completed},
                                                   {"2", 3, State::started}})),
                  dump(3, mesh(3), plus(steps(2), {{"1", 3, State::completed},
                                                   {"2", 3, State::started}}))});
  EXPECT_EQ(rep.suspect_ranks, std::vector<int>{1});
  EXPECT_EQ(rep.waiting_ranks, (std::vector<int>{0, 2, 3}));
  int named_zero = 0;
  for (const auto& f : rep.findings)
    if (f.kind == "gpu-stopped" && f.ranks == std::vector<int>{0}) {
      ++named_zero;
      EXPECT_TRUE(f.causes.empty());
      EXPECT_EQ(f.waiting, std::vector<int>{0});
    }
  EXPECT_EQ(named_zero, 1);
}

TEST(FrCauses, ARankWaitingInASendRecvIsNotACause) {
  // Rank 2 stopped after step 2 (its TP peer 3 waits for it). Rank 0 waits in a send to
  // rank 2 (pipeline pair {0,2}, send/recv only) and so never queues TP 3, where rank 1 waits.
  // The pair carries no collective: only the send says where rank 0 is.
  const auto groups = [](int rank) {
    std::map<std::string, std::vector<int>> g = {
        {"1", rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}},
        {"2", rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}}};
    if (rank % 2 == 0) g["3"] = {0, 2};
    return g;
  };
  auto rep = run({dump(0, groups(0), plus(steps(2), {{"3", 1, State::started, true}})),
                  dump(1, groups(1), plus(steps(2), {{"1", 3, State::started}})),
                  dump(2, groups(2), steps(2)),
                  dump(3, groups(3), plus(steps(2), {{"1", 3, State::started}}))});
  EXPECT_EQ(rep.suspect_ranks, std::vector<int>{2});
  EXPECT_EQ(rep.waiting_ranks, (std::vector<int>{0, 1, 3}));
  ASSERT_FALSE(rep.waits.empty());
  EXPECT_EQ(rep.waits[0].rank, 0);
  EXPECT_TRUE(rep.waits[0].p2p);
  EXPECT_EQ(rep.waits[0].for_ranks, std::vector<int>{2});
  EXPECT_NE(render_text(rep).find("waiting: rank 0 waits in group 3 (g3) at p2p seq 1 nccl:send"),
            std::string::npos)
      << render_text(rep);
}

TEST(FrCauses, SplitSubgroupsSharingANameAreAnalysedApart) {
  // TP {0,1} ran 5 collectives, TP {2,3} 9: both named "1", both healthy.
  std::vector<Rec> five, nine;
  for (int k = 1; k <= 9; ++k) (k <= 5 ? five : nine).push_back({"1", k, State::completed});
  nine.insert(nine.begin(), five.begin(), five.end());
  auto rep = run({dump(0, mesh(0), five), dump(1, mesh(1), five), dump(2, mesh(2), nine),
                  dump(3, mesh(3), nine)});
  EXPECT_TRUE(rep.findings.empty()) << rep.findings[0].text;
  EXPECT_TRUE(rep.suspect_ranks.empty());
  ASSERT_EQ(rep.groups.size(), 4u);  // 1 [0,1], 1 [2,3], 2 [0,2], 2 [1,3]
  EXPECT_EQ(rep.groups[1].ranks, (std::vector<int>{2, 3}));
  EXPECT_TRUE(rep.groups[1].shared_name);
  EXPECT_EQ(rep.groups[1].tracks[0].completed, 9);
  ASSERT_EQ(rep.notes.size(), 2u);
  EXPECT_EQ(rep.notes[0],
            "group 1 (g1) is the name of 2 process groups with different members (split_group "
            "or DeviceMesh subgroups): each is analysed apart");
}

TEST(FrCauses, MembersTheDumpsDisagreeOnAreFlagged) {
  auto g0 = std::map<std::string, std::vector<int>>{{"5", {0, 1, 2, 3}}};
  auto g1 = std::map<std::string, std::vector<int>>{{"5", {0, 1}}};
  const std::vector<Rec> two = {{"5", 1, State::completed}, {"5", 2, State::completed}};
  auto rep = run({dump(0, g0, two), dump(1, g1, two)});
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_EQ(rep.notes[0],
            "the dumps disagree on the members of group 5 (g5): rank 1 says 0,1; rank 0 says "
            "0-3; each member set is analysed apart");
  EXPECT_EQ(rep.groups[1].other_view, std::vector<int>{1});  // 5 [0-3]: rank 1 thinks not
}

TEST(FrCauses, PgStatusOfAGroupWithSendRecvIsNotACollectiveCount) {
  // A pipeline group: two collectives and send/recv. Its pg_status holds p2p sequence numbers
  // (12 and 11: the last work was a send on one rank, a recv on the other).
  const std::map<std::string, std::vector<int>> pp = {{"3", {0, 1}}};
  std::vector<Rec> recs = {{"3", 1, State::completed}, {"3", 1, State::completed, true},
                           {"3", 2, State::completed}, {"3", 2, State::completed, true}};
  auto d0 = dump(0, pp, recs), d1 = dump(1, pp, recs);
  d0.status[3] = GroupStatus{12, 12, 12};
  d1.status[3] = GroupStatus{11, 11, 11};
  auto rep = run({d0, d1});
  EXPECT_TRUE(rep.findings.empty()) << rep.findings[0].text;
  EXPECT_TRUE(rep.groups[0].carries_p2p);
  EXPECT_EQ(rep.groups[0].tracks[0].enqueued, 2);
  EXPECT_FALSE(rep.groups[0].tracks[0].status_used);
  // Without the send/recv the same counters are collectives, and rank 1 is one behind.
  recs = {{"3", 1, State::completed}, {"3", 2, State::completed}};
  auto e0 = dump(0, pp, recs), e1 = dump(1, pp, recs);
  e0.status[3] = GroupStatus{12, 12, 12};
  e1.status[3] = GroupStatus{11, 11, 11};
  EXPECT_EQ(run({e0, e1}).suspect_ranks, std::vector<int>{1});
}

TEST(FrCauses, APointToPointOnlyGroupIsNotJudgedByItsCounters) {
  const std::map<std::string, std::vector<int>> pp = {{"3", {0, 1}}};
  auto d0 = dump(0, pp, {{"3", 0, State::completed, true}, {"3", 0, State::started, true}});
  auto d1 = dump(1, pp, {{"3", 0, State::completed, true}});
  d0.status[3] = GroupStatus{7, 7, 6};
  d1.status[3] = GroupStatus{6, 6, 6};
  auto rep = run({d0, d1});
  EXPECT_TRUE(rep.findings.empty()) << rep.findings[0].text;
  EXPECT_TRUE(rep.suspect_ranks.empty());
  EXPECT_TRUE(rep.waiting_ranks.empty());
}

TEST(FrCauses, RanksThatWaitForEachOtherAreAllNamed) {
  // Rank 0 queued in group 1 first, rank 1 in group 2 first: each waits for the other.
  const std::map<std::string, std::vector<int>> both = {{"1", {0, 1}}, {"2", {0, 1}}};
  auto rep = run({dump(0, both, {{"1", 1, State::started}}),
                  dump(1, both, {{"2", 1, State::started}})});
  EXPECT_EQ(rep.suspect_ranks, (std::vector<int>{0, 1}));
  EXPECT_TRUE(rep.waiting_ranks.empty());
}

TEST(FrCauses, ABusyJobSkewedByOneCollectiveInFlightHasNoSuspect) {
  // Dumped while it ran: rank 2's TP 3 completed on rank 3 and still runs on rank 2, which
  // has not queued DP 3 yet (rank 0 has); rank 1 queued DP 3 and its GPU has not reached it
  // (its TP 3 runs, completed on rank 0), while rank 3 started it.
  auto rep = run({dump(0, mesh(0), plus(steps(2), {{"1", 3, State::completed},
                                                   {"2", 3, State::started}})),
                  dump(1, mesh(1), plus(steps(2), {{"1", 3, State::started},
                                                   {"2", 3, State::scheduled}})),
                  dump(2, mesh(2), plus(steps(2), {{"1", 3, State::started}})),
                  dump(3, mesh(3), plus(steps(2), {{"1", 3, State::completed},
                                                   {"2", 3, State::started}}))});
  EXPECT_TRUE(rep.suspect_ranks.empty());
  EXPECT_EQ(rep.in_flight_ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(rep.waiting_ranks, (std::vector<int>{0, 3}));  // at DP 3, for ranks 2 and 1
  EXPECT_EQ(rep.exit_code(), 0);
  // Rank 2's TP 3 queued and never started while rank 3 waits in it: its GPU stopped there,
  // and ranks 0, 1, 3 wait for it, directly or through rank 3.
  auto stopped = run({dump(0, mesh(0), plus(steps(2), {{"1", 3, State::completed},
                                                       {"2", 3, State::started}})),
                      dump(1, mesh(1), plus(steps(2), {{"1", 3, State::completed},
                                                       {"2", 3, State::started}})),
                      dump(2, mesh(2), plus(steps(2), {{"1", 3, State::scheduled}})),
                      dump(3, mesh(3), plus(steps(2), {{"1", 3, State::started}}))});
  EXPECT_EQ(stopped.suspect_ranks, std::vector<int>{2});
  EXPECT_EQ(stopped.waiting_ranks, (std::vector<int>{0, 1, 3}));
}

TEST(FrCauses, AChainOfRanksEachWaitingForTheNextEndsAtTheLast) {
  // Rank k started seq 1 of the pair group {k, k+1}, which rank k+1 never scheduled: rank k
  // waits for rank k+1, 200,000 ranks deep, and only the last waits for nobody. Tarjan's
  // algorithm walks the whole chain from rank 0: it must not recurse that deep.
  constexpr int n = 200000;
  std::vector<RankDump> dumps;
  for (int k = 0; k < n; ++k) {
    std::map<std::string, std::vector<int>> pairs;
    if (k > 0) pairs[std::to_string(k - 1)] = {k - 1, k};
    if (k + 1 < n) pairs[std::to_string(k)] = {k, k + 1};
    dumps.push_back(dump(k, pairs, k + 1 < n ? std::vector<Rec>{{std::to_string(k), 1,
                                                                 State::started}}
                                             : std::vector<Rec>{}));
  }
  auto rep = run(std::move(dumps));
  EXPECT_EQ(rep.suspect_ranks, std::vector<int>{n - 1});
  ASSERT_EQ(rep.waiting_ranks.size(), static_cast<std::size_t>(n - 1));
  EXPECT_EQ(rep.waiting_ranks.back(), n - 2);
  ASSERT_EQ(rep.waits.size(), static_cast<std::size_t>(n - 1));
  EXPECT_EQ(rep.waits[0].for_ranks, std::vector<int>{1});
}

}  // namespace
}  // namespace gpudiag::fr
