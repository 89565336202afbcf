// The simulator's sweep mode (--sweep; simulator.h): gpudiag sweep's
// control plane under node leaders, at the scale of a pool, with the
// measurements simulated. The tree is the check simulation's (sim_tree.h):
// a root process (its store and judge), store processes for the groups'
// stores and judges, and processes of nodes (ranks: real StorePlanes; their
// node's store: a MemoryStore; their leader: a real Relay over TCP to its
// group's store, and to other groups' stores for the records its ranks ask
// for). Every judge reviews with the sweep's reviewer (sweep/tree_results.h).
//
// Rank 0 (in the first process of nodes) is the sweep's judge, as in
// sweep/run.cpp: at the exchange it asks for every record and lays the pool
// out by host; each round it plans with the real Planner from the results
// the groups fold and the root leaves it (Gathered::judge_share), and sends
// the plan as its record at the next round's plan checkpoint. A round is the
// sweep's three checkpoints under the tree: sweep-plan-K (every rank reads
// rank 0's record), sweep-K-peers (every rank asks for its partner's
// record), sweep-K (every rank reports its end of its pair). A pair's
// measurement is made up, and takes no time: GB/s of a rail or NVLink with
// a few percent of noise, and a tenth of that for any pair across nodes with
// a rank on the slow node (--slow-node: a slow NIC). So a round's time is the
// control plane's alone. The first process of nodes prints a line a round
// and the verdict; the run passes (exit 0) when the slow node, and only it,
// is excluded, as SLOW, and every rank read every plan and its partner's record.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "store/job_token.h"
#include "store/lazy_store.h"
#include "store/memory_store.h"
#include "tree/relay.h"
#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "sim/sim_common.h"
#include "sim/sim_sweep.h"
#include "sim/sim_tree.h"
#include "sweep/plan.h"
#include "sweep/tree_results.h"
#include "util/error.h"

