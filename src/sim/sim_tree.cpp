// The simulator's tree shape (see simulator.h): processes for the root, the
// group stores and blocks of nodes, real Relays at every level, and faults at
// every level. Written by hand: no library simulates a job's control plane.
#include "sim/sim_tree.h"

#include <spdlog/spdlog.h>

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
#include "util/error.h"

namespace gpudiag::sim {

Plan make_plan(const SimOptions& o) {
  Plan p;
  p.layout = {o.ranks, o.per_node, o.group_nodes};
  const auto& L = p.layout;
  p.fate.assign(o.ranks, Fate::fine);
  if (L.grouped())
    for (int i = 0; i < o.dead_judges && i + 1 < L.groups(); ++i) {
      const int g = 1 + static_cast<int>(static_cast<long long>(i) * (L.groups() - 1) /
                                         std::max(1, o.dead_judges));
      p.dead_judges[g] = L.nodes_of_group(g).first;
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

/// A judge's children get the timeout and half a second per level below it.
RelayOptions relay_options(const Plan& p, const SimOptions& o, RelayLevel level, int index) {
  return gpudiag::relay_options(p.layout, level, index, ms(o.timeout_s), ms(0.5));
}

/// The root's process: its store and its judge.
void root_process(const Plan& p, const SimOptions& o, const std::string& secret, int out,
                  int control) {
  TcpStoreServerOptions so;
  so.bind_host = "127.0.0.1";
  so.token = kTreeToken;
  so.secret = secret;
  so.world_size = p.layout.groups() + 2 * p.layout.group_nodes + 16;
  TcpStoreServer server(so);
  write_line(out, std::to_string(server.port()));
  TcpStoreClient self("127.0.0.1", server.port(), kTreeToken, Deadline::after_seconds(30), secret);
  CheckTreeReviewer reviewer;
  auto ro = relay_options(p, o, RelayLevel::root, 0);
  ro.below = &self;
  ro.reviewer = &reviewer;
  Relay root(ro);
  for (int seq = 0; seq < kCheckpointCount; ++seq) root.collect(seq, Deadline::after_seconds(300));
  write_line(out, "bytes " + std::to_string(root.bytes_below()));
  wait_released(control);
  write_line(out, std::to_string(peak_rss_kib()));
}

/// A process serving the stores of groups [g0, g1) and running their judges.
void group_process(const Plan& p, const SimOptions& o, const std::string& secret, int root_port,
                   int g0, int g1, int out, int control) {
  std::vector<std::unique_ptr<TcpStoreServer>> servers;
  std::string ports;
  for (int g = g0; g < g1; ++g) {
    TcpStoreServerOptions so;
    so.bind_host = "127.0.0.1";
    so.token = kTreeToken;
    so.secret = secret;
    so.world_size = p.layout.group_nodes + 16;
    servers.push_back(std::make_unique<TcpStoreServer>(so));
    ports += (ports.empty() ? "" : " ") + std::to_string(servers.back()->port());
  }
  write_line(out, ports);
  std::vector<long long> up(g1 - g0, 0);
  std::vector<std::thread> judges;
  for (int g = g0; g < g1; ++g)
    judges.emplace_back([&, g] {
      try {
        TcpStoreClient self("127.0.0.1", servers[g - g0]->port(), kTreeToken,
                            Deadline::after_seconds(30), secret);
        TcpStoreClient root("127.0.0.1", root_port, kTreeToken, Deadline::after_seconds(30), secret);
        CheckTreeReviewer reviewer;
        auto ro = relay_options(p, o, RelayLevel::group, g);
        ro.below = &self;
        ro.above = &root;
        ro.reviewer = &reviewer;
        Relay relay(ro);
        for (int seq = 0; seq < kCheckpointCount; ++seq) {
          if (p.dead_judges.count(g) && seq == p.kill_at) {
            servers[g - g0].reset();  // the judge's process ends: its store goes with it
            break;
          }
          relay.collect(seq, Deadline::after_seconds(300));
          relay.pass_down(seq);
        }
        up[g - g0] = static_cast<long long>(relay.bytes_up());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "gpudiag-sim: group %d's judge: %s\n", g, e.what());
      }
    });
  for (auto& t : judges) t.join();
  long long total = 0;
  for (auto b : up) total += b;
  write_line(out, "bytes " + std::to_string(total));
  wait_released(control);
  write_line(out, std::to_string(peak_rss_kib()));
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

}  // namespace

SimResult run_tree(const SimOptions& o) {
  const Plan p = make_plan(o);
  const auto& L = p.layout;
  if (o.missing + o.stop + o.die >= o.ranks)
    throw UsageError("gpudiag-sim: --missing + --stop + --die must leave rank 0 and others",
                     "lower them");
  const auto drifting =
      drift_ranks(o, L.nodes(), L.per_node, [&](int r) { return p.arrives(r, 0); });
  raise_descriptor_limit();
  const std::string secret = random_secret();
  const auto t0 = std::chrono::steady_clock::now();

  Child root([&](int out, int control) { root_process(p, o, secret, out, control); });
  const int root_port = std::stoi("0" + root.read_line());
  if (root_port <= 0) throw Error(ExitCode::broken, "gpudiag-sim: the root's store did not start");
  std::vector<std::unique_ptr<Child>> group_procs;
  std::vector<int> group_ports;
  const int procs = std::max(1, std::min(o.store_procs, L.groups()));
  for (int i = 0; i < procs && L.grouped(); ++i) {
    const int g0 = i * L.groups() / procs, g1 = (i + 1) * L.groups() / procs;
    group_procs.push_back(std::make_unique<Child>([&, g0, g1](int out, int control) {
      group_process(p, o, secret, root_port, g0, g1, out, control);
    }));
    for (long long port : numbers_after(" " + group_procs.back()->read_line(), " "))
      group_ports.push_back(static_cast<int>(port));
  }
  if (L.grouped() && static_cast<int>(group_ports.size()) != L.groups())
    throw Error(ExitCode::broken, "gpudiag-sim: a group's store did not start");

  // Workers take whole groups (or, ungrouped, blocks of nodes), so a group's
  // nodes move through a checkpoint together.
  const int units = L.grouped() ? L.groups() : L.nodes();
  const int workers = std::max(1, std::min(o.workers, units));
  std::vector<std::unique_ptr<Child>> worker_procs;
  for (int i = 0; i < workers; ++i) {
    const int u0 = i * units / workers, u1 = (i + 1) * units / workers;
    const int k0 = L.grouped() ? L.nodes_of_group(u0).first : u0;
    const int k1 = L.grouped() ? L.nodes_of_group(u1 - 1).second + 1 : u1;
    worker_procs.push_back(std::make_unique<Child>([&, k0, k1](int out, int) {
      nodes_process(p, o, secret, root_port, group_ports, k0, k1, out);
    }));
  }
  SimResult res;
  res.ranks = o.ranks;
  res.checkpoints = kCheckpointCount;
  if (!drifting.empty()) res.drift_line = sim_drift_line(o.drift_node, drifting);
  const auto absent = p.absent();
  std::map<int, int> named_by;  // absent rank -> workers that named it everywhere
  long long rank_bytes = 0, leader_bytes = 0, group_bytes = 0, root_bytes = 0;
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
  }
  {
    auto b = numbers_after(root.read_line(), "bytes");
    if (!b.empty()) root_bytes = b[0];
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
               "sim: tree of %d nodes of %d ranks, %d groups of %d nodes; %d processes of nodes "
               "(peak RSS %.0f MiB each at most), %zu store processes\n"
               "sim: bytes per checkpoint: ranks<->leaders %.1f MiB (%.0f B a rank), "
               "leaders<->parents %.1f MiB (%.0f B a node), groups<->root %.1f MiB, root's "
               "store read %.1f MiB\n",
               L.nodes(), L.per_node, L.groups(), L.group_nodes, workers, workers_rss, rss.size(),
               rank_bytes / cps / 1048576, rank_bytes / cps / o.ranks,
               leader_bytes / cps / 1048576, leader_bytes / cps / L.nodes(),
               group_bytes / cps / 1048576, root_bytes / cps / 1048576);
  std::fprintf(stderr,
               "sim: a rank's check state at most %.0f KiB (the records it read, the missing "
               "ranks' bookkeeping, its list of live ranks; the last rank of each process's block)\n",
               static_cast<double>(res.rank_state_bytes) / 1024);
  return res;
}

}  // namespace gpudiag::sim
