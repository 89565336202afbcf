// The link test's measurement (link_run.h): the schedule of turns, and one
// pair's bounded, checked, timed exchanges. The verdict is in links.h.
#include "checks/link_run.h"

#include <algorithm>
#include <cmath>

#include "checks/links.h"
#include "checks/verify.h"
#include "util/error.h"

namespace gpudiag {

namespace {

struct LinkBuffers {
  std::vector<float> host;  ///< this rank's pattern, then what arrived
  float *out = nullptr, *in = nullptr, *flag_out = nullptr, *flag_in = nullptr;
  std::size_t count = 0;
};

/// One pair's measurement from this rank's end. The first exchange is
/// checked element by element and timed; from its time the lower rank
/// picks how many more exchanges fit in a quarter of --timeout (at least
/// one, at most --warmup - 1 + --iters) and tells the other, so a slow link
/// is measured, not timed out, and both ends do the same number.
void measure_link(LinkRun& r, int peer, LinkBuffers& b) {
  auto t_first = Deadline::Clock::now();
  r.comm.send_recv(peer, b.out, b.in, b.count, Deadline::after_seconds(r.timeout_s));
  const double first = seconds_since(t_first);
  r.workspace.download(b.host.data(), b.in, b.count);
  for (std::size_t i = 0; i < b.count; ++i)
    if (b.host[i] != contribution(peer, i))
      throw Error(ExitCode::broken,
                  "data from rank " + std::to_string(peer) + " arrived wrong at element " +
                      std::to_string(i),
                  "suspect the link between this rank and rank " + std::to_string(peer));
  const int wanted = std::max(0, r.warmup - 1) + std::max(1, r.iters);
  const double budget = r.timeout_s / 4;
  // Clamped as a double: budget / first can exceed any int. A count below
  // 2^24 is exact in a float.
  const auto fit = static_cast<float>(
      std::clamp(std::floor(budget / std::max(first, 1e-9)), 1.0, static_cast<double>(wanted)));
  r.workspace.upload(b.flag_out, &fit, 1);
  r.comm.send_recv(peer, b.flag_out, b.flag_in, 1, Deadline::after_seconds(r.timeout_s));
  float theirs = 0;
  r.workspace.download(&theirs, b.flag_in, 1);
  const float agreed = r.me.rank < peer ? fit : theirs;
  if (!(agreed >= 1 && agreed <= static_cast<float>(wanted) && agreed == std::floor(agreed)))
    throw Error(ExitCode::broken,
                "the exchange count from rank " + std::to_string(peer) + " arrived as " +
                    std::to_string(agreed) + ", not a whole number from 1 to " +
                    std::to_string(wanted),
                "suspect the link between this rank and rank " + std::to_string(peer) +
                    ", or ranks running different gpudiag options");
  const int more = static_cast<int>(agreed);
  // Timed exchanges first claim what fits; warm-ups get the rest.
  const int timed = std::min(more, std::max(1, r.iters));
  for (int i = 0; i < more - timed; ++i)
    r.comm.send_recv(peer, b.out, b.in, b.count, Deadline::after_seconds(r.timeout_s));
  std::vector<double> times;
  // Each exchange timed on its own (by the device's events on NCCL, so the
  // host's polling is not in it), for the median below.
  for (int i = 0; i < timed; ++i)
    times.push_back(r.comm.send_recv_timed(peer, b.out, b.in, b.count, 1, Deadline::after_seconds(r.timeout_s)));
  // The median: one exchange delayed by the scheduler does not make a link look slow.
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  r.me.links[peer] = times[times.size() / 2];
}

}  // namespace

/// The link test (links.h). Each turn opens with a barrier: every round in
/// `rounds` mode, every pair of a round in `serial` mode (so on a host with
/// fewer CPUs than ranks the pair measured is not starved by the others).
/// A pair's measurement is bounded (measure_link), so the barrier waits at
/// most r.turn_wait_factor x --timeout for the slowest pair of the turn before.
void run_link_test(LinkRun& r) {
  const int n = r.n;
  const bool serial = r.serial;
  r.me.link_schedule = serial ? "serial" : "rounds";
  const std::size_t count = std::max<std::size_t>(1, r.link_bytes / sizeof(float));
  LinkBuffers b;
  b.host.resize(count);
  fill_contribution(b.host.data(), count, r.me.rank);
  b.out = r.workspace.allocate(count);
  b.in = r.workspace.allocate(count);
  b.flag_out = r.workspace.allocate(1);
  b.flag_in = r.workspace.allocate(1);
  b.count = count;
  r.workspace.upload(b.out, b.host.data(), count);
  r.comm.open_links(Deadline::after_seconds(r.timeout_s));
  r.me.links.assign(n, 0.0);
  r.me.link_bytes = static_cast<double>(count * sizeof(float));
  const auto turn_deadline = [&] {
    return Deadline::after_seconds(r.turn_wait_factor * r.timeout_s);
  };
  for (int round = 0; round < link_rounds(n); ++round) {
    const int peer = link_partner(r.me.rank, round, n);
    if (!serial) {
      r.comm.barrier(turn_deadline());
      if (peer >= 0) measure_link(r, peer, b);
      continue;
    }
    for (int q = 0; q < n; ++q) {
      const int p = link_partner(q, round, n);
      if (p < q) continue;  // resting, or the pair was met from its lower rank
      r.comm.barrier(turn_deadline());
      if (peer >= 0 && q == std::min(r.me.rank, peer)) measure_link(r, peer, b);
    }
  }
  for (float* f : {b.out, b.in, b.flag_out, b.flag_in}) r.workspace.release(f);
}

}  // namespace gpudiag