namespace gpudiag::sim {

namespace {

using nlohmann::json;
using sweep::Round;
using sweep::RoundKind;

/// Whether the parent released this child (its control pipe closed).
bool released(int control) {
  pollfd p{control, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

std::unique_ptr<TreeReviewer> reviewer(const SimOptions& o) {
  return sweep::job_reviewer(o.ranks);
}

/// A judge above the nodes, checkpoint after checkpoint until released.
void judge_loop(Relay& relay, int control, bool root) {
  auto stop = [control] { return released(control); };
  for (int seq = 0;; ++seq) {
    if (!relay.collect(seq, Deadline::after_seconds(600), stop)) break;
    if (!root && !relay.pass_down(seq, stop)) break;
  }
}

void sweep_root(const Plan& p, const SimOptions& o, const std::string& secret, int out, int control) {
  auto server = judge_store(secret, p.layout.groups() + 2 * p.layout.group_nodes + 16);
  write_line(out, std::to_string(server->port()));
  TcpStoreClient self("127.0.0.1", server->port(), kTreeToken, Deadline::after_seconds(30), secret);
  auto rv = reviewer(o);
  auto ro = relay_options(p, o, RelayLevel::root, 0);
  ro.below = &self;
  ro.reviewer = rv.get();
  Relay root(ro);
  judge_loop(root, control, true);
  write_line(out, std::to_string(peak_rss_kib()));
}

void sweep_groups(const Plan& p, const SimOptions& o, const std::string& secret, int root_port,
                  int g0, int g1, int out, int control) {
  std::vector<std::unique_ptr<TcpStoreServer>> servers;
  std::string ports;
  for (int g = g0; g < g1; ++g) {
    // Its nodes' leaders, and the other groups' leaders that read a partner's record.
    servers.push_back(judge_store(secret, 4 * p.layout.group_nodes + 16));
    ports += (ports.empty() ? "" : " ") + std::to_string(servers.back()->port());
  }
  write_line(out, ports);
  std::vector<std::thread> judges;
  for (int g = g0; g < g1; ++g)
    judges.emplace_back([&, g] {
      try {
        TcpStoreClient self("127.0.0.1", servers[g - g0]->port(), kTreeToken,
                            Deadline::after_seconds(30), secret);
        TcpStoreClient root("127.0.0.1", root_port, kTreeToken, Deadline::after_seconds(30), secret);
        auto rv = reviewer(o);
        auto ro = relay_options(p, o, RelayLevel::group, g);
        ro.below = &self;
        ro.above = &root;
        ro.reviewer = rv.get();
        Relay relay(ro);
        judge_loop(relay, control, false);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gpudiag-sim: group %d's judge: %s\n", g, e.what());
      }
    });
  for (auto& t : judges) t.join();
  write_line(out, std::to_string(peak_rss_kib()));
}

}  // namespace

SimResult run_sweep(const SimOptions& o) {
  SimOptions so = o;
  so.missing = so.stop = so.die = so.missing_leaders = so.dead_judges = 0;
  const Plan p = make_plan(so);
  const auto& L = p.layout;
  if (L.world % L.per_node != 0)
    throw UsageError("gpudiag-sim --sweep: --ranks must be a multiple of --per-node",
                     "give whole nodes");
  const int slow = so.slow_node >= 0 ? so.slow_node : std::clamp(L.nodes() * 2 / 3, 1, L.nodes() - 1);
  if (slow <= 0 || slow >= L.nodes())
    throw UsageError("gpudiag-sim --sweep: --slow-node " + std::to_string(slow) +
                         ": give a node from 1 to " + std::to_string(L.nodes() - 1),
                     "node 0 holds the judge; the pool needs 3 nodes at least");
  so.slow_node = slow;
  raise_descriptor_limit();
  const std::string secret = random_secret();
  const auto t0 = std::chrono::steady_clock::now();
  Child root([&](int out, int control) { sweep_root(p, so, secret, out, control); });
  const int root_port = std::stoi("0" + root.read_line());
  if (root_port <= 0) throw Error(ExitCode::broken, "gpudiag-sim: the root's store did not start");
  std::vector<std::unique_ptr<Child>> group_procs;
  std::vector<int> group_ports;
  const int procs = std::max(1, std::min(so.store_procs, L.groups()));
  for (int i = 0; i < procs && L.grouped(); ++i) {
    const int g0 = i * L.groups() / procs, g1 = (i + 1) * L.groups() / procs;
    group_procs.push_back(std::make_unique<Child>([&, g0, g1](int out, int control) {
      sweep_groups(p, so, secret, root_port, g0, g1, out, control);
    }));
    std::string line = group_procs.back()->read_line();
    for (std::size_t at = 0; at < line.size();) {
      auto end = line.find(' ', at);
      group_ports.push_back(std::stoi(line.substr(at, end - at)));
      at = end == std::string::npos ? line.size() : end + 1;
    }
  }
  if (L.grouped() && static_cast<int>(group_ports.size()) != L.groups())
    throw Error(ExitCode::broken, "gpudiag-sim: a group's store did not start");
  const int units = L.grouped() ? L.groups() : L.nodes();
  const int workers = std::max(1, std::min(so.workers, units));
  std::vector<std::unique_ptr<Child>> worker_procs;
  for (int i = 0; i < workers; ++i) {
    const int u0 = i * units / workers, u1 = (i + 1) * units / workers;
    const int k0 = L.grouped() ? L.nodes_of_group(u0).first : u0;
    const int k1 = L.grouped() ? L.nodes_of_group(u1 - 1).second + 1 : u1;
    worker_procs.push_back(std::make_unique<Child>([&, k0, k1](int out, int) {
      try {
        sweep_nodes(p, so, secret, root_port, group_ports, k0, k1, out);
      } catch (const std::exception& e) {
        write_line(out, std::string("fail ") + e.what());
      }
    }));
  }
  SimResult res;
  res.ranks = so.ranks;
  bool all_fine = true;
  std::string verdict;
  for (auto& w : worker_procs) {
    // "ok <rounds> <checkpoints>" or "fail <why>", then (the first) the verdict.
    const std::string line = w->read_line();
    if (line.rfind("ok ", 0) == 0) {
      res.checkpoints = std::max(res.checkpoints, std::stoi(line.substr(3)));
    } else {
      all_fine = false;
      std::fprintf(stderr, "sim: %s\n", line.empty() ? "a process of nodes ended early" : line.c_str());
    }
    if (&w == &worker_procs.front()) verdict = w->read_line();
    if (!w->wait()) all_fine = false;
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  root.release();
  res.store_peak_rss_mib = std::stod("0" + root.read_line()) / 1024.0;
  res.all_stores_rss_mib = res.store_peak_rss_mib;
  for (auto& g : group_procs) {
    g->release();
    const double r = std::stod("0" + g->read_line()) / 1024.0;
    res.store_peak_rss_mib = std::max(res.store_peak_rss_mib, r);
    res.all_stores_rss_mib += r;
  }
  // "excluded simnode<K>" of the slow node alone is the expected verdict.
  res.expected = 1;
  res.named = all_fine && verdict == "excluded simnode" + std::to_string(slow) + " SLOW" ? 1 : 0;
  std::fprintf(stderr, "sim: sweep of %d nodes of %d ranks (%d groups of %d), slow node simnode%d: %s\n",
               L.nodes(), L.per_node, L.groups(), L.group_nodes, slow,
               verdict.empty() ? "no verdict" : verdict.c_str());
  return res;
}

int sweep_main(const SimOptions& o) {
  if (!(o.time_budget_s >= 0.001 && o.time_budget_s <= 86400.0)) {  // NaN passes CLI11's Range
    std::fprintf(stderr, "gpudiag-sim: --time-budget: give seconds from 0.001 to 86400\n");
    return 2;
  }
  try {
    const SimResult r = run_sweep(o);
    std::printf("sim: sweep of %d ranks, %d checkpoints, %.1f s, store peak RSS %.0f MiB (all "
                "stores %.0f MiB), slow node named alone: %s\n",
                r.ranks, r.checkpoints, r.seconds, r.store_peak_rss_mib, r.all_stores_rss_mib,
                r.named == r.expected ? "yes" : "no");
    return r.named == r.expected ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "gpudiag-sim: %s\n", e.one_line().c_str());
    return 2;
  }
}

}  // namespace gpudiag::sim
