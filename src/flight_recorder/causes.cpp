// reduce_causes and Census (causes.h).
//
// Near-linear in the ranks and entries: what a rank asks of its group (how many members
// completed a seq, who holds it there, its op) comes from the group's Census, built once,
// not from a walk over every member; and Tarjan's algorithm keeps its own stack, so a chain
// of a million ranks each waiting for the next is a loop, not a million nested calls.
#include "flight_recorder/causes.h"

#include <algorithm>
#include <climits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>

namespace gpudiag::fr {

namespace {

/// Track::state where its buffer does not hold `s`.
State by_counters(const RankTrack& t, std::int64_t s) {
  if (s <= t.completed) return State::completed;
  if (s <= t.started) return State::started;
  if (s <= t.enqueued) return State::scheduled;
  return State::not_scheduled;
}

/// How many of `sorted` are at least `s`.
std::size_t at_least(const std::vector<std::int64_t>& sorted, std::int64_t s) {
  return sorted.end() - std::lower_bound(sorted.begin(), sorted.end(), s);
}

/// The tracks of `by` (sorted by `key`) whose key is below `s`.
template <typename Key>
void below(const std::vector<const Track*>& by, Key key, std::int64_t s,
           std::vector<const Track*>& out) {
  for (const Track* y : by) {
    if (key(*y) >= s) break;
    out.push_back(y);
  }
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

/// Tarjan's strongly connected components, its recursion kept on an explicit stack (a chain
/// of waits is as deep as it is long); returns the ranks in components with no edge out.
std::set<int> terminal(const std::map<int, std::set<int>>& edges, const std::set<int>& nodes) {
  std::map<int, int> index, low, comp;
  std::vector<int> stack;
  std::set<int> on;
  int next = 0, ncomp = 0;
  static const std::set<int> kNone;
  struct Frame {
    int v;
    std::set<int>::const_iterator at, end;  // the edges of v still to follow
  };
  std::vector<Frame> calls;
  auto open = [&](int v) {
    index[v] = low[v] = next++;
    stack.push_back(v);
    on.insert(v);
    const auto it = edges.find(v);
    const std::set<int>& out = it == edges.end() ? kNone : it->second;
    calls.push_back({v, out.begin(), out.end()});
  };
  for (int root : nodes) {
    if (index.count(root)) continue;
    open(root);
    while (!calls.empty()) {
      Frame& f = calls.back();
      if (f.at != f.end) {
        const int v = f.v, w = *f.at++;
        if (!index.count(w))
          open(w);  // f is not used past here: the push may move it
        else if (on.count(w))
          low[v] = std::min(low[v], index[w]);
        continue;
      }
      const int v = f.v;
      calls.pop_back();
      if (!calls.empty()) low[calls.back().v] = std::min(low[calls.back().v], low[v]);
      if (low[v] != index[v]) continue;
      for (int w = -1; w != v;) {
        w = stack.back();
        stack.pop_back();
        on.erase(w);
        comp[w] = ncomp;
      }
      ++ncomp;
    }
  }
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

Census::Census(const Group& g) : g_(&g) {
  for (const auto& tr : g.tracks) {
    completed_.push_back(tr.t.completed);
    started_.push_back(tr.t.started);
    enqueued_.push_back(tr.t.enqueued);
    by_enqueued_.push_back(&tr);
    (tr.t.starts_recorded ? by_started_ : rest_by_enqueued_).push_back(&tr);
    for (const auto& [seq, v] : tr.seqs) {
      held_[seq].push_back(&tr);
      ops_.emplace(seq, v.second);  // the lowest rank's: tracks are by rank
    }
  }
  for (auto* v : {&completed_, &started_, &enqueued_}) std::sort(v->begin(), v->end());
  auto by = [](auto key) {
    return [key](const Track* a, const Track* b) { return key(*a) < key(*b); };
  };
  auto enq = [](const Track& y) { return y.t.enqueued; };
  std::stable_sort(by_enqueued_.begin(), by_enqueued_.end(), by(enq));
  std::stable_sort(rest_by_enqueued_.begin(), rest_by_enqueued_.end(), by(enq));
  std::stable_sort(by_started_.begin(), by_started_.end(),
                   by([](const Track& y) { return y.t.started; }));
  for (const auto& [seq, ys] : held_) {
    auto n = count(seq);  // by the counters: held_count_ has no entry yet
    for (const Track* y : ys) {
      --n[static_cast<int>(by_counters(y->t, seq))];
      ++n[static_cast<int>(y->seqs.at(seq).first)];
    }
    held_count_[seq] = n;
  }
}

std::array<std::size_t, 4> Census::count(std::int64_t seq) const {
  if (auto it = held_count_.find(seq); it != held_count_.end()) return it->second;
  // started >= completed and enqueued >= started on every track (build_groups).
  const std::size_t c = at_least(completed_, seq), s = at_least(started_, seq),
                    e = at_least(enqueued_, seq);
  return {completed_.size() - e, e - s, s - c, c};
}

const Op* Census::op(std::int64_t seq) const {
  auto it = ops_.find(seq);
  return it == ops_.end() ? nullptr : it->second;
}

const Track* Census::track(int rank) const {
  const auto& ts = g_->tracks;
  auto it = std::lower_bound(ts.begin(), ts.end(), rank,
                             [](const Track& t, int r) { return t.t.rank < r; });
  return it != ts.end() && it->t.rank == rank ? &*it : nullptr;
}

std::vector<int> Census::holding(const Track& x, std::int64_t seq) const {
  const bool x_started = x.state(seq) >= State::started;
  auto [it, added] = holding_.try_emplace({seq, x_started});
  std::vector<int>& all = it->second;
  if (added) {
    // By the counters: those that never scheduled seq (enqueued below it), and, where x
    // started it, those timing starts that never started it (started below it). Then the
    // members whose buffer holds seq, by their entry instead.
    auto enq = [](const Track& y) { return y.t.enqueued; };
    std::vector<const Track*> ys;
    if (x_started) {
      below(by_started_, [](const Track& y) { return y.t.started; }, seq, ys);
      below(rest_by_enqueued_, enq, seq, ys);
    } else {
      below(by_enqueued_, enq, seq, ys);
    }
    for (const Track* y : ys)
      if (!y->seqs.count(seq)) all.push_back(y->t.rank);
    if (auto h = held_.find(seq); h != held_.end())
      for (const Track* y : h->second) {
        const State ys = y->seqs.at(seq).first;
        if (ys == State::not_scheduled ||
            (ys == State::scheduled && y->t.starts_recorded && x_started))
          all.push_back(y->t.rank);
      }
    std::sort(all.begin(), all.end());
  }
  std::vector<int> out;
  out.reserve(all.size());
  for (int r : all)
    if (r != x.t.rank) out.push_back(r);
  return out;
}

void reduce_causes(Report& rep, const std::vector<Group>& groups) {
  std::set<int> nodes, named, in_flight;
  std::map<int, std::set<int>> edges;
  std::map<int, Where> where;
  std::vector<std::unique_ptr<Census>> census(groups.size());  // built where a rank asks
  auto census_of = [&](int gi) -> const Census& {
    if (!census[gi]) census[gi] = std::make_unique<Census>(groups[gi]);
    return *census[gi];
  };
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
      const Track* y = census_of(at.group).track(peer);
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
      } else if (std::binary_search(g.report.no_dump.begin(), g.report.no_dump.end(), peer)) {
        w.for_no_dump.push_back(peer);
      }
      if (at.p2p->op) w.op = *at.p2p->op;
      w.state = at.p2p->state;
      w.p2p = true;
    } else {
      // Started here, and every member joined (or, for a collective that completes only once
      // all have, one completed it): no rank holds it, it runs, and what this rank has not
      // queued or started since waits behind it.
      const Census& c = census_of(at.group);
      const auto n = c.count(p);
      const bool peer_done = n[static_cast<int>(State::completed)] > 0;
      const bool all_joined = g.report.no_dump.empty() &&
                              n[static_cast<int>(State::not_scheduled)] == 0 &&
                              n[static_cast<int>(State::scheduled)] == 0;
      if (x.state(p) == State::started && (all_joined || (peer_done && needs_everyone(c.op(p))))) {
        in_flight.insert(rank);
        continue;
      }
      w.for_ranks = c.holding(x, p);
      w.for_no_dump = g.report.no_dump;
      if (const Op* op = c.op(p)) w.op = *op;
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
