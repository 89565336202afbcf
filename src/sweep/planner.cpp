// The judge's planner (plan.h): rounds handed out stage by stage (within
// nodes, node-pair turns while the time budget allows, then deciding rounds
// for the suspects) and each round's results folded into one test per node
// (or node pair) and round; the verdicts are recomputed from every test
// (planner_judge.cpp).
#include <algorithm>
#include <map>
#include <set>

#include "checks/links.h"
#include "sweep/plan.h"

namespace gpudiag::sweep {

PlannerOptions planner_options(bool gpu, double time_budget_s) {
  return PlannerOptions{time_budget_s, 3, gpu, gpu ? 0.5 : 0.25};
}

Planner::Planner(Layout layout, PlannerOptions options)
    : layout_(std::move(layout)), opt_(options) {
  const int nodes = layout_.nodes();
  std::size_t widest = 0;
  for (const auto& m : layout_.members) widest = std::max(widest, m.size());
  within_turns_ = opt_.within ? link_rounds(static_cast<int>(widest)) : 0;
  circle_max_ = link_rounds(nodes);
  // Two partners for every node: two turns, three when one node rests per turn.
  circle_min_ = std::min(circle_max_, nodes % 2 ? 3 : 2);
  gone_round_.assign(nodes, 0);
  gone_why_.assign(nodes, "");
  failed_early_.assign(nodes, false);
  rank_gone_.assign(layout_.ranks(), false);
  noted_.assign(nodes, false);
}

void Planner::note_gone(int rank, const std::string& note) {
  const int node = rank >= 0 && rank < layout_.ranks() ? layout_.node_of[rank] : -1;
  if (node < 0 || gone_round_[node] == 0 || noted_[node] || note.empty()) return;
  noted_[node] = true;
  gone_why_[node] += ": " + note;
}

void Planner::node_failed(int node, const std::string& why) {
  if (node < 0 || node >= layout_.nodes() || gone_round_[node] != 0) return;
  gone_round_[node] = -1;
  gone_why_[node] = why;
  failed_early_[node] = true;
}

void Planner::never_arrived(const std::vector<std::string>& hosts) {
  // Hosts named as the pool's that sent no rank: kept apart from the layout
  // (every rank plans its rounds over the layout it was sent, without them).
  for (const auto& h : hosts) absent_.push_back(h);
}

std::vector<std::string> Planner::hosts() const {
  auto all = layout_.hosts;
  all.insert(all.end(), absent_.begin(), absent_.end());
  return all;
}

Round Planner::next(double elapsed_s) {
  if (index_ > 0) durations_.push_back(std::max(0.0, elapsed_s - last_start_));
  last_start_ = elapsed_s;
  Round r;
  r.index = ++index_;
  if (within_done_ < within_turns_) {
    r.kind = RoundKind::within;
    r.turn = within_done_++;
    return r;
  }
  bool more = circle_done_ < circle_min_;
  if (!more && circle_done_ < circle_max_ && !durations_.empty()) {
    // Another turn of partners if it, and the deciding rounds after it, fit.
    const double per_round = durations_.back();
    more = elapsed_s + per_round * (1 + opt_.max_retest_rounds) <= opt_.time_budget_s;
  }
  if (more) {
    r.kind = RoundKind::circle;
    r.turn = circle_done_++;
    return r;
  }
  if (retests_done_ < opt_.max_retest_rounds) {
    auto pairs = retest_pairs();
    if (!pairs.empty()) {
      ++retests_done_;
      r.kind = RoundKind::pairs;
      r.node_pairs = std::move(pairs);
      return r;
    }
  }
  r.kind = RoundKind::done;
  --index_;
  return r;
}

void Planner::record(const Round& round, const std::vector<PairResult>& results,
                     const std::vector<int>& gone) {
  for (int rank : gone) {
    const int node = rank >= 0 && rank < layout_.ranks() ? layout_.node_of[rank] : -1;
    if (node < 0) continue;
    rank_gone_[rank] = true;
    if (gone_round_[node] != 0) continue;
    gone_round_[node] = round.index;
    gone_why_[node] = "stopped answering in round " + std::to_string(round.index) + " (" +
                      round.stage() + ")";
  }
  // Both ends report a pair: the faster time (the slower includes waiting for
  // the other end to arrive), the first failure.
  std::map<std::pair<int, int>, PairResult> pairs;
  for (const auto& p : results) {
    auto [it, fresh] = pairs.try_emplace({p.a, p.b}, p);
    if (fresh) continue;
    if (!p.ok && it->second.ok) it->second.ok = false, it->second.why = p.why;
    it->second.gbps = std::max(it->second.gbps, p.gbps);
  }
  // Every pair the round planned, whether or not both ends reported.
  std::map<std::pair<int, int>, NodeTest> tests;
  for (int rank = 0; rank < layout_.ranks(); ++rank) {
    const int other = partner_in(round, layout_, rank);
    if (other < rank) continue;  // resting, or seen from the lower rank
    auto it = pairs.find({rank, other});
    PairResult p;
    if (it != pairs.end()) {
      p = it->second;
    } else {
      p.ok = false;
      p.why = "neither end reported the exchange";
    }
    int a = layout_.node_of[rank], b = layout_.node_of[other];
    if (round.kind == RoundKind::pairs)  // the suspect first
      for (auto [s, g] : round.node_pairs)
        if (s == b && g == a) std::swap(a, b);
    if (round.kind == RoundKind::circle && b < a) std::swap(a, b);
    auto [t, fresh] = tests.try_emplace({a, b});
    NodeTest& test = t->second;
    const std::string where = "ranks " + std::to_string(rank) + "<->" + std::to_string(other);
    if (fresh) {
      test.round = round.index;
      test.stage = round.stage();
      test.partner = a == b ? -1 : b;
      test.gbps = p.ok ? p.gbps : 0;
      test.where = where;
    }
    if (!p.ok && !test.failed) {
      test.failed = true;
      test.why = p.why;
      test.where = where;
    } else if (p.ok && !test.failed && p.gbps < test.gbps) {
      test.gbps = p.gbps;
      test.where = where;
    }
  }
  for (auto& [nodes, test] : tests) {
    test_nodes_.push_back(nodes);
    tests_.push_back(test);
  }
}

}  // namespace gpudiag::sweep
