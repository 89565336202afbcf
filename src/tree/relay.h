// One judge of the tree (tree/tree.h): a node's leader, a group's
// judge at any level above the nodes (a group, a supergroup, ...), or the
// root.
//
// At each checkpoint a relay waits in its own store (`below`) for its
// children: a node's ranks set cp/<n>/<r> (store_plane.h); a judge's
// children set tree/cp/<n>/node/<k>, tree/cp/<n>/group/<g> or, a level up,
// tree/cp/<n>/group2/<s> (TreeLayout::level_key). The children have
// `timeout` after the first of them arrives (a judge's wait stretches while
// they keep coming: a level's slack after each, up to twice the wait); an
// announced failure cuts that to a grace, and children a launcher reported
// dead are not waited for. The relay then sends its parent (`above`) one
// part: a node passes its ranks' records with the missing ones and what is
// known of them (pid, host, last phase); a judge reviews the records that came straight from nodes
// (TreeReviewer), merges its children's reviews and passes the review, its
// missing ranks and rank 0's record; an absent child is named "node 12
// (ranks 96-103)" or "group 3 (...)", its ranks missing. The root merges
// and publishes the digest (tree/cp/<n>/digest), with a missing rank's note
// only the first time it is missing. On the way down each relay copies its
// parent's digest into its own store; a node's leader also copies in the
// records its ranks asked for (need/<n>/<r>) from the parts its parent
// holds, and the digest last, as cp/<n>/digest for its ranks. What the
// root's reviewer leaves for rank 0 alone (TreeReviewer::for_judge: the
// sweep's round results) goes down the same way to node 0's store alone
// (tree/cp/<n>/judge at the root and each judge over node 0, cp/<n>/judge at
// node 0).
//
// Failures and deaths travel at once: while it waits, a relay copies new
// announcements (store_plane.h: failures, failure/<i>, dead/<r>) from its own
// store to its parent's and from its parent's into its own, never echoing its
// own: one hop per level. When a relay's parent judge is lost (its
// connection fails, or it sends no digest), the relay says so one level up,
// at the store of the judge above the lost one (tree/lost/<g> for a group,
// tree/lost/group2/<s> for a supergroup, ...; `beyond` lists those stores,
// the root's last), and reports there instead; that judge then waits for
// the lost judge's children itself: a dead group judge costs its own node,
// not its 128, and a dead supergroup judge its own host, not its 128 groups.
// A relay whose next judge up is lost too goes on up, saying at each store
// it reaches which judges it lost.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"
#include "tree/tree.h"
#include "util/deadline.h"

namespace gpudiag {

enum class RelayLevel { node, group, root };

struct RelayOptions {
  RelayLevel level = RelayLevel::node;
  int index = 0;   ///< node k or group g at `height` (0 for the root)
  int height = 1;  ///< (a group's judge) its level: 1 a group, 2 a supergroup, ...
  TreeLayout layout;
  Store* below = nullptr;  ///< this relay's own store, where its children write
  Store* above = nullptr;  ///< the parent's store (none for the root)
  /// The stores of the judges above the parent, nearest first, the root's
  /// last (none when the parent is the root): where this relay reports when
  /// the judge below each is lost.
  std::vector<Store*> beyond;
  TreeReviewer* reviewer = nullptr;
  /// How long the children have after the first arrives, when the ranks do
  /// not say (their checkpoint's wait, cp/<n>/wait, comes up in the parts
  /// and wins); `slack` is added to the ranks' wait (a second per level
  /// below, so a node that waited out its own straggler still reports).
  std::chrono::milliseconds timeout{60000};
  std::chrono::milliseconds slack{0};
  /// How long a relay waits for its parent's digest past its own decision:
  /// the levels above may each wait `timeout` for their own stragglers.
  std::chrono::milliseconds digest_grace{5000};
  /// (A node) a connection to the store of judge `index` at `level` (1: a
  /// group's), to read other groups' nodes' records when a rank asks for
  /// every record ("*"); unset: its own group's only.
  std::function<std::unique_ptr<Store>(int level, int index)> connect_judge;
};

/// What a judge adds to its children's wait for each level below it: the
/// hops and the judges' own work between a straggler's leader and it.
inline constexpr std::chrono::milliseconds kSlackPerLevel{1000};

/// The options of one judge: its children get `wait` (when the ranks do not
/// say theirs) plus `per_level` for each level below it, so a node that
/// waited out its own straggler still reports in time; it waits for its
/// parent's digest twice `wait` and 5 s past its own decision.
RelayOptions relay_options(const TreeLayout& layout, RelayLevel level, int index,
                           std::chrono::milliseconds wait, std::chrono::milliseconds per_level,
                           int height = 1);

class Relay {
 public:
  explicit Relay(RelayOptions o);

  /// Checkpoint `seq`: waits for the children (the first for up to `idle`),
  /// then sends the part up (the root: publishes the digest). False when no
  /// child came within `idle` or `stop` said so.
  bool collect(int seq, Deadline idle, const std::function<bool()>& stop = {});
  /// Waits for the parent's digest of checkpoint `seq` and passes it down.
  /// False when it never came (the ranks below then judge for themselves).
  bool pass_down(int seq, const std::function<bool()>& stop = {});
  /// collect and pass_down until every child said goodbye (bye/<r>,
  /// tree/bye/...), none came within `idle`, or `stop` returns true; then
  /// says goodbye to the parent. For a leader's thread.
  void run(std::chrono::milliseconds idle, const std::function<bool()>& stop);
  /// Copies announcements across (called while waiting; at most every
  /// 100 ms unless `now`).
  void forward_announcements(bool now = false);

