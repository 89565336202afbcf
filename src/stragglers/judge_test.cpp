// The judge on modelled jobs: healthy ones of the hard kind (jittery, a
// loaded machine's long random stalls, a rank systematically a little late,
// two hosts with skewed clocks, two ranks) name nobody; a rank late in its
// data loading, its compute, or one collective's input is named within 20
// collectives of the onset, and no other; it recovers; memory stays bounded.
#include "stragglers/judge.h"

#include <gtest/gtest.h>

#include <random>

namespace gpudiag::stragglers {

namespace judge_test {

constexpr std::int64_t kMs = 1000000;

/// A DDP-like job: per step a bucket all-reduce (after a forward) and a
/// plain all-reduce; `extra(rank, seq)` adds lateness to an arrival and
/// `load`/`comp` say where (before the forward, or after it).
struct Job {
  int world = 4;
  std::vector<int> domain;              ///< per rank; empty: one host
  std::vector<std::int64_t> skew;       ///< per rank clock offset (ns)
  double jitter_ms = 0.05;              ///< uniform per arrival
  double stall_p = 0.0, stall_ms = 0;   ///< a loaded machine's random stall
  std::int64_t pace = 2 * kMs;          ///< between collectives
  std::uint32_t seed = 1;
  std::function<double(int rank, std::int64_t seq, bool& in_data)> extra;
  /// Per arrival, how long the rank says it waited for a CPU (ms; 0: none).
  std::function<double(int rank, std::int64_t seq)> queued;

  /// Feeds `n` collectives; every event, with the collective it came at.
  std::vector<std::pair<std::int64_t, Event>> run(Judge& j, std::int64_t n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<std::pair<std::int64_t, Event>> out;
    std::int64_t t = 1000 * kMs;
    std::vector<std::int64_t> last_end(static_cast<std::size_t>(world), t);
    for (std::int64_t seq = 0; seq < n; ++seq) {
      std::vector<std::int64_t> a(static_cast<std::size_t>(world)), f(a.size());
      for (int r = 0; r < world; ++r) {
        double late = u(rng) * jitter_ms;
        if (u(rng) < stall_p) late += stall_ms * u(rng);
        bool in_data = false;
        if (extra) late += extra(r, seq, in_data);
        const auto lat = static_cast<std::int64_t>(late * kMs);
        const auto i = static_cast<std::size_t>(r);
        // The forward starts after the data (even collectives are DDP's buckets).
        f[i] = seq % 2 == 0 ? last_end[i] + pace / 4 + (in_data ? lat : 0) : 0;
        a[i] = t + lat;
      }
      const std::int64_t end = *std::max_element(a.begin(), a.end()) + 100000;
      for (int r = 0; r < world; ++r) {
        const auto i = static_cast<std::size_t>(r);
        const std::int64_t s = skew.empty() ? 0 : skew[i];
        Arrival ar{0, seq, seq % 2 == 0 ? "ddp_bucket" : "all_reduce", a[i] + s, end + s,
                   f[i] ? f[i] + s : 0,
                   queued ? static_cast<std::int64_t>(queued(r, seq) * kMs) : 0};
        for (auto& ev : j.add(r, ar)) out.push_back({seq, ev});
        last_end[i] = end;
      }
      t = end + pace;
    }
    return out;
  }
};

JudgeSettings settings(const Job& job) {
  JudgeSettings s;
  s.world_size = job.world;
  s.domain_of = job.domain;
  return s;
}

TEST(StragglerJudge, HealthyJittery) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    Job job;
    job.seed = seed;
    job.jitter_ms = 1.0;  // half the pace
    Judge j(settings(job));
    EXPECT_TRUE(job.run(j, 1000).empty()) << seed;
    EXPECT_EQ(j.summary().groups.at(0).judged, 1000);
  }
}

