// The analysis on dumps built here, one fault at a time, with the answer known.
#include "flight_recorder/analysis.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>

namespace gpudiag::fr {
namespace {

/// A rank's dump of group "0" (ranks 0..n-1): states[k] is seq k+1's state.
RankDump rank_dump(int rank, const std::vector<State>& states, int n = 4, bool timed = true) {
  RankDump d;
  d.rank = rank;
  d.version = "2.10";
  GroupConfig g;
  g.desc = "default_pg";
  for (int r = 0; r < n; ++r) g.ranks.push_back(r);
  d.groups["0"] = g;
  for (std::size_t k = 0; k < states.size(); ++k) {
    Entry e;
    e.group = "0";
    e.group_desc = "default_pg";
    e.pg_id = 0;
    e.seq = static_cast<std::int64_t>(k + 1);
    e.state = states[k];
    e.start_recorded = timed && states[k] != State::scheduled;
    e.op.name = "nccl:all_reduce";
    e.op.in_sizes = e.op.out_sizes = {{1024}};
    e.op.in_dtypes = e.op.out_dtypes = {"Float"};
    d.entries.push_back(e);
  }
  return d;
}

std::vector<State> run(int completed, std::vector<State> tail = {}) {
  std::vector<State> s(completed, State::completed);
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

Report analyze_dumps(std::vector<RankDump> dumps, Options opt = {}) {
  Inputs in;
  in.dumps = std::move(dumps);
  return analyze(std::move(in), opt);
}

const Finding* find(const Report& r, const std::string& kind) {
  for (const auto& f : r.findings)
    if (f.kind == kind) return &f;
  return nullptr;
}

TEST(FrAnalysis, RankThatNeverScheduledIsMissing) {
  const auto ahead = run(6, {State::started});
  auto rep = analyze_dumps(
      {rank_dump(0, ahead), rank_dump(1, ahead), rank_dump(2, run(6)), rank_dump(3, ahead)});
  const Finding* f = find(rep, "missing-ranks");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->seq, 7);
  EXPECT_EQ(f->ranks, std::vector<int>{2});
  EXPECT_EQ(f->states.at(0), State::started);
  EXPECT_EQ(f->text,
            "group 0 (default_pg): seq 7 nccl:all_reduce [[1024]] Float: ranks 0,1,3 started it; "
            "rank 2 never scheduled it");
  EXPECT_EQ(rep.suspect_ranks, std::vector<int>{2});
  EXPECT_EQ(find(rep, "gpu-stopped"), nullptr);
  EXPECT_EQ(rep.exit_code(), 1);
  EXPECT_EQ(rep.groups[0].waits_at, 7);
}

TEST(FrAnalysis, QueuedButNeverStartedWhilePeersCompletedIsGpuStopped) {
  const auto ahead = run(5, {State::started});
  auto rep = analyze_dumps({rank_dump(0, ahead),
                            rank_dump(1, run(4, {State::scheduled, State::scheduled})),
                            rank_dump(2, ahead), rank_dump(3, ahead)});
  const Finding* f = find(rep, "gpu-stopped");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->seq, 5);
  EXPECT_EQ(f->ranks, std::vector<int>{1});
  EXPECT_EQ(f->peers, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(f->text,
            "group 0 (default_pg): seq 5 nccl:all_reduce [[1024]] Float: rank 1 queued it and "
            "never started it; ranks 0,2,3 completed it: the GPU stopped before this collective");
  EXPECT_EQ(find(rep, "missing-ranks"), nullptr);
  EXPECT_EQ(find(rep, "queued-far-past"), nullptr);
  EXPECT_EQ(rep.suspect_ranks, std::vector<int>{1});
}

TEST(FrAnalysis, PeersThatOnlyStartedDoNotConvictARankThatTimesNoStarts) {
  // Rank 1's dump records no start (TORCH_NCCL_ENABLE_TIMING off): "scheduled" there only
  // means "not completed", and a peer that merely started proves nothing.
  auto rep = analyze_dumps(
      {rank_dump(0, run(4, {State::started})), rank_dump(1, run(4, {State::scheduled}), 4, false),
       rank_dump(2, run(4, {State::started})), rank_dump(3, run(4, {State::started}))});
  EXPECT_TRUE(rep.suspect_ranks.empty());
  EXPECT_EQ(rep.exit_code(), 0);
}

TEST(FrAnalysis, CpuKeptQueueingWhileGpuStoppedEvenWhenBuffersLostIt) {
  // Buffers keep 20 entries: rank 3 holds seq 21-40, all queued; its pg_status says it
  // completed 9. Its peers completed 39.
  std::vector<RankDump> dumps;
  for (int r = 0; r < 4; ++r) {
    auto d = r == 3 ? rank_dump(r, run(9, std::vector<State>(31, State::scheduled)))
                    : rank_dump(r, run(39, {State::started}));
    d.entries.erase(d.entries.begin(), d.entries.end() - 20);
    d.status[0] = r == 3 ? GroupStatus{40, 9, 9} : GroupStatus{40, 40, 39};
    dumps.push_back(d);
  }
  auto rep = analyze_dumps(dumps);
  const Finding* q = find(rep, "queued-far-past");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->ranks, std::vector<int>{3});
  EXPECT_EQ(q->peers_completed, 39);
  EXPECT_EQ(q->text,
            "group 0 (default_pg): rank 3 queued up to seq 40 and completed only up to seq 9 "
            "while ranks 0-2 completed up to seq 39: its GPU stopped at seq 10 (gone from every "
            "ring buffer) and its CPU kept queueing");
  const Finding* g = find(rep, "gpu-stopped");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->seq, 10);
  EXPECT_EQ(rep.suspect_ranks, std::vector<int>{3});
  // --lag above the gap: no queued-far-past (gpu-stopped still holds).
  Options wide;
  wide.lag = 40;
  EXPECT_EQ(find(analyze_dumps(dumps, wide), "queued-far-past"), nullptr);
}