  /// Keys and values this relay sent to and read from its parent and the
  /// root (for the simulator's bytes per level).
  std::uint64_t bytes_up() const { return up_bytes_; }
  std::uint64_t bytes_below() const { return below_bytes_; }

 private:
  struct Child {
    int level;         ///< -1 a rank, 0 a node, 1.. a group's judge (tree.h)
    int id;            ///< rank, node or group
    std::string key;   ///< where it writes at this checkpoint
    int first, last;   ///< the ranks it speaks for
  };
  std::vector<Child> children(int seq);
  /// Adds judge `id` of `level` (its children in its place when it is lost).
  void add_child(std::vector<Child>& out, int seq, int level, int id);
  TreePart gather(int seq, Deadline idle, const std::function<bool()>& stop, bool& came);
  /// Polls for `kids`' parts into `vals` until all came or the deadline;
  /// false when none came within `idle` or `stop` said so (relay_gather.cpp).
  bool wait_children(int seq, Deadline idle, const std::function<bool()>& stop,
                     std::vector<Child>& kids, std::vector<std::optional<std::string>>& vals);
  /// The part sent up from what came: every rank below a record or missing.
  TreePart assemble(int seq, const std::vector<Child>& kids,
                    const std::vector<std::optional<std::string>>& vals);
  /// Reads the lost keys of absent judges among `kids`; true when one is new.
  bool learn_lost(const std::vector<Child>& kids, const std::vector<std::optional<std::string>>& vals);
  void describe_ranks(TreePart& p, const std::vector<int>& missing);
  std::string checkpoint_name(int seq);
  /// The ranks' wait for checkpoint `seq` (0: not said), from the store
  /// (a node) or the first part that arrived.
  long long ranks_wait(int seq, const std::vector<Child>& kids,
                       const std::vector<std::optional<std::string>>& vals);
  Store& parent();
  /// The judge at `level` above this relay (its parent: level_ + 1).
  int judge_at(int level) const;
  std::string label() const;
  /// Whether a judge beyond the parent is left to report to.
  bool can_go_up() const { return hop_ < static_cast<int>(o_.beyond.size()); }
  void lose_parent(const std::string& why);
  /// (A judge that learned of a lost judge below) says so at its parent's
  /// store (busy_key), so the parent waits for it past its own wait.
  void say_busy(int seq);
  /// Whether an absent child judge said it is busy with a lost judge's
  /// children, newly since `seen` (its counts, updated).
  bool busy_below(int seq, const std::vector<Child>& kids,
                  const std::vector<std::optional<std::string>>& vals,
                  std::map<std::string, long long>& seen);
  void copy_needs(int seq, const std::string& digest);
  /// (A node's leader) the records its ranks asked for from other nodes
  /// (need/<n>/<r>), and whether one asked for every record ("*").
  std::set<int> far_needs(int seq, bool& every);
  /// (Group 0's judge, node 0's leader) the root's share for rank 0
  /// (TreeReviewer::for_judge), from the parent's store into this one's
  /// (tree/cp/<n>/judge; a node's: cp/<n>/judge).
  void copy_judge_share(int seq);
  /// Where the parts of group g's nodes are: its judge's store, or the
  /// nearest judge's above it when it is lost (`held` keeps a connection).
  /// A judge's store not reached once in `unreached` is not tried again.
  Store* parts_of_group(int g, std::unique_ptr<Store>& held,
                        std::set<std::pair<int, int>>& unreached);
  Store* judge_store(int level, int g, std::unique_ptr<Store>& keep,
                     std::set<std::pair<int, int>>& unreached);
  bool all_said_bye();

  RelayOptions o_;
  int level_ = 0;  ///< 0 a node, `height` a group's judge, layout.levels() + 1 the root
  std::set<std::pair<int, int>> gone_;  ///< children (level, id) that missed a checkpoint: not waited for again
  std::chrono::milliseconds last_wait_{0};  ///< the ranks' wait at the last checkpoint
  std::set<std::pair<int, int>> lost_;  ///< judges (level, id) below that are lost: their children report here
  int hop_ = 0;  ///< 0: reports to `above`; i: to beyond[i - 1] (the judges between are lost)
  /// The parent's store found gone while copying announcements (at hop_
  /// `first`): the next write goes up at once, not after a reconnection's wait.
  std::optional<std::pair<int, std::string>> parent_gone_;
  /// Goes up now when parent_gone_ says the current parent is gone.
  bool up_if_parent_gone();
  std::set<int> noted_;  ///< (root) missing ranks whose note a digest carried
  // Announcements: how many were read from each side, and our own copies.
  std::int64_t seen_below_ = 0, seen_above_ = 0;
  std::set<std::int64_t> own_below_, own_above_;
  Deadline::Clock::time_point next_forward_{};
  /// (A judge) when to read the parent's announcements next, and how long
  /// after that: doubling while nothing new comes (relay_detail.h's
  /// next_slice), from kForwardEvery again at each checkpoint.
  Deadline::Clock::time_point next_above_{};
  std::chrono::milliseconds above_every_{100};
  std::uint64_t up_bytes_ = 0, below_bytes_ = 0;
  bool aborted_below_ = false;
  std::optional<std::string> first_death_, first_failure_;  ///< announced below, as read
  std::pair<std::string, std::string> last_part_;  ///< key and part last sent up
  std::string judge_share_;  ///< (root) for rank 0 alone, set beside the digest
};

}  // namespace gpudiag
