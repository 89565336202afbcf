// The MPI tree's nodes and groups (see mpi_tree_shape.h).
#include "plane/mpi_tree_shape.h"

#include <algorithm>
#include <climits>

#include "util/strings.h"

namespace gpudiag {

MpiTreeShape MpiTreeShape::from_leaders(const std::vector<int>& leader_of, int group_nodes) {
  MpiTreeShape s;
  s.size = static_cast<int>(leader_of.size());
  s.group_nodes = std::max(1, group_nodes);
  s.node_of.assign(leader_of.size(), -1);
  // A leader leads itself; a rank naming anything else leads its own node.
  auto lead = [&](int r) {
    const int l = leader_of[r];
    return l >= 0 && l < s.size && leader_of[l] == l && l <= r ? l : r;
  };
  for (int r = 0; r < s.size; ++r) {
    const int l = lead(r);
    if (l == r) {
      s.node_of[r] = static_cast<int>(s.nodes.size());
      s.nodes.push_back({r});
    }
  }
  // Leaders were met in rank order, so nodes are numbered by leader.
  for (int r = 0; r < s.size; ++r) {
    const int l = lead(r);
    if (l == r) continue;
    const int k = s.node_of[l];
    s.node_of[r] = k;
    s.nodes[k].push_back(r);
  }
  return s;
}

std::pair<int, int> MpiTreeShape::nodes_of_group(int g) const {
  if (!grouped()) return {0, node_count() - 1};
  return {g * group_nodes, std::min(node_count(), (g + 1) * group_nodes) - 1};
}

std::pair<int, int> MpiTreeShape::rank_span_of_group(int g) const {
  auto [a, b] = nodes_of_group(g);
  int lo = INT_MAX, hi = -1;
  for (int k = a; k <= b; ++k) {
    lo = std::min(lo, nodes[k].front());
    hi = std::max(hi, nodes[k].back());
  }
  return {lo, hi};
}

std::vector<int> MpiTreeShape::ranks_of_group(int g) const {
  auto [a, b] = nodes_of_group(g);
  std::vector<int> out;
  for (int k = a; k <= b; ++k) out.insert(out.end(), nodes[k].begin(), nodes[k].end());
  std::sort(out.begin(), out.end());
  return out;
}

namespace {
/// "6-7" for a run of ranks, else "1,3,5" (util's rank_ranges).
std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.empty()) return "none";
  if (ranks.back() - ranks.front() + 1 == static_cast<int>(ranks.size()))
    return ranks.size() == 1 ? std::to_string(ranks.front())
                             : std::to_string(ranks.front()) + "-" + std::to_string(ranks.back());
  return rank_ranges(std::vector<long long>(ranks.begin(), ranks.end()));
}
}  // namespace

std::string MpiTreeShape::node_label(int k) const {
  return "node " + std::to_string(k) + (nodes[k].size() == 1 ? " (rank " : " (ranks ") +
         ranks_text(nodes[k]) + ")";
}

std::string MpiTreeShape::group_label(int g) const {
  auto [a, b] = nodes_of_group(g);
  const std::string span = a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b);
  return "group " + std::to_string(g) + " (nodes " + span + ", ranks " +
         ranks_text(ranks_of_group(g)) + ")";
}

}  // namespace gpudiag
