// See simulator.h. Written by hand: no library simulates a job's control plane.
#include "sim/simulator.h"

#include <atomic>
#include <cstdio>
#include <set>

#include "checks/record.h"
#include "checks/verdict.h"
#include "store/job_token.h"
#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "sim/sim_common.h"
#include "sim/sim_limits.h"
#include "sim/sim_tree.h"
#include "util/error.h"

namespace gpudiag::sim {

namespace {

constexpr const char* kToken = "gpudiag-sim";

/// The store, as `gpudiag launch` serves it, in a child process: it writes
/// its port, serves until released, then writes its peak RSS in KiB.
Child store_process(int world_size, const std::string& secret) {
  return Child([=](int out, int control) {
    TcpStoreServerOptions o;
    o.bind_host = "127.0.0.1";
    o.token = kToken;
    o.world_size = world_size;
    o.secret = secret;
    try {
      TcpStoreServer server(o);
      write_line(out, std::to_string(server.port()));
      wait_released(control);
    } catch (...) {
      write_line(out, "-1");
      throw;
    }
    write_line(out, std::to_string(peak_rss_kib()));
  });
}

}  // namespace

std::string SimResult::summary() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "sim: %d ranks, %d checkpoints, %.1f s, store peak RSS %.0f MiB (all stores %.0f "
                "MiB), bytes through the store %llu, missing named: %d/%d",
                ranks, checkpoints, seconds, store_peak_rss_mib, all_stores_rss_mib,
                static_cast<unsigned long long>(bytes), named, expected);
  return line;
}

SimResult run_simulation(const SimOptions& o) { return o.flat ? run_flat(o) : run_tree(o); }

