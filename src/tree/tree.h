// The shape of a large job's control plane: ranks on nodes, nodes in groups,
// and what one level tells the next at a checkpoint.
//
// Past a few thousand ranks one store and one judge do not serve a job well
// (docs/ARCHITECTURE.md): a rank talks only to its node's *leader*, which
// judges its node's ranks and sends its parent one *part*; past
// `group_nodes` nodes, leaders are grouped under second-level judges, whose
// parts go to the root; past `group_nodes` groups, groups are grouped under
// third-level judges (supergroups), and so on: every judge has at most
// `group_nodes` children (TreeLayout::levels()). The root's digest goes back
// down the same way. Ranks
// are laid out in blocks: node k holds ranks k*per_node .. k*per_node +
// per_node - 1 (torchrun's and gpudiag launch's order, SLURM's default block
// distribution); a job laid out otherwise runs flat.
//
// A part (one store value): a header line, "gpudiag-part/1 <length>", the
// header itself in JSON,
//   {"checkpoint":"exchange","wait_ms":60000,"missing":[3,7],"notes":{"3":"..."},
//    "aborted":"..."|null,"review":"..."|null,"lost":[12]}
// then the records it passes on, each "<rank> <length>\n<record>" (records
// are JSON already: framed, not escaped again). A node passes all of its
// ranks' records with the missing ones and what is known of them; a group
// (or a supergroup) passes rank 0's record and the review of its table (or
// the merge of its children's reviews) instead of the rest;
// `lost`: nodes whose leader never reported. A part comes from another
// process and is not trusted: records and missing ranks outside the sender's
// own ranks are dropped, notes cut to one line, at most 64 kept, the review
// cut at kMaxPartReview, and a frame that runs past the end rejects the part.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpudiag {

/// The tree turns itself on from this many ranks (GPUDIAG_TREE=auto).
inline constexpr int kAutoTreeRanks = 2048;

/// Whether and how a job meets through node leaders, as read once
/// (settings/job_settings.h; tree/tree_host.h plans from it).
struct TreeSettings {
  enum class Mode { automatic, on, off } mode = Mode::automatic;
  /// GPUDIAG_TREE_GROUP_NODES: nodes under one judge a level up (0: the default).
  int group_nodes = 0;
  /// GPUDIAG_TREE_PORT: the node's store (0: MASTER_PORT + 1).
  int node_port = 0;
  /// GPUDIAG_TREE_LEADER=launch: gpudiag launch leads this node, not local rank 0.
  bool launch_leads = false;
  /// GPUDIAG_MPI_NODE_SIZE: ranks per node in blocks under MPI (0: MPI's split).
  int mpi_node_size = 0;
};

/// Judges above the nodes come in levels: level 1 judges a group of up to
/// `group_nodes` nodes, level l a group of up to `group_nodes` judges of
/// level l-1 (group_nodes^l nodes), and the root the judges of the top level
/// (or the nodes themselves when there are at most group_nodes of them).
/// levels() is the number of levels between the nodes and the root: 0 up to
/// group_nodes nodes, 1 up to group_nodes^2, 2 up to group_nodes^3, ...
/// Level 0 is the nodes themselves (index k: node k).
struct TreeLayout {
  int world = 0;
  int per_node = 8;
  int group_nodes = 128;  ///< children under one judge above the nodes (the fan-out)

  int nodes() const { return per_node > 0 ? (world + per_node - 1) / per_node : 0; }
  /// Nodes are grouped under second-level judges only past group_nodes.
  bool grouped() const { return nodes() > group_nodes; }
  int groups() const { return judges(1); }
  int node_of(int rank) const { return rank / per_node; }
  int group_of_node(int node) const { return node / group_nodes; }
  /// [first, last] rank of node k.
  std::pair<int, int> ranks_of_node(int k) const;
  /// [first, last] node of group g.
  std::pair<int, int> nodes_of_group(int g) const { return nodes_of(1, g); }
  /// [first, last] rank of group g.
  std::pair<int, int> ranks_of_group(int g) const { return ranks_of(1, g); }
  /// "node 12 (ranks 96-103)".
  std::string node_label(int k) const;
  /// "group 3 (nodes 384-511, ranks 3072-4095)".
  std::string group_label(int g) const { return label(1, g); }

