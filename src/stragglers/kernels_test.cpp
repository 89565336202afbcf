// The judge of NCCL kernel times (judge.h, `kernels`) on modelled jobs, as
// PyTorch's flight recorder times them: a collective's kernel on a rank runs
// from the moment its GPU reaches it (ProcessGroupNCCL::collective() records
// the start event on the NCCL stream after that stream waits for the rank's
// compute stream: syncStream) to the moment every member's kernel has joined
// and finished (the end event), FlightRecorder::retire_id's duration. Healthy
// jobs of the hard kind (jittery, stalls, skewed clocks, a rank a little
// late every time) name nobody; a rank whose GPU is late is named, said on
// its GPU, and said once when the host-side records name it too (merged()).
// Also the `d` line and its sharing between nodes.
#include <gtest/gtest.h>

#include <random>

#include "stragglers/judge.h"
#include "stragglers/record.h"
#include "stragglers/render.h"
#include "stragglers/share.h"

namespace gpudiag::stragglers {

namespace kernels_test {

constexpr std::int64_t kMs = 1000000;

struct GpuJob {
  int world = 4;
  std::vector<int> domain;         ///< per rank; empty: one host
  std::vector<std::int64_t> skew;  ///< per rank wall-clock offset (ns)
  double jitter_ms = 0.05;
  double stall_p = 0.0, stall_ms = 0;
  std::int64_t pace = 5 * kMs;
  std::int64_t kernel = kMs / 2;  ///< the collective's own time, once all are in
  std::uint32_t seed = 1;
  std::function<double(int rank, std::int64_t seq)> gpu_late;  ///< ms

  std::vector<std::pair<std::int64_t, Event>> run(Judge& j, std::int64_t n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<std::pair<std::int64_t, Event>> out;
    std::int64_t t = 1700000000000 * kMs / 1000;  // the wall clock: creation times
    for (std::int64_t seq = 1; seq <= n; ++seq) {
      std::vector<std::int64_t> start(static_cast<std::size_t>(world));
      for (int r = 0; r < world; ++r) {
        double late = u(rng) * jitter_ms;
        if (u(rng) < stall_p) late += stall_ms * u(rng);
        if (gpu_late) late += gpu_late(r, seq);
        start[static_cast<std::size_t>(r)] = t + static_cast<std::int64_t>(late * kMs);
      }
      const std::int64_t end = *std::max_element(start.begin(), start.end()) + kernel;
      for (int r = 0; r < world; ++r) {
        const auto i = static_cast<std::size_t>(r);
        Arrival a;
        a.group = 0;
        a.seq = seq;
        a.op = "allreduce";
        a.arrival_ns = t - 3 * kMs + (skew.empty() ? 0 : skew[i]);  // the host enqueued it earlier
        a.kernel_ns = end - start[i];
        for (auto& ev : j.add(r, a)) out.push_back({seq, ev});
      }
      t = end + pace;
    }
    return out;
  }
};

JudgeSettings kernel_settings(const GpuJob& job) {
  JudgeSettings s;
  s.world_size = job.world;
  s.domain_of = job.domain;
  s.kernels = true;
  return s;
}

std::vector<Event> named(const std::vector<std::pair<std::int64_t, Event>>& evs) {
  std::vector<Event> out;
  for (const auto& [seq, ev] : evs)
    if (!ev.recovered) out.push_back(ev);
  return out;
}

TEST(StragglerKernels, HealthyJobsOfTheHardKindNameNobody) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    GpuJob jittery;
    jittery.seed = seed;
    jittery.jitter_ms = 0.5;
    Judge j1(kernel_settings(jittery));
    EXPECT_TRUE(named(jittery.run(j1, 400)).empty()) << "jittery, seed " << seed;

    GpuJob stalls;  // a busy machine: any rank's GPU now and then up to 40 ms behind
    stalls.seed = seed;
    stalls.jitter_ms = 0.5;
    stalls.stall_p = 0.05;
    stalls.stall_ms = 40;
    Judge j2(kernel_settings(stalls));
    for (const auto& e : named(stalls.run(j2, 1000)))
      ADD_FAILURE() << "stalls, seed " << seed << ": rank " << e.episode.rank << " " << e.episode.late_ms
                    << " ms at " << e.episode.share << " from " << e.episode.from_seq;

    GpuJob hosts;  // two hosts whose wall clocks differ by 40 s
    hosts.seed = seed;
    hosts.domain = {0, 0, 1, 1};
    hosts.skew = {0, 0, 40000 * kMs, 40000 * kMs};
    Judge j3(kernel_settings(hosts));
    EXPECT_TRUE(named(hosts.run(j3, 400)).empty()) << "skewed clocks, seed " << seed;