/// One store and one judge (rank 0) for every rank.
SimResult run_flat(const SimOptions& o) {
  const int n = o.ranks;
  if (o.missing + o.stop + o.die >= n)
    throw UsageError("gpudiag-sim: --missing + --stop + --die must leave rank 0 and others",
                     "lower them");
  // The faulty ranks, spread over the job (never rank 0, the judge).
  std::vector<Fate> fate(n, Fate::fine);
  const int faulty = o.missing + o.stop + o.die;
  for (int i = 0; i < faulty; ++i) {
    const int r = 1 + static_cast<int>(static_cast<long long>(i) * (n - 1) / faulty);
    fate[r] = i < o.missing ? Fate::missing : i < o.missing + o.stop ? Fate::stop : Fate::die;
  }
  const auto drifting =
      drift_ranks(o, (n + 7) / 8, 8, [&](int r) { return fate[r] != Fate::missing; });
  {
    // This process holds a connection per rank, and the store one per rank.
    const MachineLimits m = read_machine_limits();
    std::fprintf(stderr, "sim: this machine: %s\n", describe(m).c_str());
    check_machine_limits(m, n, n, std::to_string(n) + " ranks on one store", "");
  }
  // As gpudiag launch on one node: a random job secret, proven at each handshake.
  const std::string secret = random_secret();
  Child store = store_process(n, secret);
  const int port = std::stoi("0" + store.read_line());
  if (port <= 0) throw Error(ExitCode::broken, "gpudiag-sim: the store did not start");
  const auto t0 = std::chrono::steady_clock::now();

  // Every rank joins the store, as world_setup does.
  std::vector<std::unique_ptr<Plane>> planes(n);
  parallel_for(n, o.threads, [&](int r) {
    auto client = std::make_unique<TcpStoreClient>("127.0.0.1", port, kToken,
                                                   Deadline::after_seconds(60), secret,
                                                   static_cast<std::uint32_t>(r));
    planes[r] = make_store_plane(std::move(client),
                                 {r, n, r % 8, "simnode" + std::to_string(r / 8), 100000 + r},
                                 Deadline::after_seconds(60));
  });
  const double join_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "sim: %d ranks joined the store in %.1f s\n", n, join_s);
  TcpStoreClient launcher("127.0.0.1", port, kToken, Deadline::after_seconds(10), secret);
  std::vector<std::string> records(n);
  for (int r = 0; r < n; ++r)
    records[r] = encode(sim_record(r, n, o.record_bytes, o.nccl_roots, 8, o.drift_node));

  SimResult res;
  res.ranks = n;
  const std::string drift = drifting.empty() ? "" : sim_drift_line(o.drift_node, drifting);
  res.drift_line = drift;
  std::vector<int> live, everyone;
  for (int r = 0; r < n; ++r) live.push_back(r);
  if (o.all_to_all) everyone = live;
  std::vector<std::optional<RankRecord>> table(n);
  // Only the missing ranks each rank heard of are kept: a Gathered holds a
  // slot per rank, fine in a rank's own process, n^2 for n ranks in this one.
  std::vector<std::vector<int>> last(n);
  int cp = 0;
  for (const char* name : kTreeCheckpoints) {
    auto arrives = [&](int r) {
      return fate[r] == Fate::fine || (fate[r] != Fate::missing && cp <= kLastForFaulty);
    };
    if (cp == kLastForFaulty + 1) {
      parallel_for(n, o.threads, [&](int r) {
        if (fate[r] == Fate::stop || fate[r] == Fate::die) planes[r]->note_phase("all-reduce");
      });
      for (int r = 0; r < n; ++r)
        if (fate[r] == Fate::die)
          publish_failure(launcher,
                          "rank " + std::to_string(r) + " [simnode" + std::to_string(r / 8) + "-" +
                              std::to_string(r % 8) + "] (pid " + std::to_string(100000 + r) +
                              ") was killed by SIGKILL (seen by gpudiag-sim)",
                          Deadline::after_seconds(10), FailureKind::died, r);
    }
    const bool exchange = cp == 0;
    if (cp == 1) {  // as the check: ids and fingerprints only in exchange records
      for (auto& rec : records) rec = after_exchange(rec);
    }
    // The check's NCCL ranks read rank 0's record at the exchange (its id).
    std::vector<int> need = everyone;
    if (exchange && o.nccl_roots > 0 && need.empty()) need = {0};
    Review review = [&](const Gathered& g) {
      std::vector<std::optional<RankRecord>> now(n);
      for (int r = 0; r < n; ++r)
        if (g.records[r]) now[r] = decode(*g.records[r]);
      return encode_review(review_table(now, table, g.missing, exchange));
    };
    // Every rank publishes, rank 0 judges, then the others read the digest.
    parallel_for(n, o.threads, [&](int r) {
      if (r != 0 && arrives(r))
        publish_record(*planes[r], name, records[r], need);
    });
    const auto tj = std::chrono::steady_clock::now();
    std::atomic<int> roots_ok{0}, roots_of{0}, drift_named{0}, drift_of{0};
    auto got_ids = [&](const Gathered& g, int r) {
      if (exchange && !drift.empty()) {  // its report names the drifting node
        ++drift_of;
        if (sim_names_drift(g, drift, r)) ++drift_named;
      }
      if (!exchange || o.nccl_roots <= 0) return;
      ++roots_of;
      if (sim_got_root_ids(g, decode(records[r]))) ++roots_ok;
    };
    {
      const Gathered g0 =
          planes[0]->gather_all(name, records[0], Deadline::after_seconds(o.timeout_s), live, {},
                                review);
      last[0] = g0.missing;
      got_ids(g0, 0);
    }
    const double judged_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - tj).count();
    parallel_for(n, o.threads, [&](int r) {
      if (r == 0 || !arrives(r)) return;
      const Gathered g = planes[r]->gather_all(name, records[r],
                                               Deadline::after_seconds(o.timeout_s), live, need,
                                               review);
      last[r] = g.missing;
      got_ids(g, r);
    });
    res.roots_ok += roots_ok;
    res.roots_of += roots_of;
    res.drift_named += drift_named;
    res.drift_of += drift_of;
    std::fprintf(stderr, "sim: checkpoint %s done at %.1f s (rank 0 judged in %.1f s)\n", name,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 judged_s);
    live.clear();
    std::set<int> gone(last[0].begin(), last[0].end());
    for (int r = 0; r < n; ++r)
      if (!gone.count(r)) live.push_back(r);
    ++cp;
  }
  res.checkpoints = cp;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Named: an absent rank every rank still there names as missing at the end.
  for (int a = 0; a < n; ++a) {
    if (fate[a] == Fate::fine) continue;
    ++res.expected;
    bool everywhere = true;
    for (int r = 0; r < n && everywhere; ++r) {
      if (fate[r] != Fate::fine) continue;
      const auto& m = last[r];
      everywhere = std::binary_search(m.begin(), m.end(), a);
    }
    if (everywhere) ++res.named;
  }
  for (const auto& p : planes) res.bytes += p->bytes_moved();
  planes.clear();
  store.release();
  res.store_peak_rss_mib = res.all_stores_rss_mib = std::stod("0" + store.read_line()) / 1024.0;
  return res;
}

}  // namespace gpudiag::sim