TEST(StragglerJudge, HealthyOnALoadedMachine) {
  // A rank descheduled now and then for up to 40 ms (20 paces), any rank.
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    Job job;
    job.seed = seed;
    job.jitter_ms = 0.5;
    job.stall_p = 0.05;
    job.stall_ms = 40;
    Judge j(settings(job));
    const auto events = job.run(j, 1000);
    for (const auto& [seq, e] : events)
      ADD_FAILURE() << seed << " at " << seq << ": rank " << e.episode.rank << " "
                    << e.episode.late_ms << " ms " << e.episode.share << (e.recovered ? " recovered" : "");
  }
}

TEST(StragglerJudge, ARankAlwaysALittleLateCostsTooLittleToName) {
  // Rank 0 prints a line every step: 30 us late at every bucket, pace 1 ms.
  Job job;
  job.pace = kMs;
  job.jitter_ms = 0.01;
  job.extra = [](int r, std::int64_t seq, bool&) { return r == 0 && seq % 2 == 0 ? 0.03 : 0.0; };
  Judge j(settings(job));
  EXPECT_TRUE(job.run(j, 1000).empty());
}

std::vector<std::pair<std::int64_t, Event>> slow_job(int world, const char* where,
                                                     std::vector<int> domain = {},
                                                     std::vector<std::int64_t> skew = {}) {
  Job job;
  job.world = world;
  job.domain = std::move(domain);
  job.skew = std::move(skew);
  const std::string w = where;
  job.extra = [w, world](int r, std::int64_t seq, bool& in_data) {
    if (r != world - 2 || seq < 100 || seq >= 300) return 0.0;
    in_data = w == "data";
    // data and compute delay the bucket; "collective" only the plain all-reduce.
    const bool at = w == "collective" ? seq % 2 == 1 : seq % 2 == 0;
    return at ? 30.0 : 0.0;
  };
  Judge j(settings(job));
  auto events = job.run(j, 500);
  return events;
}

void expect_named_then_recovered(const std::vector<std::pair<std::int64_t, Event>>& events,
                                 int rank, const std::string& where) {
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(events[0].second.recovered);
  EXPECT_EQ(events[0].second.episode.rank, rank);
  EXPECT_LE(events[0].first, 100 + 20);  // within 20 collectives of the onset
  EXPECT_GE(events[0].first, 100);
  EXPECT_NEAR(events[0].second.episode.late_ms, 30, 1);
  EXPECT_EQ(events[0].second.episode.where, where);
  EXPECT_TRUE(events[1].second.recovered);
  EXPECT_EQ(events[1].second.episode.rank, rank);
  EXPECT_GE(events[1].first, 300);
  EXPECT_LE(events[1].first, 300 + 20);
}

TEST(StragglerJudge, SlowDataLoadingIsNamedWithItsPlace) {
  expect_named_then_recovered(slow_job(4, "data"), 2, "data loading");
}

TEST(StragglerJudge, SlowComputeIsNamedWithItsPlace) {
  expect_named_then_recovered(slow_job(4, "compute"), 2, "compute");
}

TEST(StragglerJudge, OneCollectivesInputOnly) {
  expect_named_then_recovered(slow_job(4, "collective"), 2, "compute");
}

TEST(StragglerJudge, TwoRanks) {
  expect_named_then_recovered(slow_job(2, "compute"), 0, "compute");
}

TEST(StragglerJudge, HostsClocksAreNeverComparedRaw) {
  // Ranks 2,3 on a host whose clock is 5 s ahead: healthy names nobody,
  // and rank 2's delay is still its own.
  const std::vector<int> domain{0, 0, 1, 1};
  const std::vector<std::int64_t> skew{0, 0, 5000 * kMs, 5000 * kMs};
  {
    Job job;
    job.domain = domain;
    job.skew = skew;
    Judge j(settings(job));
    EXPECT_TRUE(job.run(j, 500).empty());
  }
  expect_named_then_recovered(slow_job(4, "compute", domain, skew), 2, "compute");
}