  // Any level (0: nodes).
  /// Levels of judges between the nodes and the root (see above).
  int levels() const;
  /// Nodes one judge of `level` spans at most: group_nodes^level (capped at nodes()).
  long long span(int level) const;
  /// Judges at `level` (1..levels()); nodes() at 0; 0 above levels().
  int judges(int level) const;
  /// The judge of `level` over node k.
  int judge_of_node(int level, int k) const { return static_cast<int>(k / span(level)); }
  /// The judge of `level` over judge `index` of level `below` (below <= level).
  int judge_above(int level, int below, int index) const {
    return static_cast<int>(index * span(below) / span(level));
  }
  /// [first, last] node of judge `index` at `level`.
  std::pair<int, int> nodes_of(int level, int index) const;
  /// [first, last] rank of judge `index` at `level`.
  std::pair<int, int> ranks_of(int level, int index) const;
  /// [first, last] child (of level-1) of judge `index` at `level` >= 1.
  std::pair<int, int> children_of(int level, int index) const;
  /// What a judge of `level` is called: "node", "group", "supergroup", then
  /// "level-3 group", ...
  static std::string level_name(int level);
  /// Its key in the tree's keys: "node", "group", "group2", "group3", ...
  static std::string level_key(int level);
  /// "node 12 (ranks 96-103)", "group 3 (nodes 384-511, ranks 3072-4095)",
  /// "supergroup 1 (groups 128-255, nodes 16384-32767, ranks 131072-262143)".
  std::string label(int level, int index) const;
};

struct TreePart {
  std::string checkpoint;  ///< its name, as the ranks gave it ("exchange")
  long long wait_ms = 0;   ///< how long the ranks wait for stragglers (0: not said)
  std::map<int, std::string> records;
  std::vector<int> missing;          ///< ascending
  std::map<int, std::string> notes;  ///< for missing ranks, at most kMaxPartNotes
  std::optional<std::string> aborted;
  std::optional<std::string> review;
  std::vector<int> lost;  ///< nodes whose leader never reported
  /// A rank below asked for rank 0's record from another node (need/<n>/<r>
  /// names 0: an NCCL rank its id, the sweep its plan): only then does the
  /// root's digest carry it, not to every rank at every checkpoint.
  bool wants_rank0 = false;
};

inline constexpr std::size_t kMaxPartNotes = 64;
/// A group's review in its part, at most: the review a flat judge sends
/// (64 KiB at most) and the group's summary of fingerprints for the root
/// (world/fingerprint_summary.h, 64 KiB at most), with room to spare.
inline constexpr std::size_t kMaxPartReview = 192 * 1024;

std::string encode_part(const TreePart& p);
/// Decodes a part sent by whoever speaks for ranks [first, last]; nullopt
/// when the text is not a part. What lies outside the range is dropped.
std::optional<TreePart> decode_part(const std::string& text, int first, int last);

/// A review to merge and the ranks [first, last] its sender speaks for (what
/// it says of other ranks is not believed).
struct ChildReview {
  std::string text;
  int first = 0, last = 0;
};

/// Reviews a level's table and merges children's reviews: the check's
/// judgement (checks/tree_review.h), kept out of the plane.
class TreeReviewer {
 public:
  virtual ~TreeReviewer() = default;
  /// The review of a table: `records` by rank (the ranks that arrived),
  /// `missing` ascending, `notes` for some of the missing.
  virtual std::string review(const std::string& checkpoint, const std::map<int, std::string>& records,
                             const std::vector<int>& missing,
                             const std::map<int, std::string>& notes) = 0;
  /// One review from the reviews of disjoint parts of the job (the root's
  /// is the digest's: it also drops what only the root needed).
  virtual std::string merge(const std::string& checkpoint,
                            const std::vector<ChildReview>& reviews) = 0;
  /// (The root) what goes to rank 0 alone, beside the digest every rank
  /// reads, from the same reviews: "" for nothing (the check). The sweep's
  /// judge plans its next round from it (sweep/tree_results.h).
  virtual std::string for_judge(const std::string& /*checkpoint*/,
                                const std::vector<ChildReview>& /*reviews*/) {
    return {};
  }
  /// One review from the reviews of disjoint parts of the job, for a judge
  /// between the groups and the root (a supergroup's): its parent merges it
  /// again, so it keeps what the root needs (the check: a summary of the
  /// fingerprints). By default merge().
  virtual std::string merge_up(const std::string& checkpoint,
                               const std::vector<ChildReview>& reviews) {
    return merge(checkpoint, reviews);
  }
};

}  // namespace gpudiag
