// What MpiTreePlane's judges (mpi_tree_plane.cpp) say to each other and
// decide, without MPI, so it is tested in one process
// (mpi_tree_judge_test.cpp).
//
// Up: a node's leader sends its judge a *bundle*: its ranks' needs on one
// JSON line ({"5":[0]}), then its node's part (tree.h: records, missing ranks
// with notes). A group's judge gathers its nodes' bundles into a
// `LevelTable`, reviews it with the check's own tree review (TreeReviewer,
// checks/tree_review.h) and sends the root a *report*: the ranks outside the
// group its ranks need on one line, then a part with the review, the missing
// ranks and their notes, and the nodes whose leader never reported (`lost`).
// The root (rank 0) judges group 0's nodes, and any node whose leader came
// to it because its group's judge went silent, as a table of its own, and
// merges that review with the groups' (`judge_root`), as the store tree's
// root does (relay.cpp). A node both in its judge's report and heard
// directly counts once, in the report.
//
// Down: one *down* message per child: the root's digest
// (checkpoint_digest.h: missing ranks as bounded ranges, notes for the first
// 64, the review), a JSON line of extras ({"send":[...]}: the ranks of this
// group whose records the root asks for, for the report's table), then the
// records the child's ranks asked for, framed as a part's. Everything read
// comes from another process and is bounded: a sender speaks only for its
// own node's or group's ranks.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plane/mpi_tree_shape.h"
#include "tree/tree.h"

namespace gpudiag {

using Needs = std::map<int, std::vector<int>>;  ///< rank -> the ranks whose records it asks for

struct NodeBundle {
  Needs needs;
  TreePart part;
};

std::string encode_bundle(const TreePart& part, const Needs& needs);
/// Node k's bundle; nullopt when the text is not one. Only k's ranks count.
std::optional<NodeBundle> decode_bundle(const std::string& text, const MpiTreeShape& s, int k);

/// A judge's table of nodes at one checkpoint.
struct LevelTable {
  std::string checkpoint;
  std::map<int, std::string> records;
  std::vector<int> missing;          ///< ascending once finished
  std::map<int, std::string> notes;  ///< for the first kMaxPartNotes missing
  Needs needs;
  std::vector<int> lost;  ///< nodes whose leader did not report
  /// Node k: its bundle, or (null) its leader did not report.
  void add_node(const MpiTreeShape& s, int k, const NodeBundle* b);
  void add_missing(int r, const std::string& note);
  void finish();
};

struct GroupReport {
  std::vector<int> needs;  ///< ranks outside the group its ranks asked for
  TreePart part;
};

/// A group judge's report of `t`, with its `review` of it.
std::string encode_group_report(const LevelTable& t, const std::string& review,
                                const MpiTreeShape& s, int g);
/// Group g's report; nullopt when the text is not one. Only g's ranks count.
std::optional<GroupReport> decode_group_report(const std::string& text, const MpiTreeShape& s,
                                               int g);

/// What the root heard at a checkpoint.
struct RootHeard {
  std::string checkpoint;
  std::map<int, NodeBundle> nodes;     ///< node -> its leader's bundle (group 0, or came direct)
  std::map<int, GroupReport> groups;   ///< group g > 0 -> its judge's report
};

struct RootVerdict {
  LevelTable direct;  ///< the nodes the root judged itself: their records and needs
  std::vector<int> missing;  ///< every missing rank of the job, ascending
  std::map<int, std::string> notes;
  std::string review;  ///< the merged review: the digest's
};

/// The root's judgement: group 0's nodes and the nodes that came direct
/// reviewed here, merged with the groups' reviews. A group whose judge did
/// not report costs the nodes that did not come direct.
RootVerdict judge_root(const MpiTreeShape& s, const RootHeard& h, TreeReviewer* reviewer);

struct DownMessage {
  std::string digest;     ///< checkpoint_digest.h's
  std::vector<int> send;  ///< ranks whose records the root asks this group's judge for
  std::map<int, std::string> records;
};

std::string encode_down(const DownMessage& m);
std::optional<DownMessage> decode_down(const std::string& text, int size);

/// The records of `have` that the ranks `who` asked for in `needs`.
std::map<int, std::string> records_for(const std::map<int, std::string>& have, const Needs& needs,
                                       const std::vector<int>& who);

}  // namespace gpudiag