TEST(FrAnalysis, HealthyJobHasNoFinding) {
  std::vector<RankDump> dumps;
  for (int r = 0; r < 4; ++r) dumps.push_back(rank_dump(r, run(12)));
  auto rep = analyze_dumps(dumps);
  EXPECT_TRUE(rep.findings.empty());
  EXPECT_TRUE(rep.suspect_ranks.empty());
  EXPECT_TRUE(rep.no_dump_ranks.empty());
  EXPECT_EQ(rep.groups[0].waits_at, -1);
  EXPECT_EQ(rep.exit_code(), 0);
}

TEST(FrAnalysis, RanksWithoutADumpAreListedNeverHealthy) {
  Inputs in;
  in.dumps.push_back(rank_dump(0, run(6, {State::started})));
  in.problems.push_back({"d/nccl_trace_rank_2", 2, "empty", "an empty file"});
  auto rep = analyze(std::move(in), Options{});
  EXPECT_EQ(rep.no_dump_ranks, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(rep.ranks, (std::vector<int>{0, 1, 2, 3}));
  const Finding* f = find(rep, "no-dump");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->ranks, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(f->text,
            "group 0 (default_pg): ranks 1-3 of 4 have no readable dump and are not judged; at "
            "seq 7 nccl:all_reduce [[1024]] Float, rank 0 started it");
  EXPECT_TRUE(rep.suspect_ranks.empty());
}

TEST(FrAnalysis, CoalescedOpsShareASeqAndCountInTheirFurthestState) {
  // Ops of a coalesced group without events of their own stay "scheduled"; the closing
  // nccl:coalesced entry completes. The seq is complete.
  auto d0 = rank_dump(0, run(3));
  auto d1 = rank_dump(1, run(3));
  for (auto* d : {&d0, &d1}) {
    d->groups["0"].ranks = {0, 1};
    Entry e = d->entries.back();
    e.seq = 4;
    e.state = State::scheduled;
    d->entries.push_back(e);
    e.op.name = "nccl:coalesced";
    e.state = State::completed;
    d->entries.push_back(e);
  }
  auto rep = analyze_dumps({d0, d1});
  EXPECT_TRUE(rep.findings.empty()) << rep.findings[0].text;
}

TEST(FrAnalysis, PointToPointEntriesAreNotCollectives) {
  auto d0 = rank_dump(0, run(3));
  auto d1 = rank_dump(1, run(3));
  d0.groups["0"].ranks = d1.groups["0"].ranks = {0, 1};
  Entry send = d0.entries.back();  // a send carries the collective counter of its time
  send.p2p = true;
  send.seq = 3;
  send.state = State::scheduled;
  send.op.name = "nccl:send 0->1";
  d0.entries.push_back(send);
  EXPECT_TRUE(analyze_dumps({d0, d1}).findings.empty());
}

TEST(FrAnalysis, VersionsThatDifferAreNoted) {
  auto d1 = rank_dump(1, run(2), 2);
  d1.version = "2.4";
  auto rep = analyze_dumps({rank_dump(0, run(2), 2), d1});
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_EQ(rep.notes[0], "the dumps differ in version: 2.10 (rank 0), 2.4 (rank 1)");
}

TEST(FrAnalysis, ManyGroupsEachCountTheirOwnEntries) {
  // 300 groups of four ranks, their entries interleaved in each buffer (seq 1 of every group,
  // then seq 2, ...): each member's counters come from its group's entries only. Rank 2
  // stops at seq 3 of group 123: it alone is named.
  std::vector<RankDump> dumps;
  for (int r = 0; r < 4; ++r) {
    RankDump d = rank_dump(r, {});
    d.groups.clear();
    for (int g = 0; g < 300; ++g) d.groups[std::to_string(g)] = GroupConfig{"", {0, 1, 2, 3}};
    for (int seq = 1; seq <= 5; ++seq)
      for (int g = 0; g < 300; ++g) {
        Entry e = rank_dump(r, {State::completed}).entries[0];
        e.group = std::to_string(g);
        e.pg_id = g;
        e.seq = seq;
        e.record_id = static_cast<std::int64_t>(d.entries.size());
        if (r == 2 && g == 123 && seq > 3) e.state = State::scheduled, e.start_recorded = false;
        d.entries.push_back(e);
      }
    dumps.push_back(std::move(d));
  }
  auto rep = analyze_dumps(std::move(dumps));
  ASSERT_EQ(rep.groups.size(), 300u);
  for (int g = 0; g < 300; ++g) {
    const auto& gr = rep.groups[g];
    EXPECT_EQ(gr.name, std::to_string(g));
    ASSERT_EQ(gr.tracks.size(), 4u);
    for (const auto& t : gr.tracks) {
      EXPECT_EQ(t.enqueued, 5);
      EXPECT_EQ(t.completed, g == 123 && t.rank == 2 ? 3 : 5) << g << " " << t.rank;
    }
  }
  EXPECT_EQ(rep.suspect_ranks, std::vector<int>{2});
  ASSERT_EQ(rep.findings.size(), 1u);
  EXPECT_EQ(rep.findings[0].group, "123");
}

TEST(FrAnalysis, ManySubgroupsSharingANameAreApart) {
  // 200 pairs all named "1" (split_group): one note, 200 groups, none mixed with another.
  std::vector<RankDump> dumps;
  for (int r = 0; r < 400; ++r) {
    RankDump d = rank_dump(r, run(2), 400);
    d.groups["1"] = GroupConfig{"mesh_tp", {r - r % 2, r - r % 2 + 1}};
    for (auto e : rank_dump(r, run(3)).entries) {
      e.group = "1";
      d.entries.push_back(e);
    }
    dumps.push_back(std::move(d));
  }
  auto rep = analyze_dumps(std::move(dumps));
  ASSERT_EQ(rep.groups.size(), 201u);
  for (int k = 1; k <= 200; ++k) {
    EXPECT_EQ(rep.groups[k].ranks, (std::vector<int>{2 * k - 2, 2 * k - 1}));
    EXPECT_EQ(rep.groups[k].tracks[0].completed, 3);
  }
  ASSERT_EQ(rep.notes.size(), 1u);
  EXPECT_EQ(rep.notes[0],
            "group 1 (mesh_tp) is the name of 200 process groups with different members "
            "(split_group or DeviceMesh subgroups): each is analysed apart");
  EXPECT_TRUE(rep.findings.empty());
}

TEST(FrAnalysis, ManyMembersStoppedAtOneSeqGiveTheFindingsTheyAlwaysGave) {
  // Ranks 0,2,4 queued seq 5 and 6 and started neither; rank 6 (no start times) queued 5;
  // ranks 1,3,5 completed 5 and started 6; rank 7 started 5. Answers as the pairwise rules
  // gave them, before the rules counted a group's states once (tests/fixtures: none).
  const auto stopped = run(4, {State::scheduled, State::scheduled});
  const auto ahead = run(5, {State::started});
  auto rep = analyze_dumps({rank_dump(0, stopped, 8), rank_dump(1, ahead, 8),
                            rank_dump(2, stopped, 8), rank_dump(3, ahead, 8),
                            rank_dump(4, stopped, 8), rank_dump(5, ahead, 8),
                            rank_dump(6, run(4, {State::scheduled}), 8, false),
                            rank_dump(7, run(4, {State::started}), 8)},
                           Options{1});
  std::vector<std::string> kinds;
  for (const auto& f : rep.findings) kinds.push_back(f.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"missing-ranks", "gpu-stopped", "queued-far-past",
                                             "queued-far-past", "queued-far-past",
                                             "queued-far-past", "queued-far-past"}));
  const Finding* m = find(rep, "missing-ranks");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ((std::pair{m->seq, m->ranks}), (std::pair{std::int64_t{6}, std::vector<int>{6, 7}}));
  EXPECT_EQ(m->in_flight, std::vector<int>{7});
  const Finding* g = find(rep, "gpu-stopped");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->seq, 5);
  EXPECT_EQ(g->ranks, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(g->peers, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(g->text,
            "group 0 (default_pg): seq 5 nccl:all_reduce [[1024]] Float: ranks 0,2,4,6 queued it "
            "and never completed it; ranks 1,3,5 completed it; rank 7 started it: the GPU "
            "stopped before this collective");
  std::vector<int> far;
  for (const auto& f : rep.findings)
    if (f.kind == "queued-far-past") {
      far.push_back(f.ranks.at(0));
      EXPECT_EQ((std::tuple{f.seq, f.peers, f.peers_completed}),
                (std::tuple{std::int64_t{5}, std::vector<int>{1, 3, 5}, std::int64_t{5}}));
    }
  EXPECT_EQ(far, (std::vector<int>{0, 2, 4, 6, 7}));
  EXPECT_EQ(rep.suspect_ranks, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(rep.waiting_ranks, (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(rep.in_flight_ranks, std::vector<int>{7});
  ASSERT_EQ(rep.waits.size(), 3u);
  for (const auto& w : rep.waits) {
    EXPECT_EQ(w.seq, 6);
    EXPECT_EQ(w.for_ranks, (std::vector<int>{0, 2, 4, 6, 7}));
  }
}

TEST(FrAnalysis, Describe) {
  Op op;
  op.name = "nccl:_all_gather_base";
  op.in_sizes = {{1024}};
  op.out_sizes = {{4096}};
  op.in_dtypes = op.out_dtypes = {"BFloat16"};
  EXPECT_EQ(describe(3, op), "seq 3 nccl:_all_gather_base [[1024]] -> [[4096]] BFloat16");
  EXPECT_EQ(describe(10, Op{}), "seq 10 (gone from every ring buffer)");
  EXPECT_EQ(rank_list({5, 0, 1, 2, 7, 8, 3}), "0-3,5,7,8");
  EXPECT_EQ(rank_list({1, 2}), "1,2");
}

}  // namespace
}  // namespace gpudiag::fr