    GpuJob little;  // rank 1's GPU always 0.1 ms behind: costs too little
    little.seed = seed;
    little.gpu_late = [](int r, std::int64_t) { return r == 1 ? 0.1 : 0.0; };
    Judge j4(kernel_settings(little));
    EXPECT_TRUE(named(little.run(j4, 400)).empty()) << "a little late, seed " << seed;
  }
}

TEST(StragglerKernels, ARankWhoseGpuIsLateIsNamedOnItsGpuAndRecovers) {
  GpuJob job;
  job.domain = {0, 0, 1, 1};
  job.skew = {0, 0, 40000 * kMs, 40000 * kMs};
  job.gpu_late = [](int r, std::int64_t seq) { return r == 2 && seq > 50 && seq <= 150 ? 20.0 : 0.0; };
  Judge j(kernel_settings(job));
  const auto evs = job.run(j, 250);
  ASSERT_EQ(evs.size(), 2u);
  const auto& [at, ev] = evs[0];
  EXPECT_FALSE(ev.recovered);
  EXPECT_EQ(ev.episode.rank, 2);
  EXPECT_TRUE(ev.episode.gpu);
  EXPECT_EQ(ev.episode.where, "compute");
  EXPECT_LE(at, 50 + 20);
  EXPECT_NEAR(ev.episode.late_ms, 20, 1);
  EXPECT_TRUE(evs[1].second.recovered);
  EXPECT_FALSE(j.names(2, 0));
  const std::string line = event_line(ev, 20, nullptr);
  EXPECT_NE(line.find("straggler: rank 2 arrives 20 ms late on its GPU at "), std::string::npos) << line;
  EXPECT_NE(line.find("where: compute, on its GPU (NCCL's kernel times"), std::string::npos) << line;
}

TEST(StragglerKernels, ARankBothJudgesNameIsSaidOnceInTheSummary) {
  Episode host;
  host.rank = 2;
  host.op = "all_reduce";
  Episode gpu = host;
  gpu.gpu = true;
  gpu.where = "compute";
  Episode other = gpu;
  other.rank = 3;
  JudgeSummary h, k;
  h.groups = {{0, 4, 100}};
  h.episodes = {host};
  k.groups = {{0, 4, 90}};
  k.episodes = {gpu, other};
  const auto m = merged(h, k);
  ASSERT_EQ(m.episodes.size(), 2u);
  EXPECT_FALSE(m.episodes[0].gpu);
  EXPECT_EQ(m.episodes[1].rank, 3);
  EXPECT_EQ(m.kernels, 90);
  const auto lines = summary_lines(m, Heard{}, nullptr);
  EXPECT_NE(lines[0].find("100 collectives judged in 1 group, 90 by their NCCL kernel times"),
            std::string::npos) << lines[0];
  EXPECT_NE(lines[2].find("rank 3 arrived 0.0 ms late on its GPU"), std::string::npos) << lines[2];
  EXPECT_EQ(summary_json(m, Heard{}, nullptr)["named"][1]["source"], "nccl_kernels");
  EXPECT_EQ(summary_json(m, Heard{}, nullptr)["named"][0]["source"], "host");
}

TEST(StragglerKernels, TheKernelLineIsReadBoundedAndShared) {
  const auto d = parse_datagram("r 1 0\nd 0 7 allreduce 1700000000000000000 2500000\n"
                                "d 0 8 allreduce 1700000000000000000 0\n"          // no kernel time
                                "d 0 9 allreduce 1700000000000000000 3600000000001\n"  // over an hour
                                "d 0 10 all-reduce 1 5\n"                           // not an op name
                                "d 0 11 allreduce 1 5 6\n",                         // a field too many
                                2, 4);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->arrivals.size(), 1u);
  EXPECT_EQ(d->invalid, 4);
  EXPECT_EQ(d->arrivals[0].seq, 7);
  EXPECT_EQ(d->arrivals[0].kernel_ns, 2500000);
  EXPECT_EQ(d->arrivals[0].end_ns, 0);
  Outbox box;
  box.add(1, d->arrivals[0]);
  const auto text = box.publish(3, "node-3", false);
  EXPECT_NE(text.find("\nd 1 0 7 allreduce 1700000000000000000 2500000\n"), std::string::npos) << text;
  const auto back = parse_share(text, 3, 2, 8);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->batches.size(), 1u);
  ASSERT_EQ(back->batches[0].records.size(), 1u);
  EXPECT_EQ(back->batches[0].records[0].arrival.kernel_ns, 2500000);
  EXPECT_EQ(back->invalid, 0);
}

}  // namespace kernels_test

}  // namespace gpudiag::stragglers
