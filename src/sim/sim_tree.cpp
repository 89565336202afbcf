// The simulator's tree shape (see simulator.h): the plan of faults, and the
// run: processes for the root, the stores of the judges of each level
// (sim_judges.cpp) and blocks of nodes (sim_nodes.cpp), real Relays at every
// level, and faults at every level. Written by hand: no library simulates a
// job's control plane.
#include "sim/sim_tree.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "checks/tree_review.h"
#include "store/job_token.h"
#include "store/memory_store.h"
#include "tree/relay.h"
#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "sim/sim_common.h"
#include "sim/sim_limits.h"
#include "sim/sim_traffic.h"
#include "util/error.h"

namespace gpudiag::sim {

Plan make_plan(const SimOptions& o) {
  Plan p;
  p.layout = {o.ranks, o.per_node, o.group_nodes};
  const auto& L = p.layout;
  p.fate.assign(o.ranks, Fate::fine);
  // Judges that die, with their hosts: --dead-judges groups' and
  // --dead-upper-judges of each level above (never the first: node 0 is the root's).
  for (int level = 1; level <= L.levels(); ++level) {
    const int upper = o.dead_upper_judges < 0 ? o.dead_judges : o.dead_upper_judges;
    const int n = L.judges(level), dead = level == 1 ? o.dead_judges : upper;
    for (int i = 0; i < dead && i + 1 < n; ++i) {
      const int j = 1 + static_cast<int>(static_cast<long long>(i) * (n - 1) / std::max(1, dead));
      p.dead_hosts.insert(L.nodes_of(level, j).first);
    }
  }
  auto is_judge = [&](int k) {
    return k == 0 || (L.grouped() && k % L.group_nodes == 0);
  };
  for (int i = 0; i < o.missing_leaders; ++i) {
    int k = 1 + static_cast<int>(static_cast<long long>(2 * i + 1) * (L.nodes() - 1) /
                                 (2 * std::max(1, o.missing_leaders)));
    while (k < L.nodes() - 1 && is_judge(k)) ++k;
    if (!is_judge(k)) p.missing_leaders.insert(k);
  }
  const int faulty = o.missing + o.stop + o.die;
  for (int i = 0; i < faulty; ++i) {
    const int r = 1 + static_cast<int>(static_cast<long long>(i) * (o.ranks - 1) / faulty);
    p.fate[r] = i < o.missing ? Fate::missing : i < o.missing + o.stop ? Fate::stop : Fate::die;
  }
  return p;
}

std::vector<int> drift_ranks(const SimOptions& o, int nodes, int per_node,
                             const std::function<bool(int)>& reports) {
  if (o.drift_node < 0) return {};
  if (o.drift_node >= nodes)
    throw UsageError("--drift-node " + std::to_string(o.drift_node) + ": the job has nodes 0-" +
                         std::to_string(nodes - 1),
                     "give a node of the job");
  std::vector<int> out;
  const int first = o.drift_node * per_node;
  for (int r = first; r < std::min(o.ranks, first + per_node); ++r)
    if (reports(r)) out.push_back(r);
  if (out.empty())
    throw UsageError("--drift-node " + std::to_string(o.drift_node) +
                         ": none of its ranks "
                         "reaches the exchange (--missing, --missing-leaders)",
                     "give another node");
  return out;
}

}  // namespace gpudiag::sim