TEST(StragglerJudge, GroupsAreJudgedApart) {
  JudgeSettings s;
  s.world_size = 4;
  Judge j(s);
  j.declare_group({1, {0, 1}});
  std::vector<Event> events;
  std::int64_t t = kMs;
  for (std::int64_t seq = 0; seq < 60; ++seq, t += 2 * kMs) {
    for (int r = 0; r < 4; ++r)
      for (auto& e : j.add(r, {0, seq, "all_reduce", t + r * 1000, t + 2 * kMs, 0})) events.push_back(e);
    for (int r = 0; r < 2; ++r) {
      const std::int64_t late = r == 1 ? 20 * kMs : 0;
      for (auto& e : j.add(r, {1, seq, "broadcast", t + late, t + late + 1000, 0})) events.push_back(e);
    }
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].episode.group, 1);
  EXPECT_EQ(events[0].episode.rank, 1);
  EXPECT_EQ(events[0].episode.members, (std::vector<int>{0, 1}));
}

TEST(StragglerJudge, MissingRecordsAreForgottenBounded) {
  JudgeSettings s;
  s.world_size = 4;
  Judge j(s);
  for (std::int64_t seq = 0; seq < 10000; ++seq)
    for (int r = 0; r < 3; ++r) j.add(r, {0, seq, "all_reduce", 1000 + seq, 0, 0});  // rank 3 silent
  const auto sum = j.summary();
  EXPECT_EQ(sum.groups.at(0).judged, 0);
  EXPECT_EQ(sum.incomplete, 10000 - s.max_pending);
  // A stranger's records for unknown groups and ranks are counted, not kept.
  j.add(7, {0, 1, "x", 1, 0, 0});
  j.add(0, {99, 1, "x", 1, 0, 0});
  EXPECT_EQ(j.summary().untracked, 2);
}

// A busy machine keeps one rank after another off its cores for a stretch
// (a 2-core machine with 4 ranks and other work): the rank off its cores
// arrives 15 ms late at half the collectives of its stretch, and says it
// waited that long on the run queue. Nobody is named; the same lateness
// without the wait is named (what the bar alone would do).
std::vector<std::pair<std::int64_t, Event>> contention(bool told) {
  Job job;
  job.extra = [](int r, std::int64_t seq, bool&) {
    return (seq / 24) % 4 == r && seq % 2 == 0 ? 15.0 : 0.0;
  };
  if (told)
    job.queued = [](int r, std::int64_t seq) {
      const double base = 0.2 * static_cast<double>((seq + r) % 3);  // everyone waits a little
      return base + ((seq / 24) % 4 == r && seq % 2 == 0 ? 15.0 : 0.0);
    };
  Judge j(settings(job));
  return job.run(j, 400);
}

TEST(StragglerJudge, RanksKeptOffTheirCoresInTurnNameNobody) {
  EXPECT_TRUE(contention(true).empty());
  EXPECT_FALSE(contention(false).empty());
}

TEST(StragglerJudge, ARankThatSleepsOnABusyMachineIsStillNamed) {
  Job job;
  job.queued = [](int r, std::int64_t seq) { return 0.3 * static_cast<double>((seq * 7 + r) % 5); };
  job.extra = [&job](int r, std::int64_t seq, bool&) {
    // Everyone's CPU wait shows in its arrival; rank 1 also sleeps 10 ms.
    return job.queued(r, seq) + (r == 1 && seq >= 40 ? 10.0 : 0.0);
  };
  Judge j(settings(job));
  const auto events = job.run(j, 200);
  ASSERT_FALSE(events.empty());
  for (const auto& [seq, ev] : events) EXPECT_EQ(ev.episode.rank, 1);
  EXPECT_LE(events.front().first, 40 + 20);
}

}  // namespace judge_test

}  // namespace gpudiag::stragglers
