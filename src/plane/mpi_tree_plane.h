// MpiTreePlane's class, shared by its two files: mpi_tree_plane.cpp (a rank,
// a node's leader, a group's judge, failures) and mpi_tree_root.cpp (rank 0).
// Internal to the plane: the rest of gpudiag makes one with
// make_mpi_tree_plane (plane.h). How it works: mpi_tree_plane.cpp's header.
#pragma once

#include <mpi.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "plane/mpi_mail.h"
#include "plane/mpi_tree_judge.h"
#include "plane/plane.h"

namespace gpudiag::mpi_tree {

inline constexpr int kTagFailure = 6999;
inline constexpr int kTagBase = 17000;  // apart from MpiPlane's
inline constexpr auto kGrace = std::chrono::seconds(5);
inline constexpr int kMaxForwarded = 16;  ///< failure announcements a rank passes on

/// A checkpoint's messages, one tag each: tag(seq, kind).
enum Kind { kRecord, kToMember, kBundle, kToLeader, kReport, kToJudge, kAsked, kAck };
inline int tag(int seq, Kind k) { return kTagBase + 8 * (seq % 1000) + k; }
inline Deadline past(Deadline d, int graces) { return Deadline::at(d.when() + graces * kGrace); }

class MpiTreePlane : public Plane {
 public:
  MpiTreePlane(MpiSession& s, int node_size, int group_nodes, std::unique_ptr<TreeReviewer> rv);
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override {
    return grouped_ ? "MPI through node leaders and group judges" : "MPI through node leaders";
  }
  std::uint64_t bytes_moved() const override { return mail_.bytes(); }
  void announce_failure(const std::string& why) override;
  std::optional<std::string> peer_failure() override;
  Gathered gather_all(const std::string& name, const std::string& mine, Deadline deadline,
                      const std::vector<int>& wait_for, const std::vector<int>& need,
                      const Review& review) override;

 private:
  // Every leader: its node.
  void take_member(NodeBundle& own, int from, const std::string& m);
  int leader_of(int r) const { return shape_.leader(shape_.node_of[r]); }
  bool judges_group() const { return grouped_ && group_ != 0 && shape_.judge(group_) == rank_; }
  bool node_pending(const NodeBundle& own) const;
  void close_node(NodeBundle& own);
  void collect_node(NodeBundle& own, int seq, Deadline deadline);
  /// Receives every waiting message with tag `t` from anyone: on(from,
  /// text); how many came.
  template <class F>
  int drain(int t, F&& on);
  std::optional<std::string> wait_for_one(int from, int t, Deadline until);
  void pass_to_node(Gathered& g, const DownMessage& down, const NodeBundle& own, int seq);
  Gathered unjudged(Gathered& g, const std::map<int, std::string>& known);
  void read_down(Gathered& g, const std::string& text, std::optional<DownMessage> down);
  void lose_judge(const std::string& why);

  Gathered as_member(Gathered& g, const std::vector<int>& need, const std::string& mine, int seq,
                     Deadline deadline);
  Gathered as_leader(Gathered& g, NodeBundle& own, int seq, Deadline deadline);
  Gathered as_judge(Gathered& g, NodeBundle& own, int seq, Deadline deadline);
  Gathered as_root(Gathered& g, NodeBundle& own, const std::vector<int>& need, int seq,
                   Deadline deadline, const Review& review);
  /// Rank 0's asks of the groups' judges (the report's table): sends none
  /// past the digest; returns what came back within a grace.
  void take_asked(Gathered& g, const std::map<int, std::vector<int>>& asked, int seq);

  /// This rank's parent and children in the tree.
  std::vector<int> neighbours() const;
  void forward_failures();

  int rank_, size_, leader_ = 0;
  bool grouped_ = false;
  MpiTreeShape shape_;  ///< a leader's
  int node_ = 0, group_ = 0;
  std::unique_ptr<TreeReviewer> reviewer_;
  std::set<int> skip_;    ///< members not waited for (known gone)
  std::set<int> gone_;    ///< nodes (rank 0: and groups, as -1 - g) that missed a checkpoint
  std::set<int> direct_;  ///< rank 0: nodes of other groups that report here
  bool judge_lost_ = false;
  bool leader_quiet_ = false;  ///< a member: its leader sent no digest last time
  int seq_ = 0, forwarded_ = 0;
  std::optional<std::string> failure_;
  MpiMail mail_;
};

template <class F>
int MpiTreePlane::drain(int t, F&& on) {
  int got = 0;
  for (; got < 64; ++got) {
    int from = -1;
    auto m = mail_.try_recv(MPI_ANY_SOURCE, t, t != kTagFailure, &from);
    if (!m) break;
    on(from, *m);
  }
  return got;
}

}  // namespace gpudiag::mpi_tree
