// reduce_causes (causes.h).
#include "flight_recorder/causes.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>

namespace gpudiag::fr {

namespace {

/// Does `y` hold `x` at seq `p`: it never scheduled it, or never started what `x` started.
bool holds(const Track& y, const Track& x, std::int64_t p) {
  const State ys = y.state(p);
  if (ys == State::not_scheduled) return true;
  return ys == State::scheduled && y.t.starts_recorded && x.state(p) >= State::started;
}

/// A collective that can complete on one rank only once every member's kernel has joined
/// (a broadcast's root, a send, may finish first: their data fit in the peers' buffers).
bool needs_everyone(const Op* op) {
  if (!op) return false;
  for (const char* n : {"all_reduce", "allreduce", "all_gather", "allgather", "reduce_scatter",
                        "all_to_all", "alltoall"})
    if (op->name.find(n) != std::string::npos) return true;
  return false;
}

using Where = std::vector<std::pair<int, const Track*>>;  ///< (group index, track)

/// The work a rank queued first among those it has not completed: a collective (the seq
/// after its last completed one) or a send/recv (its oldest not completed in the buffer).
struct Pending {
  int group = -1;
  const Track* x = nullptr;
  std::int64_t seq = -1;
  const P2p* p2p = nullptr;
};

Pending first_pending(const Where& where) {
  std::tuple<std::int64_t, int, std::int64_t> best{INT64_MAX, -1, -1};  // order, group, seq
  Pending out;
  auto consider = [&](std::int64_t order, int gi, const Track* tr, std::int64_t seq,
                      const P2p* p2p) {
    if (std::make_tuple(order, gi, seq) >= best) return;
    best = std::make_tuple(order, gi, seq);
    out = Pending{gi, tr, seq, p2p};
  };
  for (const auto& [gi, tr] : where) {
    const std::int64_t p = std::max<std::int64_t>(tr->t.completed + 1, 1);
    if (p <= tr->t.enqueued) {
      auto it = tr->record.find(p);
      consider(it == tr->record.end() ? -1 : it->second, gi, tr, p, nullptr);  // lost: older
    }
    for (const auto& op : tr->p2p)
      if (op.state != State::completed) {
        consider(op.record_id, gi, tr, op.seq, &op);
        break;
      }
  }
  return out;
}

/// The global rank a send/recv is with: "nccl:send 0->1", "nccl:recv 1<-0" name group ranks
/// (ProcessGroupNCCL::send/recv), and a group's ranks are its members in order (new_group
/// sorts them). The other member of a pair when the name says nothing; -1 when unknown.
int p2p_peer(const Group& g, int rank, const Op* op) {
  const auto& ranks = g.report.ranks;
  if (op) {
    for (const char* arrow : {"->", "<-"}) {
      const auto at = op->name.find(arrow);
      if (at == std::string::npos) continue;
      std::size_t k = at + 2;
      long long local = 0;
      bool digits = false;
      while (k < op->name.size() && op->name[k] >= '0' && op->name[k] <= '9' && local < 1 << 30) {
        local = local * 10 + (op->name[k++] - '0');
        digits = true;
      }
      if (digits && local < static_cast<long long>(ranks.size()) && ranks[local] != rank)
        return ranks[local];
    }
  }
  if (ranks.size() == 2) return ranks[0] == rank ? ranks[1] : ranks[0];
  return -1;
}

/// Where the peer of a pair got with its send/recv number `seq` (in a pair each side's k-th
/// send/recv is the other's k-th): from its buffer; one older than its buffer was done.
State pair_state(const Track& y, std::int64_t seq) {
  std::int64_t lowest = INT64_MAX;
  for (const auto& op : y.p2p) {
    if (op.seq == seq) return op.state;
    lowest = std::min(lowest, op.seq);
  }
  return seq < lowest && lowest != INT64_MAX ? State::completed : State::not_scheduled;
}

/// Tarjan's strongly connected components; returns the ranks in components with no edge out.
std::set<int> terminal(const std::map<int, std::set<int>>& edges, const std::set<int>& nodes) {
  std::map<int, int> index, low, comp;
  std::vector<int> stack;
  std::set<int> on;
  int next = 0, ncomp = 0;
  std::function<void(int)> visit = [&](int v) {
    index[v] = low[v] = next++;
    stack.push_back(v);
    on.insert(v);
    if (auto it = edges.find(v); it != edges.end())
      for (int w : it->second) {
        if (!index.count(w)) {
          visit(w);
          low[v] = std::min(low[v], low[w]);
        } else if (on.count(w)) {
          low[v] = std::min(low[v], index[w]);
        }
      }
    if (low[v] != index[v]) return;
    for (int w = -1; w != v;) {
      w = stack.back();
      stack.pop_back();
      on.erase(w);
      comp[w] = ncomp;
    }
    ++ncomp;
  };
  for (int v : nodes)
    if (!index.count(v)) visit(v);
  std::set<int> leaving;  // components with an edge out
  for (const auto& [v, ws] : edges)
    for (int w : ws)
      if (comp[v] != comp[w]) leaving.insert(comp[v]);
  std::set<int> out;
  for (int v : nodes)
    if (!leaving.count(comp[v])) out.insert(v);
  return out;
}

std::vector<int> pick(const std::vector<int>& ranks, const std::set<int>& in) {
  std::vector<int> out;
  for (int r : ranks)
    if (in.count(r)) out.push_back(r);
  return out;
}

}  // namespace

void reduce_causes(Report& rep, const std::vector<Group>& groups) {
  std::set<int> nodes, named, in_flight;
  std::map<int, std::set<int>> edges;
  std::map<int, Where> where;
  for (int gi = 0; gi < static_cast<int>(groups.size()); ++gi) {
    for (const auto& tr : groups[gi].tracks) where[tr.t.rank].emplace_back(gi, &tr);
  }
  // Ranks without a dump are one node: they wait for nobody gpudiag can see and are never
  // named (and a pg_config of a million members costs one edge, not a million).
  constexpr int kNoDump = -1;
  nodes.insert(kNoDump);
  for (const auto& [rank, places] : where) {
    nodes.insert(rank);
    const Pending at = first_pending(places);
    if (at.group < 0) continue;
    const Group& g = groups[at.group];
    const Track& x = *at.x;
    const std::int64_t p = at.seq;
    Wait w;
    if (at.p2p) {
      // A send/recv waits for its peer, unless the peer is at it too (in flight).
      const int peer = p2p_peer(g, rank, at.p2p->op);
      const Track* y = nullptr;
      for (const auto& tr : g.tracks)
        if (tr.t.rank == peer) y = &tr;
      if (y && g.report.ranks.size() == 2) {
        const State ys = pair_state(*y, p);
        if (at.p2p->state >= State::started && ys >= State::started) {
          in_flight.insert(rank);  // both sides joined
          continue;
        }
        if (ys == State::not_scheduled ||
            (ys == State::scheduled && y->t.starts_recorded && at.p2p->state >= State::started))
          w.for_ranks.push_back(peer);
      } else if (y) {
        w.for_ranks.push_back(peer);  // which of its sends/recvs pairs with this one: unknown
      } else if (std::count(g.report.no_dump.begin(), g.report.no_dump.end(), peer)) {
        w.for_no_dump.push_back(peer);
      }
      if (at.p2p->op) w.op = *at.p2p->op;
      w.state = at.p2p->state;
      w.p2p = true;
    } else {
      // Started here, and every member joined (or, for a collective that completes only once
      // all have, one completed it): no rank holds it, it runs, and what this rank has not
      // queued or started since waits behind it.
      bool peer_done = false, all_joined = g.report.no_dump.empty();
      for (const auto& y : g.tracks) {
        peer_done = peer_done || y.state(p) == State::completed;
        all_joined = all_joined && y.state(p) >= State::started;
      }
      if (x.state(p) == State::started && (all_joined || (peer_done && needs_everyone(g.op(p))))) {
        in_flight.insert(rank);
        continue;
      }
      for (const auto& y : g.tracks)
        if (y.t.rank != rank && holds(y, x, p)) w.for_ranks.push_back(y.t.rank);
      w.for_no_dump = g.report.no_dump;
      if (const Op* op = g.op(p)) w.op = *op;
      w.state = x.state(p);
    }
    if (w.for_ranks.empty() && w.for_no_dump.empty()) continue;  // in flight with its peers
    w.rank = rank;
    w.group = g.report.name;
    w.group_desc = g.report.desc;
    w.group_ranks = g.report.ranks;
    w.seq = p;
    edges[rank].insert(w.for_ranks.begin(), w.for_ranks.end());
    if (!w.for_no_dump.empty()) edges[rank].insert(kNoDump);
    rep.waits.push_back(std::move(w));
  }
  for (const auto& f : rep.findings)
    if (f.kind != "no-dump") named.insert(f.ranks.begin(), f.ranks.end());
  nodes.insert(named.begin(), named.end());
  const std::set<int> ends = terminal(edges, nodes);
  std::set<int> causes, waiting;
  for (int r : named)
    if (ends.count(r) && !in_flight.count(r)) causes.insert(r);
  for (const auto& [r, ws] : edges)
    if (!causes.count(r)) waiting.insert(r);
  for (int r : named)
    if (!causes.count(r) && !in_flight.count(r)) waiting.insert(r);
  for (auto& f : rep.findings) {
    if (f.kind == "no-dump") continue;
    f.causes = pick(f.ranks, causes);
    f.waiting = pick(f.ranks, waiting);
    f.in_flight = pick(f.ranks, in_flight);
  }
  rep.suspect_ranks.assign(causes.begin(), causes.end());
  rep.waiting_ranks.assign(waiting.begin(), waiting.end());
  rep.in_flight_ranks.assign(in_flight.begin(), in_flight.end());
}

}  // namespace gpudiag::fr