namespace gpudiag::sim {

namespace {

/// "bytes A B ..." -> numbers.
std::vector<long long> numbers_after(const std::string& line, const std::string& tag) {
  std::vector<long long> out;
  if (line.rfind(tag, 0) != 0) return out;
  std::istringstream in(line.substr(tag.size()));
  for (long long v; in >> v;) out.push_back(v);
  return out;
}

/// Checks the machine gives the busiest process of the run the descriptors
/// it needs, and says on stderr what it has (sim_limits.h).
void check_tree_limits(const Plan& p, const SimOptions& o) {
  const auto& L = p.layout;
  const int units = L.grouped() ? L.groups() : L.nodes();
  const int workers = std::max(1, std::min(o.workers, units));
  const long long per_unit = L.grouped() ? L.group_nodes : 1;
  // A leader's connection to its group's store, and, under a lost judge, to
  // the stores above it (a group's worth of leaders per lost judge and level).
  const int upper = o.dead_upper_judges < 0 ? o.dead_judges : o.dead_upper_judges;
  const long long lost = static_cast<long long>(L.group_nodes) * std::max(1, L.levels()) *
                         (1 + o.dead_judges + upper);
  long long fds = (units + workers - 1) / workers * per_unit + lost;
  // A store process: per judge its listener, epoll and wake-up, a connection
  // per child (and its lost children's), its own and those up.
  for (int level = 1; level <= L.levels(); ++level) {
    const int n = L.judges(level), procs = std::max(1, std::min(o.store_procs, n));
    fds = std::max(fds, (n + procs - 1) / procs * (L.group_nodes + 8 + L.levels()) + lost);
  }
  const long long root = L.judges(L.levels()) + 2LL * L.group_nodes + 16;
  fds = std::max(fds, root + lost);
  const MachineLimits m = read_machine_limits();
  std::fprintf(stderr, "sim: this machine: %s\n", describe(m).c_str());
  check_machine_limits(m, fds, std::max<long long>(L.group_nodes + 16, root),
                       std::to_string(o.ranks) + " ranks in " + std::to_string(workers) +
                           " processes of nodes",
                       workers < units ? "give more --workers (now " + std::to_string(workers) + ")"
                                       : "");
}

}  // namespace

SimResult run_tree(const SimOptions& o) {
  const Plan p = make_plan(o);
  const auto& L = p.layout;
  if (o.missing + o.stop + o.die >= o.ranks)
    throw UsageError("gpudiag-sim: --missing + --stop + --die must leave rank 0 and others",
                     "lower them");
  const auto drifting =
      drift_ranks(o, L.nodes(), L.per_node, [&](int r) { return p.arrives(r, 0); });
  check_tree_limits(p, o);
  const std::string secret = random_secret();
  const auto t0 = std::chrono::steady_clock::now();

  Child root([&](int out, int control) { root_process(p, o, secret, out, control); });
  Ports ports;
  ports.root = std::stoi("0" + root.read_line());
  if (ports.root <= 0) throw Error(ExitCode::broken, "gpudiag-sim: the root's store did not start");
  // The judges' stores, the top level first (each judge joins its parent's
  // store as it starts), in processes of a block of judges each.
  ports.level.resize(static_cast<std::size_t>(L.levels()) + 1);
  std::vector<std::unique_ptr<Child>> group_procs;
  for (int level = L.levels(); level >= 1; --level) {
    const int n = L.judges(level);
    const int procs = std::max(1, std::min(o.store_procs, n));
    std::vector<int>& got = ports.level[static_cast<std::size_t>(level)];
    for (int i = 0; i < procs; ++i) {
      const int j0 = i * n / procs, j1 = (i + 1) * n / procs;
      group_procs.push_back(std::make_unique<Child>([&, level, j0, j1](int out, int control) {
        judges_process(p, o, secret, ports, level, j0, j1, out, control);
      }));
      for (long long port : numbers_after(" " + group_procs.back()->read_line(), " "))
        got.push_back(static_cast<int>(port));
    }
    if (static_cast<int>(got.size()) != n)
      throw Error(ExitCode::broken, "gpudiag-sim: a judge's store did not start");
  }

  // Workers take whole groups (or, ungrouped, blocks of nodes), so a group's
  // nodes move through a checkpoint together.
  const int units = L.grouped() ? L.groups() : L.nodes();
  const int workers = std::max(1, std::min(o.workers, units));
  std::vector<std::unique_ptr<Child>> worker_procs;
  StepBarrier step(workers);
  for (int i = 0; i < workers; ++i) {
    const int u0 = i * units / workers, u1 = (i + 1) * units / workers;
    const int k0 = L.grouped() ? L.nodes_of_group(u0).first : u0;
    const int k1 = L.grouped() ? L.nodes_of_group(u1 - 1).second + 1 : u1;
    worker_procs.push_back(std::make_unique<Child>([&, k0, k1](int out, int) {
      // In a job the judges have hosts of their own; here they share the
      // cores with every simulated rank, and a judge starved by ranks of
      // other nodes misses deadlines a job would not: the ranks yield.
      ::setpriority(PRIO_PROCESS, 0, 10);
      nodes_process(p, o, secret, ports, k0, k1, out, step);
    }));
  }
  SimResult res;
  res.ranks = o.ranks;
  res.checkpoints = kCheckpointCount;
  if (!drifting.empty()) res.drift_line = sim_drift_line(o.drift_node, drifting);
  const auto absent = p.absent();
  std::map<int, int> named_by;  // absent rank -> workers that named it everywhere
  long long rank_bytes = 0, leader_bytes = 0, group_bytes = 0, root_bytes = 0;
  TrafficTable traffic_sum;
  std::vector<long long> named_most(kCheckpointCount, 0);  // the most a rank named missing
  double workers_rss = 0;
  for (auto& w : worker_procs) {
    for (long long a : numbers_after(w->read_line(), "named")) ++named_by[static_cast<int>(a)];
    auto b = numbers_after(w->read_line(), "bytes");
    if (b.size() == 2) rank_bytes += b[0], leader_bytes += b[1];
    auto ro = numbers_after(w->read_line(), "roots");
    if (ro.size() == 2) res.roots_ok += static_cast<int>(ro[0]), res.roots_of += static_cast<int>(ro[1]);
    auto st = numbers_after(w->read_line(), "state");
    if (!st.empty()) res.rank_state_bytes = std::max<std::uint64_t>(res.rank_state_bytes, st[0]);
    auto dr = numbers_after(w->read_line(), "drift");
    if (dr.size() == 2)
      res.drift_named += static_cast<int>(dr[0]), res.drift_of += static_cast<int>(dr[1]);
    traffic_sum.add_line(w->read_line());
    auto most = numbers_after(w->read_line(), "most");
    for (std::size_t seq = 0; seq < most.size() && seq < named_most.size(); ++seq)
      named_most[seq] = std::max(named_most[seq], most[seq]);
    workers_rss = std::max(workers_rss, std::stod("0" + w->read_line()) / 1024.0);
    if (!w->wait()) {
      // Its own line on stderr said why (out of descriptors, out of memory):
      // end every other process now rather than wait for them to time out.
      for (auto& other : worker_procs) other->kill();
      for (auto& g : group_procs) g->kill();
      root.kill();
      throw Error(ExitCode::broken, "gpudiag-sim: a process simulating nodes failed (its reason "
                                    "is above); the run was stopped");
    }
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& g : group_procs) {
    auto b = numbers_after(g->read_line(), "bytes");
    if (!b.empty()) group_bytes += b[0];
    traffic_sum.add_line(g->read_line());
  }
  {
    auto b = numbers_after(root.read_line(), "bytes");
    if (!b.empty()) root_bytes = b[0];
    traffic_sum.add_line(root.read_line());
  }
  std::vector<double> rss;
  root.release();
  rss.push_back(std::stod("0" + root.read_line()) / 1024.0);
  for (auto& g : group_procs) {
    g->release();
    rss.push_back(std::stod("0" + g->read_line()) / 1024.0);
  }
  for (double r : rss) {
    res.store_peak_rss_mib = std::max(res.store_peak_rss_mib, r);
    res.all_stores_rss_mib += r;
  }
  res.expected = static_cast<int>(absent.size());
  for (int a : absent)
    if (named_by[a] == workers) ++res.named;
  res.bytes = static_cast<std::uint64_t>(rank_bytes + leader_bytes + group_bytes);
  const double cps = kCheckpointCount;
  std::fprintf(stderr,
               "sim: tree of %d nodes of %d ranks, %d groups of %d nodes, %d levels of judges; %d "
               "processes of nodes (peak RSS %.0f MiB each at most), %zu store processes\n"
               "sim: bytes per checkpoint: ranks<->leaders %.1f MiB (%.0f B a rank), "
               "leaders<->parents %.1f MiB (%.0f B a node), groups<->root %.1f MiB, root's "
               "store read %.1f MiB\n",
               L.nodes(), L.per_node, L.groups(), L.group_nodes, L.levels(), workers, workers_rss,
               rss.size(),
               rank_bytes / cps / 1048576, rank_bytes / cps / o.ranks,
               leader_bytes / cps / 1048576, leader_bytes / cps / L.nodes(),
               group_bytes / cps / 1048576, root_bytes / cps / 1048576);
  // A checkpoint whose ranks named more missing than were: the simulated
  // steps outran the wait (the machine too busy for the tree's deadlines),
  // and the bytes and times of this run are not the tree's.
  for (int seq = 0; seq < kCheckpointCount; ++seq) {
    long long planned = 0;
    for (int r = 0; r < o.ranks; ++r) planned += p.arrives(r, seq) ? 0 : 1;
    if (named_most[static_cast<std::size_t>(seq)] > planned)
      std::fprintf(stderr,
                   "sim: warning: at the %s checkpoint a rank named %lld ranks missing where %lld "
                   "were absent: judges' waits ran out before their children came (this machine "
                   "was too busy for a --timeout of %.2f s); this run's bytes and time are not "
                   "the tree's: run it on a quieter machine or with a longer --timeout\n",
                   kTreeCheckpoints[seq], named_most[static_cast<std::size_t>(seq)], planned,
                   o.timeout_s);
  }
  // Every level's requests, as the stores saw them (sim_traffic.h).
  for (int level = 0; level <= L.levels() + 1; ++level) {
    const bool root = level == L.levels() + 1;
    const long long members = level == 0 ? o.ranks : level == 1 ? L.nodes() : L.judges(level - 1);
    const long long judges = level == 0 ? L.nodes() : root ? 1 : L.judges(level);
    const std::string stores = level == 0 ? "nodes' stores"
                               : root     ? "the root's store"
                                          : TreeLayout::level_name(level) + "s' stores";
    std::fprintf(stderr, "%s\n",
                 traffic_line(traffic_sum, level, stores,
                              level == 0 ? "rank" : TreeLayout::level_name(level - 1),
                              members, level == 0 ? "leader" : root ? "root" : TreeLayout::level_name(level),
                              judges, kCheckpointCount)
                     .c_str());
  }
  std::fprintf(stderr,
               "sim: a rank's check state at most %.0f KiB (the records it read, the missing "
               "ranks' bookkeeping, its list of live ranks; the last rank of each process's block)\n",
               static_cast<double>(res.rank_state_bytes) / 1024);
  return res;
}

}  // namespace gpudiag::sim
