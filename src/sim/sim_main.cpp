// gpudiag-sim: the scale simulator (see sim/simulator.h).
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "sim/simulator.h"
#include "util/error.h"

int main(int argc, char** argv) {
  gpudiag::sim::SimOptions o;
  CLI::App app{
      "gpudiag-sim: N simulated ranks through the check's checkpoints against a real store"};
  app.add_option("--ranks", o.ranks, "simulated ranks")->check(CLI::Range(2, 1000000));
  // Every number checked for range: a negative count, a size below zero or a
  // NaN timeout is one line and exit 2, never a run that hangs or lies.
  app.add_option("--missing", o.missing, "ranks that join but never reach a checkpoint")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--stop", o.stop, "ranks that stop after the communicator checkpoint")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--die", o.die, "ranks that die after the communicator checkpoint")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--threads", o.threads, "threads driving the ranks")->check(CLI::Range(1, 256));
  auto* timeout = app.add_option("--timeout", o.timeout_s,
                                 "seconds a checkpoint waits for absent ranks (default: 2, or "
                                 "one per 40,000 ranks when more)")
                      ->check(CLI::Range(0.001, 3600.0));
  app.add_option("--record-bytes", o.record_bytes, "bytes of each rank's record")
      ->check(CLI::Range(16, 1 << 20));
  app.add_flag("--all-to-all", o.all_to_all,
               "every rank also reads every record (the checkpoint before the digest; --flat)");
  app.add_flag("--flat", o.flat, "one store and one judge (rank 0) for every rank");
  app.add_option("--per-node", o.per_node, "ranks on a node")->check(CLI::Range(1, 1024));
  app.add_option("--group-nodes", o.group_nodes, "nodes under one second-level judge")
      ->check(CLI::Range(2, 4096));
  app.add_option("--missing-leaders", o.missing_leaders, "node leaders that never report")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--dead-judges", o.dead_judges,
                 "second-level judges that die after the communicator checkpoint")
      ->check(CLI::Range(0, 100000));
  app.add_option("--dead-upper-judges", o.dead_upper_judges,
                 "judges of each level above the groups (supergroups) whose host dies after the "
                 "communicator checkpoint (default: as many as --dead-judges)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--workers", o.workers, "processes simulating nodes")->check(CLI::Range(1, 64));
  app.add_option("--store-procs", o.store_procs, "processes serving the group stores")
      ->check(CLI::Range(1, 64));
  app.add_option("--nccl-roots", o.nccl_roots,
                 "the NCCL backend with this many bootstrap roots (GPUDIAG_NCCL_ROOTS): every "
                 "rank must get every root's unique id from the exchange")
      ->check(CLI::Range(0, 64));
  app.add_option("--drift-node", o.drift_node,
                 "node K (host simnode<K>, 0-based) runs another GPU driver: every rank must "
                 "name it in its report")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--sweep", o.sweep, "gpudiag sweep's rounds through the tree (sim_sweep.cpp)");
  app.add_option("--slow-node", o.slow_node, "--sweep: the slow node (default: 2/3 into the pool)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--time-budget", o.time_budget_s, "--sweep: the sweep's --time-budget")
      ->check(CLI::Range(0.001, 86400.0));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {  // one line, exit 2
    std::fprintf(stderr, "gpudiag-sim: %s\n", e.what());
    return 2;
  }
  // A simulated step runs its nodes one after another on a few cores, what a
  // job's nodes do at once: the wait must outlast a step, or the nodes a
  // step reaches last look late to the judges above them.
  if (timeout->count() == 0) o.timeout_s = std::max(2.0, o.ranks / 40000.0);
  if (!(o.timeout_s >= 0.001 && o.timeout_s <= 3600.0)) {  // NaN passes CLI11's Range
    std::fprintf(stderr, "gpudiag-sim: --timeout: give seconds from 0.001 to 3600\n");
    return 2;
  }
  if (o.missing + o.stop + o.die >= o.ranks) {
    std::fprintf(stderr, "gpudiag-sim: --missing, --stop and --die take %d of %d ranks: leave "
                 "some ranks to report\n", o.missing + o.stop + o.die, o.ranks);
    return 2;
  }
  spdlog::set_level(std::getenv("GPUDIAG_SIM_DEBUG") ? spdlog::level::info : spdlog::level::warn);
  if (o.sweep) return gpudiag::sim::sweep_main(o);
  try {
    if (o.nccl_roots > o.ranks) {
      std::fprintf(stderr, "gpudiag-sim: --nccl-roots %d: at most one root a rank (%d)\n",
                   o.nccl_roots, o.ranks);
      return 2;
    }
    auto r = gpudiag::sim::run_simulation(o);
    if (o.nccl_roots > 0)
      std::fprintf(stderr, "sim: NCCL bootstrap roots: %d ids reached %d/%d ranks at the exchange\n",
                   o.nccl_roots, r.roots_ok, r.roots_of);
    if (o.drift_node >= 0)
      std::fprintf(stderr, "sim: \"%s\" in the report of %d/%d ranks at the exchange\n",
                   r.drift_line.c_str(), r.drift_named, r.drift_of);
    std::printf("%s\n", r.summary().c_str());
    const bool roots = o.nccl_roots == 0 || (r.roots_of > 0 && r.roots_ok == r.roots_of);
    const bool drift = o.drift_node < 0 || (r.drift_of > 0 && r.drift_named == r.drift_of);
    return r.named == r.expected && roots && drift ? 0 : 1;
  } catch (const gpudiag::Error& e) {
    std::fprintf(stderr, "gpudiag-sim: %s\n", e.one_line().c_str());
    return 2;
  }
}
