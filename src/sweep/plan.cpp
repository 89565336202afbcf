// The sweep's plan and judgement (plan.h). The layout and round encodings
// are small text: the layout once at the start, a round per checkpoint, both
// bounded whatever the node count (a "list" layout is the only one that grows,
// by a few bytes a rank). The judgement is recomputed from every test so far
// whenever it is asked for, so a late result can change an earlier view.
#include "sweep/plan.h"

#include <algorithm>
#include <map>
#include <set>

#include "checks/links.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::sweep {

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw Error(ExitCode::broken, "rank 0 sent a malformed sweep " + what,
              "every rank must run the same gpudiag version");
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  for (auto& w : split(s, ' '))
    if (!w.empty()) out.push_back(w);
  return out;
}

int number(const std::string& s, int lo, int hi, const char* what) {
  auto v = parse_int(s);
  if (!v || *v < lo || *v > hi) bad(what);
  return static_cast<int>(*v);
}

}  // namespace

int Layout::local_index(int rank) const {
  if (rank < 0 || rank >= ranks() || node_of[rank] < 0) return -1;
  const auto& m = members[node_of[rank]];
  return static_cast<int>(std::lower_bound(m.begin(), m.end(), rank) - m.begin());
}

Layout make_layout(const std::vector<std::optional<std::string>>& host_of_rank) {
  Layout l;
  l.node_of.assign(host_of_rank.size(), -1);
  std::map<std::string, int> index;
  for (std::size_t r = 0; r < host_of_rank.size(); ++r) {
    if (!host_of_rank[r]) continue;
    auto [it, fresh] = index.try_emplace(*host_of_rank[r], l.nodes());
    if (fresh) {
      l.members.emplace_back();
      l.hosts.push_back(*host_of_rank[r]);
    }
    l.node_of[r] = it->second;
    l.members[it->second].push_back(static_cast<int>(r));
  }
  return l;
}

std::string encode_layout(const Layout& l) {
  const int n = l.ranks(), nodes = l.nodes();
  if (nodes > 0 && n % nodes == 0) {
    const int per = n / nodes;
    bool block = true, cyclic = true;
    for (int r = 0; r < n; ++r) {
      block = block && l.node_of[r] == r / per;
      cyclic = cyclic && l.node_of[r] == r % nodes;
    }
    if (block) return "block " + std::to_string(per) + " " + std::to_string(nodes);
    if (cyclic) return "cyclic " + std::to_string(nodes);
  }
  std::string out = "list";
  for (int r = 0; r < n; ++r) out += " " + std::to_string(l.node_of[r]);
  return out;
}

Layout decode_layout(const std::string& text, int ranks) {
  const auto w = words(text);
  if (w.empty()) bad("layout");
  Layout l;
  l.node_of.assign(ranks, -1);
  int nodes = 0;
  if (w[0] == "block" && w.size() == 3) {
    const int per = number(w[1], 1, ranks, "layout");
    nodes = number(w[2], 1, ranks, "layout");
    if (static_cast<long long>(per) * nodes != ranks) bad("layout");
    for (int r = 0; r < ranks; ++r) l.node_of[r] = r / per;
  } else if (w[0] == "cyclic" && w.size() == 2) {
    nodes = number(w[1], 1, ranks, "layout");
    for (int r = 0; r < ranks; ++r) l.node_of[r] = r % nodes;
  } else if (w[0] == "list" && static_cast<int>(w.size()) == ranks + 1) {
    for (int r = 0; r < ranks; ++r) {
      l.node_of[r] = number(w[r + 1], -1, ranks - 1, "layout");
      nodes = std::max(nodes, l.node_of[r] + 1);
    }
  } else {
    bad("layout");
  }
  l.members.resize(nodes);
  l.hosts.resize(nodes);
  for (int r = 0; r < ranks; ++r)
    if (l.node_of[r] >= 0) l.members[l.node_of[r]].push_back(r);
  return l;
}

std::string Round::stage() const {
  switch (kind) {
    case RoundKind::within: return "within nodes";
    case RoundKind::circle: return "node pairs";
    case RoundKind::pairs: return "deciding";
    case RoundKind::done: return "done";
  }
  return "?";
}

std::string encode_round(const Round& r) {
  std::string out = std::to_string(r.index) + " ";
  switch (r.kind) {
    case RoundKind::within: return out + "within " + std::to_string(r.turn);
    case RoundKind::circle: return out + "circle " + std::to_string(r.turn);
    case RoundKind::done: return out + "done";
    case RoundKind::pairs:
      out += "pairs";
      for (auto [a, b] : r.node_pairs) out += " " + std::to_string(a) + "-" + std::to_string(b);
      return out;
  }
  return out;
}

Round decode_round(const std::string& text, int nodes) {
  const auto w = words(text);
  if (w.size() < 2) bad("round");
  Round r;
  r.index = number(w[0], 1, 1 << 20, "round");
  if (w[1] == "done" && w.size() == 2) {
    r.kind = RoundKind::done;
  } else if ((w[1] == "within" || w[1] == "circle") && w.size() == 3) {
    r.kind = w[1] == "within" ? RoundKind::within : RoundKind::circle;
    r.turn = number(w[2], 0, 1 << 20, "round");
  } else if (w[1] == "pairs") {
    r.kind = RoundKind::pairs;
    std::vector<bool> used(nodes, false);
    for (std::size_t i = 2; i < w.size(); ++i) {
      const auto ab = split(w[i], '-');
      if (ab.size() != 2) bad("round");
      const int a = number(ab[0], 0, nodes - 1, "round"), b = number(ab[1], 0, nodes - 1, "round");
      if (a == b || used[a] || used[b]) bad("round");  // disjoint pairs only
      used[a] = used[b] = true;
      r.node_pairs.emplace_back(a, b);
    }
  } else {
    bad("round");
  }
  return r;
}

int partner_in(const Round& round, const Layout& layout, int rank) {
  const int node = rank >= 0 && rank < layout.ranks() ? layout.node_of[rank] : -1;
  if (node < 0) return -1;
  const int i = layout.local_index(rank);
  auto same_index_on = [&](int other) {
    if (other < 0 || other >= layout.nodes()) return -1;
    const auto& m = layout.members[other];
    return i < static_cast<int>(m.size()) ? m[i] : -1;
  };
  switch (round.kind) {
    case RoundKind::within: {
      const auto& m = layout.members[node];
      const int p = link_partner(i, round.turn, static_cast<int>(m.size()));
      return p < 0 ? -1 : m[p];
    }
    case RoundKind::circle:
      return same_index_on(link_partner(node, round.turn, layout.nodes()));
    case RoundKind::pairs:
      for (auto [a, b] : round.node_pairs) {
        if (a == node) return same_index_on(b);
        if (b == node) return same_index_on(a);
      }
      return -1;
    case RoundKind::done:
      return -1;
  }
  return -1;
}

const char* state_name(NodeState s) {
  switch (s) {
    case NodeState::ok: return "OK";
    case NodeState::slow: return "SLOW";
    case NodeState::failed: return "FAILED";
    case NodeState::missing: return "MISSING";
    case NodeState::suspect: return "SUSPECT";
  }
  return "?";
}

double upper_quartile(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[(v.size() * 3) / 4];  // below size for any size >= 1
}

}  // namespace gpudiag::sweep
