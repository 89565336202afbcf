// The shape of MpiTreePlane's tree (mpi_tree_plane.cpp): which ranks share a
// node, which nodes share a group, and who judges each.
//
// MPI tells every rank its node's leader (the lowest world rank of the ranks
// MPI_Comm_split_type puts together, or of a block of GPUDIAG_MPI_NODE_SIZE
// ranks); from that list alone every rank computes the same shape: nodes
// numbered by their leaders in rank order, groups of `group_nodes`
// consecutive nodes (only past that many nodes), each judged by the leader of
// its first node, so group 0's judge is rank 0. Nodes need not be blocks of
// ranks (Open MPI's --map-by node puts ranks 0,2,4 on one host): labels name
// a node's ranks as a list of ranges when they are not one run.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace gpudiag {

struct MpiTreeShape {
  int size = 0;
  int group_nodes = 128;
  std::vector<std::vector<int>> nodes;  ///< node k: its ranks, ascending; by leader
  std::vector<int> node_of;             ///< rank -> its node

  /// From each rank's leader (`leader_of[r]`, a rank of r's node). Leaders
  /// that do not lead themselves, or ranks outside the world, are taken as
  /// their own nodes: the shape is always one every rank agrees on.
  static MpiTreeShape from_leaders(const std::vector<int>& leader_of, int group_nodes);

  int node_count() const { return static_cast<int>(nodes.size()); }
  /// Nodes are grouped under judges only past group_nodes.
  bool grouped() const { return node_count() > group_nodes; }
  int groups() const { return grouped() ? (node_count() + group_nodes - 1) / group_nodes : 1; }
  int group_of_node(int k) const { return grouped() ? k / group_nodes : 0; }
  int group_of_rank(int r) const { return group_of_node(node_of[r]); }
  /// [first, last] node of group g.
  std::pair<int, int> nodes_of_group(int g) const;
  int leader(int k) const { return nodes[k].front(); }
  /// The rank that judges group g: its first node's leader.
  int judge(int g) const { return leader(nodes_of_group(g).first); }
  /// The lowest and highest rank of group g.
  std::pair<int, int> rank_span_of_group(int g) const;
  /// Every rank of group g, ascending.
  std::vector<int> ranks_of_group(int g) const;
  /// "node 3 (ranks 6-7)", "node 1 (ranks 1,3,5)".
  std::string node_label(int k) const;
  /// "group 1 (nodes 2-3, ranks 4-7)".
  std::string group_label(int g) const;
};

}  // namespace gpudiag
