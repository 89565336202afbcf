// The planner's verdicts (plan.h), recomputed from every test, and the
// deciding pairs they call for:
//   1. nodes whose ranks stopped answering are MISSING (all of them) or
//      FAILED (some); a bad test with such a node says nothing of its partner;
//   2. a bad test within a node is that node's own;
//   3. across nodes, deciding tests (against nodes known good when they were
//      planned) decide their suspect: the last, when it passed; a bad one
//      when the one before it was bad too (kConfirmations), else the suspect
//      is tested again; otherwise a node whose exchanges failed
//      with two or more partners that each passed with someone else is
//      FAILED (a node that is only slow waits for a deciding test), and a
//      node whose bad tests are all with nodes found bad is OK;
//   4. what is left with a bad test is SUSPECT: the tests cannot tell which
//      side of its pair is at fault (no node known good to test it against).
#include <algorithm>
#include <map>
#include <set>

#include "sweep/plan.h"

namespace gpudiag::sweep {

struct Planner::Judged {
  std::vector<NodeVerdict> verdicts;
  std::vector<bool> known_good;
  double within_ref = 0, cross_ref = 0;
};

Planner::Judged Planner::judge() const {
  const int n = layout_.nodes();
  Judged j;
  j.verdicts.resize(n);
  std::vector<int> gone_ranks(n, 0);
  for (int r = 0; r < layout_.ranks(); ++r)
    if (layout_.node_of[r] >= 0 && rank_gone_[r]) ++gone_ranks[layout_.node_of[r]];
  auto gone = [&](int node) { return node >= 0 && gone_round_[node] != 0; };
  // Class references from the tests that moved data between nodes still here,
  // not the deciding tests: those measure suspects again and again, and in a
  // small pool would pull the reference down to the slow node's own speed.
  std::vector<double> within, cross;
  for (std::size_t i = 0; i < tests_.size(); ++i) {
    const auto [a, b] = test_nodes_[i];
    if (tests_[i].failed || gone(a) || gone(b) || tests_[i].stage == "deciding") continue;
    (a == b ? within : cross).push_back(tests_[i].gbps);
  }
  j.within_ref = upper_quartile(within);
  j.cross_ref = upper_quartile(cross);
  // Each node's score: the median of its tests across nodes. A slow NIC or
  // cable makes every test of its node slow; a busy moment makes some tests
  // of any node slow. So a test that is merely slow counts against a pair only
  // when one of the two nodes is slow at its median (or in a deciding test).
  std::vector<std::vector<double>> by_node(n);
  for (std::size_t i = 0; i < tests_.size(); ++i) {
    const auto [a, b] = test_nodes_[i];
    if (a == b || tests_[i].failed || gone(a) || gone(b) || tests_[i].stage == "deciding") continue;
    by_node[a].push_back(tests_[i].gbps);
    by_node[b].push_back(tests_[i].gbps);
  }
  std::vector<double> score(n, -1), scores;
  for (int x = 0; x < n; ++x) {
    auto& v = by_node[x];
    if (v.empty()) continue;
    std::sort(v.begin(), v.end());
    score[x] = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    scores.push_back(score[x]);
  }
  std::sort(scores.begin(), scores.end());
  const double node_ref = scores.empty() ? 0 : scores[scores.size() / 2];
  auto slow_node = [&](int x) { return score[x] >= 0 && score[x] < opt_.slow_fraction * node_ref; };
  std::vector<NodeTest> tests = tests_;
  for (std::size_t i = 0; i < tests.size(); ++i) {
    const auto [a, b] = test_nodes_[i];
    const double ref = a == b ? j.within_ref : j.cross_ref;
    const bool slow = tests[i].gbps < opt_.slow_fraction * ref;
    tests[i].bad = tests[i].failed ||
                   (slow && (a == b || tests[i].stage == "deciding" || slow_node(a) || slow_node(b)));
  }
  auto bad_state = [](const NodeTest& t) { return t.failed ? NodeState::failed : NodeState::slow; };
  std::vector<int> decided(n, 0);  // 1 bad, 2 ok, 3 likely slow (to be confirmed)
  for (int x = 0; x < n; ++x) {
    auto& v = j.verdicts[x];
    v.node = x;
    if (gone(x)) {
      v.state = !failed_early_[x] && gone_ranks[x] >= static_cast<int>(layout_.members[x].size())
                    ? NodeState::missing
                    : NodeState::failed;
      v.reason = gone_why_[x];
      decided[x] = 1;
    }
  }
  for (std::size_t i = 0; i < tests.size(); ++i) {  // 2: a node's own tests
    const int x = test_nodes_[i].first;
    if (test_nodes_[i].second != x || !tests[i].bad || decided[x]) continue;
    j.verdicts[x].state = bad_state(tests[i]);
    j.verdicts[x].evidence = tests[i];
    decided[x] = 1;
  }
  // 3: across nodes. Per node, its cross tests (the partner's view too).
  struct Seen {
    NodeTest test;
    int partner;
    bool deciding_for_me;
  };
  std::vector<std::vector<Seen>> seen(n);
  for (std::size_t i = 0; i < tests.size(); ++i) {
    const auto [a, b] = test_nodes_[i];
    if (a == b) continue;
    const bool deciding = tests[i].stage == "deciding";
    NodeTest mine = tests[i], theirs = tests[i];
    mine.partner = b;
    theirs.partner = a;
    seen[a].push_back({mine, b, deciding});
    if (!deciding) seen[b].push_back({theirs, a, false});  // a deciding test is the suspect's
  }
  auto passed_elsewhere = [&](int p, int x) {
    for (const auto& s : seen[p])
      if (s.partner != x && !s.test.bad) return true;
    return false;
  };
  for (int x = 0; x < n; ++x) {
    if (decided[x]) continue;
    // Its deciding tests in order: the last decides, and a bad one only
    // once kConfirmations of them in a row (each against another node
    // known good) were bad; before that it is a suspect, tested again.
    const Seen* last_deciding = nullptr;
    std::vector<int> bad_run;  // the partners of the bad deciding tests in a row
    for (const auto& s : seen[x])
      if (s.deciding_for_me && !gone(s.partner)) {
        last_deciding = &s;
        if (s.test.bad) bad_run.push_back(s.partner);
        else bad_run.clear();
      }
    if (last_deciding) {
      auto& v = j.verdicts[x];
      v.evidence = last_deciding->test;
      const std::string what = last_deciding->test.failed ? "failed" : "slow";
      if (bad_run.empty()) {
        decided[x] = 2;
      } else if (static_cast<int>(bad_run.size()) >= kConfirmations) {
        decided[x] = 1;
        v.state = bad_state(last_deciding->test);
        v.confirmations = static_cast<int>(bad_run.size());
        std::string with;
        for (int p : bad_run) with += (with.empty() ? "" : ", ") + layout_.hosts[p];
        v.reason = what + " in " + std::to_string(bad_run.size()) +
                   " deciding tests in a row against nodes known good (" + with + ")";
      } else {
        decided[x] = 3;
        v.state = NodeState::suspect;
        v.reason = what + " in a deciding test against " + layout_.hosts[bad_run.back()] +
                   ", a node known good; not confirmed by a second one (a busy moment is not "
                   "a bad node)";
      }
      continue;
    }
    std::set<int> bad_partners;
    bool all_explain = true;
    const NodeTest* worst = nullptr;
    for (const auto& s : seen[x]) {
      if (!s.test.bad || gone(s.partner)) continue;
      // A slow (not failed) test speaks against this node only when it is
      // slow at its median too; else it is its partner's, or a busy moment.
      if (!s.test.failed && !s.deciding_for_me && !slow_node(x)) continue;
      bad_partners.insert(s.partner);
      all_explain = all_explain && passed_elsewhere(s.partner, x);
      if (!worst || (s.test.failed && !worst->failed) ||
          (s.test.failed == worst->failed && s.test.gbps < worst->gbps))
        worst = &s.test;
    }
    // Failures name the node at once; slowness only through a deciding test
    // against a node known good (a busy moment must not exclude a node).
    if (bad_partners.size() >= 2 && all_explain) {
      j.verdicts[x].evidence = *worst;
      if (worst->failed) {
        decided[x] = 1;
        j.verdicts[x].state = NodeState::failed;
        j.verdicts[x].confirmations = static_cast<int>(bad_partners.size());
      } else {  // likely slow: explains its partners' tests, confirmed by a deciding test
        decided[x] = 3;
        j.verdicts[x].state = NodeState::suspect;
        j.verdicts[x].reason = "slow with " + std::to_string(bad_partners.size()) +
                               " partners that are fast with others; no deciding test against "
                               "a node known good has confirmed it";
      }
    }
  }
  for (int x = 0; x < n; ++x) {
    if (decided[x]) continue;
    const NodeTest* worst = nullptr;
    const NodeTest* weakest = nullptr;
    bool unexplained = false;
    const NodeTest* weakest_any = nullptr;
    for (const auto& s : seen[x]) {
      // An OK node's evidence: its weakest test with a partner still standing.
      if (!weakest_any || s.test.gbps < weakest_any->gbps) weakest_any = &s.test;
      if (!gone(s.partner) && decided[s.partner] != 1 && (!weakest || s.test.gbps < weakest->gbps))
        weakest = &s.test;
      if (!s.test.bad || gone(s.partner) || decided[s.partner] == 1 || decided[s.partner] == 3)
        continue;
      if (!s.test.failed && !slow_node(x)) continue;  // as above
      unexplained = true;
      if (!worst || s.test.gbps < worst->gbps) worst = &s.test;
    }
    auto& v = j.verdicts[x];
    if (unexplained) {
      v.state = NodeState::suspect;
      v.evidence = *worst;
      v.reason = "a bad test with " + layout_.hosts[worst->partner] +
                 " that no test against a node known good has settled";
    } else {
      // An OK node shows its weakest test, across nodes first (within when it has none).
      if (!weakest) weakest = weakest_any;
      if (!weakest)
        for (std::size_t i = 0; i < tests.size(); ++i)
          if (test_nodes_[i].first == x && test_nodes_[i].second == x &&
              (!weakest || tests[i].gbps < weakest->gbps))
            weakest = &tests[i];
      if (weakest) v.evidence = *weakest;
    }
  }
  j.known_good.assign(n, false);
  for (int x = 0; x < n; ++x) {
    if (decided[x] == 1 || decided[x] == 3 || j.verdicts[x].state != NodeState::ok || gone(x))
      continue;
    // Known good: cleared by a deciding test, or every test of it passed, or
    // failed only with a node found bad or gone.
    bool any = false, clean = true;
    for (const auto& s : seen[x]) {
      any = any || !s.test.bad;
      clean = clean && (!s.test.bad || gone(s.partner) || decided[s.partner] == 1 ||
                        decided[s.partner] == 3);
    }
    j.known_good[x] = decided[x] == 2 || (any && clean);
  }
  for (auto& v : j.verdicts) {
    if (!v.evidence) continue;
    v.threshold_gbps = opt_.slow_fraction * (v.evidence->partner < 0 ? j.within_ref : j.cross_ref);
  }
  return j;
}

std::vector<std::pair<int, int>> Planner::retest_pairs() const {
  const Judged j = judge();
  const int n = layout_.nodes();
  std::set<std::pair<int, int>> met, decided_with;
  for (std::size_t i = 0; i < test_nodes_.size(); ++i) {
    const auto [a, b] = test_nodes_[i];
    met.insert({std::min(a, b), std::max(a, b)});
    if (tests_[i].stage == "deciding") decided_with.insert({a, b});  // suspect first
  }
  std::vector<bool> used(n, false);
  std::vector<std::pair<int, int>> out;
  // A partner it has not met yet first; else one it met but not in a deciding
  // test (a confirmation is against another node known good); else any (a
  // new measurement of the same pair still tells a passing suspect from one
  // that fails again).
  for (int tier = 0; tier < 3; ++tier)
    for (int x = 0; x < n; ++x) {
      if (j.verdicts[x].state != NodeState::suspect || used[x]) continue;
      for (int g = 0; g < n; ++g) {
        if (!j.known_good[g] || used[g]) continue;
        if (tier == 0 && met.count({std::min(x, g), std::max(x, g)})) continue;
        if (tier == 1 && decided_with.count({x, g})) continue;
        used[g] = used[x] = true;
        out.emplace_back(x, g);
        break;
      }
    }
  return out;
}

std::vector<NodeVerdict> Planner::verdicts() const {
  auto v = judge().verdicts;
  for (std::size_t i = 0; i < absent_.size(); ++i) {
    NodeVerdict a;
    a.node = layout_.nodes() + static_cast<int>(i);
    a.state = NodeState::missing;
    a.reason = "never arrived: none of its ranks reached the sweep";
    v.push_back(a);
  }
  return v;
}

}  // namespace gpudiag::sweep
