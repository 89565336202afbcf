// Who may write which key of gpudiag's store, so that on a store without a
// job secret a record is only believed from the connection that claimed its
// rank (store_plane.h lists the keys).
//
// Every connection claims a rank at its handshake (or none: a launcher). The
// first connection to claim rank r owns it for the life of the store; a
// later one claiming r is a duplicate (a second process with the same RANK,
// or an outsider posing as it). With ownership on:
//   claim/<r>             the owner of r; a duplicate of r may only ADD to it,
//                         so it learns that it is one (duplicate RANK)
//   hello/<r> phase/<r> bye/<r> cp/<n>/<r>
//                         the owner of r only
//   cp/<n>/digest cp/<n>/judge
//                         the owner of rank 0 (the judge); on a node leader's
//                         store, the leader (a launcher connection)
//   cp/<n>/<r>            (as hello/) and, on a node leader's store, the
//                         leader for a rank nobody here claimed
//   failures              owners of ranks in the world, and launchers where
//                         allowed, by ADD only, 1 at a time, at most kRankAnnouncements
//                         times per rank's connection (a launcher: once per rank
//                         and a few more); so the counter can neither be pushed
//                         past what the job can announce nor hide a death
//   failure/<n>           only the connection whose ADD to failures returned n
//   dead/<r>              launchers where allowed
//   server duplicates     nobody: the server writes them itself
//   anything else         any connection
// Ranks beyond the world size own nothing and may write only their own
// rank's records (a WORLD_SIZE mismatch is diagnosed from them); they never
// announce a failure.
// Without ownership (unit tests, tools that use the store generically) any
// connection writes any key except the server's own.
//
// Under the tree of judges (set_tree(): this store's place, the layout)
// nobody is "a launcher": a connection that speaks for more than a rank
// claims node k, group g (or a judge's place above: supergroup s, ...) or the
// root at its handshake (store_wire.h), the
// first claim owns it, and:
//   everything          the store's own process (its judges run where the
//                       store is served: `trusted`, server side), and the
//                       owner of the store's own place (node k on node k's
//                       store, group g on group g's, the root on the root's)
//   tree/cp/<n>/node/<k>, tree/bye/node/<k>
//                       node k's owner (on its group's store, or the root's)
//   tree/cp/<n>/group/<g>, tree/bye/group/<g>, tree/group/<g>
//                       group g's owner (on its supergroup's store, or the
//                       root's); the same for a judge of a level above
//                       (tree/cp/<n>/group2/<s>, ...: supergroup s's owner)
//   tree/lost/<g>, tree/lost/group2/<s>, ...
//                       the owner of a place under that judge (its judge is lost)
//   other tree/ keys    nobody but the store's own judge
//   dead/<r>            the owner of the node or group that holds rank r
//   failures, failure/<n>
//                       owners of tree claims, as launchers would (bounded)
// A connection claiming no rank and no judge's place gets no launcher's
// rights: an outsider without the secret cannot forge a death, a failure,
// a part or a digest for anyone.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tree/tree.h"

namespace gpudiag {

/// Announcements one rank's connection may make (a failure, then its death
/// seen by itself is never more than a couple).
inline constexpr int kRankAnnouncements = 4;

/// A store's place in the tree of judges.
struct TreeStoreRole {
  enum class Kind { root, group, node };
  Kind kind = Kind::root;
  int index = 0;  ///< group g or node k
  TreeLayout layout;
  int level = 1;  ///< a group's level: 1 a group, 2 a supergroup, ... (tree.h)
};

class KeyOwners {
 public:
  /// This store serves the tree (see above); ownership follows the layout.
  void set_tree(const TreeStoreRole& role);

  /// `world_size` 0 turns ownership off.
  /// `leaders_judge`: the store is a node leader's (tree/relay.h): its
  /// launcher connection (the leader) writes the checkpoint digest, and the
  /// records of ranks no connection here claimed (other nodes' ranks, copied
  /// in for the ranks that need them).
  KeyOwners(int world_size, bool launchers_allowed, bool leaders_judge = false);

  /// Connection `conn` (peer "ip:port") completed its handshake claiming
  /// `rank` (storewire::kNoRank for a launcher). Returns, for a duplicate
  /// claim, the new text of the server's `duplicates` key.
  std::optional<std::string> greeted(std::uint64_t conn, std::uint32_t rank,
                                     const std::string& peer);

  /// Why connection `conn`, which claimed `rank`, may not SET (or ADD to)
  /// `key`; nullopt when it may.
  std::optional<std::string> refuse(std::uint64_t conn, std::uint32_t rank, const std::string& key,
                                    bool is_add, bool trusted = false) const;

  /// refuse() for an ADD of `delta`, plus the announcement counter's rules
  /// (adds of 1, a bounded number per connection).
  std::optional<std::string> refuse_add(std::uint64_t conn, std::uint32_t rank,
                                        const std::string& key, std::int64_t delta,
                                        bool trusted = false);

  /// An ADD from `conn` to `key` gave `sum`: an announcement number for
  /// `failures` now belongs to that connection.
  void added(std::uint64_t conn, const std::string& key, std::int64_t sum);

  /// What an ADD to `key` from `conn` (which claimed `rank`) answers when
  /// `key` is that rank's claim: 1 for its owner, 2 for a duplicate, whatever
  /// the order the two ADDs arrive in (ownership goes by handshake order).
  std::optional<std::int64_t> claim_answer(std::uint64_t conn, std::uint32_t rank,
                                           const std::string& key) const;

  /// `conn` is the first connection that claimed `rank` (within the world).
  bool is_owner(std::uint64_t conn, std::uint32_t rank) const;

  /// Connection `conn`, which claimed `claim`, closed: a judge's place whose
  /// every connection closed is free for the judge's next one (a node leader
  /// reaches the root again when its group's judge is lost). A rank's claim
  /// stays with its first connection.
  void closed(std::uint64_t conn, std::uint32_t claim);

 private:
  bool owns(std::uint64_t conn, std::uint32_t rank) const;

  std::vector<std::uint64_t> owner_;  ///< by rank; 0 while unclaimed (connection ids start at 1)
  std::vector<std::uint64_t> announcer_;  ///< by announcement number: its connection
  std::map<std::uint64_t, int> announced_;  ///< adds to `failures` per connection
  bool launchers_ = false;
  bool leaders_judge_ = false;
  std::optional<TreeStoreRole> tree_;
  /// A judge's place is held by the connections its judge opened from one
  /// host (a leader joins the root on one and sends its parts on another);
  /// a claim of it from another host while they are open is a duplicate.
  struct TreePlace {
    std::string host;
    std::set<std::uint64_t> conns;
  };
  std::map<std::uint32_t, TreePlace> tree_owner_;  ///< tree claim -> who holds it
  /// The tree's rules (see above); nullopt when the key is not theirs to decide.
  std::optional<std::optional<std::string>> tree_refuse(std::uint64_t conn, std::uint32_t claim,
                                                        const std::string& key) const;
  bool owns_tree_claim(std::uint64_t conn, std::uint32_t claim) const;
  std::vector<std::string> duplicates_;  ///< "rank 1 (again, from 10.0.0.5:4242)", a few
};

}  // namespace gpudiag
