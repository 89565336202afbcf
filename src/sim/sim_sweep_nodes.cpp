// The sweep simulator's nodes (sim_sweep.h): a process simulates a block of
// nodes (ranks: real StorePlanes on their node's MemoryStore; leaders: real
// Relays over TCP to the group stores), in steps across the block at each
// checkpoint (every rank publishes, every leader collects, every leader
// passes the digest down, every rank reads it). The block holding rank 0
// also runs the sweep's judge: the real layout and Planner (sweep/plan.h),
// fed the round results the tree folded (sweep/tree_results.h), and prints
// a line a round with the control plane's time.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>

#include "checks/record.h"
#include "store/lazy_store.h"
#include "store/memory_store.h"
#include "plane/store_plane.h"
#include "store/tcp_store_client.h"
#include "sim/sim_common.h"
#include "sim/sim_sweep.h"
#include "sweep/plan.h"
#include "sweep/tree_results.h"

namespace gpudiag::sim {

namespace {

using nlohmann::json;
using namespace gpudiag::sweep;

struct SweepNode {
  std::unique_ptr<MemoryStore> store;
  std::unique_ptr<Store> above;
  std::unique_ptr<LazyStore> root;
  std::unique_ptr<Relay> leader;
};

/// A made-up measurement of ranks a and b in `round`, as `end` reports it:
/// NVLink within a node, a rail across nodes, a tenth of that with a rank on
/// the slow node; a few percent of noise (the ends differ a little).
double made_up_gbps(const TreeLayout& L, int slow, int a, int b, int round, int end) {
  const int na = L.node_of(a), nb = L.node_of(b);
  double base = na == nb ? 150.0 : 40.0;
  if (na != nb && (na == slow || nb == slow)) base /= 10;
  unsigned long long h = 1469598103934665603ull;
  for (long long v : {static_cast<long long>(a), static_cast<long long>(b),
                      static_cast<long long>(round), static_cast<long long>(end)})
    h = (h ^ static_cast<unsigned long long>(v)) * 1099511628211ull;
  return base * (1.0 - 0.05 * static_cast<double>(h % 1000) / 1000.0);
}

std::string plan_text(const Layout* layout, const Round& r, int excluded) {
  json j{{"round", encode_round(r)}, {"skip", json::array()}, {"excluded", excluded}};
  if (layout) j["layout"] = encode_layout(*layout);
  return j.dump();
}

}  // namespace

void sweep_nodes(const Plan& p, const SimOptions& o, const std::string& secret, int root_port,
                 const std::vector<int>& group_ports, int k0, int k1, int out) {
  const auto& L = p.layout;
  const int n = L.world;
  const int r0 = L.ranks_of_node(k0).first, r1 = L.ranks_of_node(k1 - 1).second + 1;
  const int count = r1 - r0;
  const bool judge_here = r0 == 0;
  std::vector<SweepNode> nodes(k1 - k0);
  auto connect = [secret](int port, double s) {
    return std::make_unique<TcpStoreClient>("127.0.0.1", port, kTreeToken,
                                            Deadline::after_seconds(s), secret);
  };
  parallel_for(k1 - k0, o.threads, [&](int i) {
    const int k = k0 + i;
    auto& node = nodes[i];
    node.store = std::make_unique<MemoryStore>("the store of simnode" + std::to_string(k));
    node.above = connect(L.grouped() ? group_ports[L.group_of_node(k)] : root_port, 60);
    if (L.grouped())
      node.root = std::make_unique<LazyStore>([=] { return connect(root_port, 30); },
                                              "127.0.0.1:" + std::to_string(root_port));
    auto ro = relay_options(p, o, RelayLevel::node, k);
    ro.below = node.store.get();
    ro.above = node.above.get();
    if (node.root) ro.beyond.push_back(node.root.get());  // past a lost group judge
    // A partner's record in another group is read from that group's store
    // (two levels: the judges above the nodes are the groups').
    ro.connect_judge = [&, connect](int level, int g) -> std::unique_ptr<Store> {
      return connect(level == 1 ? group_ports.at(g) : root_port, 30);
    };
    node.leader = std::make_unique<Relay>(ro);
  });
  std::vector<std::unique_ptr<Plane>> planes(count);
  parallel_for(count, o.threads, [&](int i) {
    const int r = r0 + i, k = L.node_of(r);
    StorePlaneIdentity id{r,          n, r % L.per_node, "simnode" + std::to_string(k), 100000 + r,
                          "the leader of simnode" + std::to_string(k)};
    id.tree = true;
    std::tie(id.node_first, id.node_last) = L.ranks_of_node(k);
    id.judge_grace = ms(3 * (o.timeout_s + 2) + 5);
    planes[i] = make_store_plane(std::make_unique<StoreView>(*nodes[k - k0].store), id,
                                 Deadline::after_seconds(60));
  });

  // One checkpoint, in steps across the block; `after` sees each rank's view.
  int seq = 0;
  std::vector<std::string> mine(count);
  std::vector<std::vector<int>> need(count);
  auto checkpoint = [&](const std::string& name,
                        const std::function<void(int i, const Gathered&)>& after) {
    const auto deadline = [&] { return Deadline::after_seconds(o.timeout_s); };
    parallel_for(count, o.threads,
                 [&](int i) { publish_record(*planes[i], name, mine[i], need[i], deadline()); });
    parallel_for(k1 - k0, o.threads,
                 [&](int i) { nodes[i].leader->collect(seq, Deadline::after_seconds(600)); });
    parallel_for(k1 - k0, o.threads, [&](int i) { nodes[i].leader->pass_down(seq); });
    parallel_for(count, o.threads, [&](int i) {
      after(i, planes[i]->gather_all(name, mine[i], deadline(), {}, need[i], {}));
    });
    ++seq;
  };
  auto now = [t0 = std::chrono::steady_clock::now()] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::atomic<int> failures{0};
  std::string why;

  // The exchange: rank 0 reads every record once and lays the pool out.
  std::optional<Planner> planner;
  std::string plan;
  for (int i = 0; i < count; ++i) {
    const int r = r0 + i;
    mine[i] = json{{"rec", encode(sim_record(r, n, o.record_bytes, 0, L.per_node))},
                   {"local_size", L.per_node}}
                  .dump();
    if (r == 0) {
      need[i].resize(static_cast<std::size_t>(n));
      std::iota(need[i].begin(), need[i].end(), 0);
    }
  }
  checkpoint("sweep-exchange", [&](int i, const Gathered& g) {
    if (r0 + i != 0) return;
    std::vector<std::optional<std::string>> hosts(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      const json j = json::parse(g.records[r].value_or(""), nullptr, false);
      if (j.is_object() && j.contains("rec") && j["rec"].is_string())
        hosts[r] = decode(j["rec"].get<std::string>()).host;
    }
    const Layout layout = make_layout(hosts);
    if (layout.nodes() != L.nodes()) ++failures;
    planner.emplace(layout, planner_options(true, o.time_budget_s));
    plan = plan_text(&layout, planner->next(now()), -1);
  });
  if (judge_here) std::fprintf(stderr, "sim: sweep: the exchange (rank 0 read every record) after %.2f s\n", now());

  std::optional<Layout> layout;
  std::string layout_text;
  Round round;
  int rounds = 0;
  std::vector<int> partner(count, -1);
  for (;;) {
    const double t_round = now();
    // The plan: rank 0's record, in every digest.
    std::vector<std::string> got(count);
    for (int i = 0; i < count; ++i) {
      mine[i] = r0 + i == 0 ? plan : "";
      need[i] = {0};  // as the sweep: every rank reads rank 0's plan
    }
    checkpoint("sweep-plan-" + std::to_string(rounds + 1), [&](int i, const Gathered& g) {
      if (g.judged && g.records[0]) got[i] = *g.records[0];
    });
    if (std::any_of(got.begin(), got.end(), [&](const std::string& s) { return s != got[0]; }) ||
        got[0].empty()) {
      why = "a rank did not get rank 0's plan";
      break;
    }
    const json j = json::parse(got[0]);
    if (j.contains("layout") && j["layout"].get<std::string>() != layout_text) {
      layout_text = j["layout"].get<std::string>();
      layout = decode_layout(layout_text, n);
    }
    round = decode_round(j.at("round").get<std::string>(), layout->nodes());
    if (round.kind == RoundKind::done) break;
    const double t_plan = now();
    // The peers: each rank asks for its partner's record.
    for (int i = 0; i < count; ++i) {
      const int r = r0 + i;
      partner[i] = partner_in(round, *layout, r);
      mine[i] = json{{"ep", "10.1." + std::to_string(L.node_of(r) % 250) + ".1:" +
                                std::to_string(29600 + r % L.per_node)},
                     {"id", ""}, {"label", "rank " + std::to_string(r)}}
                    .dump();
      need[i] = partner[i] >= 0 ? std::vector<int>{partner[i]} : std::vector<int>{};
    }
    checkpoint("sweep-" + std::to_string(round.index) + "-peers", [&](int i, const Gathered& g) {
      if (partner[i] >= 0 && !g.records[partner[i]]) ++failures;
    });
    const double t_peers = now();
    // The results: each rank's end of its pair; rank 0 plans the next round.
    for (int i = 0; i < count; ++i) {
      const int r = r0 + i;
      const int q = partner[i];
      const double gbps = q < 0 ? 0 : made_up_gbps(L, o.slow_node, std::min(r, q), std::max(r, q),
                                                   round.index, r < q ? 0 : 1);
      mine[i] = json{{"k", round.index}, {"p", q}, {"ok", q >= 0}, {"gbps", gbps}, {"why", ""}}.dump();
      need[i].clear();
    }
    std::size_t pairs = 0;
    checkpoint("sweep-" + std::to_string(round.index), [&](int i, const Gathered& g) {
      if (r0 + i != 0) return;
      auto share = RoundResults::decode(g.judge_share, 0, n - 1, n);
      if (!share || share->round() != round.index) ++failures;
      const auto results = share ? share->pair_results() : std::vector<PairResult>{};
      pairs = results.size();
      planner->record(round, results, g.missing);
      const Round next = planner->next(now());
      int excluded = -1;
      if (next.kind == RoundKind::done) {
        excluded = 0;
        for (const auto& v : planner->verdicts()) excluded += v.state != NodeState::ok;
      }
      plan = plan_text(nullptr, next, excluded);
    });
    ++rounds;
    if (judge_here)
      std::fprintf(stderr,
                   "sim: sweep round %d (%s): %zu pair(s); plan %.2f s, peers %.2f s, results and "
                   "planning %.2f s; control plane %.2f s a round\n",
                   round.index, round.stage().c_str(), pairs, t_plan - t_round, t_peers - t_plan,
                   now() - t_peers, now() - t_round);
  }
  if (failures) why = std::to_string(failures.load()) + " plan(s), partner record(s) or results missing";
  write_line(out, why.empty() ? "ok " + std::to_string(seq) : "fail " + why);
  if (judge_here) {
    std::string v;
    for (const auto& verdict : planner->verdicts())
      if (verdict.state != NodeState::ok)
        v += (v.empty() ? " " : ", ") + planner->hosts()[verdict.node] + " " +
             state_name(verdict.state);
    write_line(out, "excluded" + (v.empty() ? std::string(" none") : v));
    std::fprintf(stderr, "sim: sweep: %d round(s), %d checkpoints, judged after %.2f s\n", rounds,
                 seq, now());
  }
  planes.clear();
}

}  // namespace gpudiag::sim
