// Who may write which key of gpudiag's store (see key_owners.h): the key's
// family and rank are parsed from its text, then checked against the
// connection's claim and the first claimant of each rank.
#include "store/key_owners.h"

#include <algorithm>

#include "store/store_limits.h"
#include "store/store_wire.h"

namespace gpudiag {

namespace {

constexpr std::size_t kMaxDuplicatesNamed = 8;
// A judge opens a few connections to a store (its join, its parts, a
// group's address); more for one place are not kept as its.
constexpr std::size_t kMaxConnsPerPlace = 8;

/// "hello/7" with family "hello/" -> 7; nullopt when `key` is not
/// `family` followed by a rank number.
std::optional<std::int64_t> rank_of(const std::string& key, const std::string& family) {
  if (key.compare(0, family.size(), family) != 0) return std::nullopt;
  return storelimits::parse_bounded(key.substr(family.size()), 0, storewire::kNoRank - 1);
}

/// "cp/<n>/<rest>": <rest>, when `key` is a checkpoint key.
std::optional<std::string> checkpoint_tail(const std::string& key) {
  if (key.compare(0, 3, "cp/") != 0) return std::nullopt;
  auto slash = key.find('/', 3);
  if (slash == std::string::npos || !storelimits::parse_bounded(key.substr(3, slash - 3), 0, 1 << 30))
    return std::nullopt;
  return key.substr(slash + 1);
}

std::string claim_text(std::uint32_t rank) {
  return rank == storewire::kNoRank ? "no rank (a launcher)" : "rank " + std::to_string(rank);
}

}  // namespace

KeyOwners::KeyOwners(int world_size, bool launchers_allowed, bool leaders_judge)
    : owner_(world_size > 0 ? static_cast<std::size_t>(world_size) : 0, 0),
      launchers_(launchers_allowed),
      leaders_judge_(leaders_judge) {}

void KeyOwners::set_tree(const TreeStoreRole& role) {
  tree_ = role;
  if (owner_.size() < static_cast<std::size_t>(std::max(role.layout.world, 0)))
    owner_.assign(static_cast<std::size_t>(role.layout.world), 0);
}

bool KeyOwners::owns_tree_claim(std::uint64_t conn, std::uint32_t claim) const {
  if (!storewire::is_tree_claim(claim)) return false;
  auto it = tree_owner_.find(claim);
  return it != tree_owner_.end() && it->second.conns.count(conn) != 0;
}

namespace {

/// "group/12", "group2/3", "node/5" at the start of `text`: the level and the
/// index; nullopt when it is none of the tree's kinds.
std::optional<std::pair<int, int>> tree_place(const std::string& text) {
  for (int level = 0; level <= storewire::kMostClaimLevel; ++level)
    if (auto i = rank_of(text, TreeLayout::level_key(level) + "/"))
      return std::make_pair(level, static_cast<int>(*i));
  return std::nullopt;
}

}  // namespace

std::optional<std::optional<std::string>> KeyOwners::tree_refuse(std::uint64_t conn,
                                                                 std::uint32_t claim,
                                                                 const std::string& key) const {
  namespace sw = storewire;
  const TreeStoreRole& t = *tree_;
  const TreeLayout& L = t.layout;
  const std::uint32_t own = t.kind == TreeStoreRole::Kind::root    ? sw::kRootClaim
                            : t.kind == TreeStoreRole::Kind::group ? sw::group_claim(t.index, t.level)
                                                                   : sw::node_claim(t.index);
  const bool mine = owns_tree_claim(conn, claim);
  if (mine && claim == own) return std::optional<std::string>();  // the store's own judge
  // A node's leader (level 0) or a judge of a level above it.
  const int level = mine ? sw::claim_level(claim) : -1;
  const bool judge = level >= 0;
  const int index = static_cast<int>(claim & sw::kClaimIndexMask);
  const std::string who = "this connection claimed " +
                          (!sw::is_tree_claim(claim) ? claim_text(claim)
                           : judge                  ? L.label(level, index)
                                                    : std::string("a judge's place it does not own"));
  auto refused = [&](const std::string& what) {
    return std::optional<std::optional<std::string>>(
        std::optional<std::string>(what + " ('" + key + "'), and " + who));
  };
  auto allowed = std::optional<std::optional<std::string>>(std::optional<std::string>());
  // Whether this connection's place lies under judge `i` of level `l`.
  auto under = [&](int l, int i) {
    return judge && level < l && L.judge_above(l, level, index) == i;
  };
  if (key.rfind("tree/", 0) == 0) {
    // tree/cp/<n>/<kind>/<i>, tree/bye/<kind>/<i>: a child's part, its goodbye.
    std::string tail = key.substr(5);
    if (tail.rfind("cp/", 0) == 0) {
      const auto slash = tail.find('/', 3);
      if (slash == std::string::npos) return refused("only the store's judge writes it");
      tail = tail.substr(slash + 1);
      // tree/cp/<n>/busy/<kind>/<i>: that judge waits for a lost judge's
      // children (relay_detail.h, busy_key); its own place, as its part.
      if (tail.rfind("busy/", 0) == 0) tail = tail.substr(5);
    } else if (tail.rfind("bye/", 0) == 0) {
      tail = tail.substr(4);
    } else if (tail.rfind("lost/", 0) == 0) {
      // tree/lost/<g> (a group's judge), tree/lost/<kind>/<i> (a judge above):
      // reported by a place under it.
      auto p = rank_of(key, "tree/lost/") ? std::optional<std::pair<int, int>>(
                                                 {1, static_cast<int>(*rank_of(key, "tree/lost/"))})
                                           : tree_place(tail.substr(5));
      if (!p || p->first < 1) return refused("only the store's judge writes it");
      return under(p->first, p->second)
                 ? allowed
                 : refused("only a place under " + L.level_name(p->first) + " " +
                           std::to_string(p->second) + " reports its judge lost");
    } else if (auto p = tree_place(tail); p && p->first >= 1) {
      // tree/group/<g>, tree/group2/<s>: where that judge's store is.
      return judge && level == p->first && index == p->second
                 ? allowed
                 : refused("only " + L.level_name(p->first) + " " + std::to_string(p->second) +
                           "'s judge says where its store is");
    } else {
      return refused("only the store's judge writes the tree's keys");
    }
    if (auto p = tree_place(tail))
      return judge && level == p->first && index == p->second
                 ? allowed
                 : refused("only " + L.level_name(p->first) + " " + std::to_string(p->second) +
                           "'s " + (p->first == 0 ? "leader" : "judge") + " sends its part");
    return refused("only the store's judge writes it");
  }
  if (auto r = rank_of(key, "dead/")) {
    const int rank = static_cast<int>(*r);
    if (judge && rank < L.world && L.judge_of_node(level, L.node_of(rank)) == index) return allowed;
    return refused("only the judge of the node or group holding rank " + std::to_string(rank) +
                   " reports its death");
  }
  if (key == "failures" || rank_of(key, "failure/")) {
    if (!judge) return std::nullopt;  // a rank's own announcement: the rank rules
    if (auto n = rank_of(key, "failure/")) {
      const auto i = static_cast<std::size_t>(*n);
      if (i >= announcer_.size() || announcer_[i] != conn)
        return refused("announcement " + std::to_string(*n) +
                       " was not numbered for this connection by its ADD to 'failures'");
    }
    return allowed;
  }
  if (checkpoint_tail(key) && judge)
    return refused("a judge of another node or group does not write this store's checkpoints");
  return std::nullopt;  // the rank rules decide, with no launcher's rights
}

void KeyOwners::closed(std::uint64_t conn, std::uint32_t claim) {
  if (!storewire::is_tree_claim(claim)) return;
  auto it = tree_owner_.find(claim);
  if (it == tree_owner_.end()) return;
  it->second.conns.erase(conn);
  if (it->second.conns.empty()) tree_owner_.erase(it);
}

std::optional<std::string> KeyOwners::greeted(std::uint64_t conn, std::uint32_t rank,
                                              const std::string& peer) {
  if (storewire::is_tree_claim(rank)) {
    // "ip:port" (or "[v6]:port"): the host is all before the last colon.
    const std::string host = peer.substr(0, peer.rfind(':'));
    auto& place = tree_owner_[rank];
    if (place.conns.empty()) place.host = host;
    if (place.host == host && place.conns.size() < kMaxConnsPerPlace) {
      place.conns.insert(conn);
    } else if (duplicates_.size() < kMaxDuplicatesNamed) {
      duplicates_.push_back("a judge's place (again, from " + peer + ")");
    }
    return std::nullopt;
  }
  if (rank >= owner_.size()) return std::nullopt;
  if (owner_[rank] == 0) {
    owner_[rank] = conn;
    return std::nullopt;
  }
  if (duplicates_.size() < kMaxDuplicatesNamed)
    duplicates_.push_back("rank " + std::to_string(rank) + " (again, from " + peer + ")");
  std::string text = "a second connection claimed ";
  for (std::size_t i = 0; i < duplicates_.size(); ++i)
    text += (i ? ", " : "") + duplicates_[i];
  return text;
}

std::optional<std::int64_t> KeyOwners::claim_answer(std::uint64_t conn, std::uint32_t rank,
                                                    const std::string& key) const {
  if (rank >= owner_.size()) return std::nullopt;
  auto r = rank_of(key, "claim/");
  if (!r || static_cast<std::uint32_t>(*r) != rank) return std::nullopt;
  return owner_[rank] == conn ? 1 : 2;
}

bool KeyOwners::is_owner(std::uint64_t conn, std::uint32_t rank) const {
  return rank < owner_.size() && owner_[rank] == conn;
}

/// `conn` may write the keys of `rank`: it claimed it and, within the world, owns it.
bool KeyOwners::owns(std::uint64_t conn, std::uint32_t rank) const {
  return rank != storewire::kNoRank && (rank >= owner_.size() || owner_[rank] == conn);
}

std::optional<std::string> KeyOwners::refuse(std::uint64_t conn, std::uint32_t rank,
                                             const std::string& key, bool is_add,
                                             bool trusted) const {
  if (key == "server" || key == "duplicates") return "the key '" + key + "' is the store's own";
  if (owner_.empty() || trusted) return std::nullopt;  // ownership off, or the store's own process
  if (tree_)
    if (auto decided = tree_refuse(conn, rank, key)) return *decided;
  const std::string who = "this connection claimed " + claim_text(rank);
  auto per_rank = [&](std::int64_t r) -> std::optional<std::string> {
    if (static_cast<std::uint32_t>(r) == rank && owns(conn, rank)) return std::nullopt;
    if (static_cast<std::uint32_t>(r) != rank)
      return "the key '" + key + "' belongs to rank " + std::to_string(r) + " and " + who;
    return "the key '" + key + "' belongs to the first connection that claimed rank " +
           std::to_string(r) + ", and this one claimed it again (a duplicate RANK?)";
  };
  for (const char* family : {"hello/", "phase/", "bye/"})
    if (auto r = rank_of(key, family)) return per_rank(*r);
  if (auto r = rank_of(key, "claim/")) {
    if (is_add && static_cast<std::uint32_t>(*r) == rank) return std::nullopt;  // a duplicate learns so
    return per_rank(*r);
  }
  if (auto tail = checkpoint_tail(key)) {
    const bool leader = leaders_judge_ && launchers_ && rank == storewire::kNoRank && !tree_;
    if (*tail == "digest" || *tail == "judge")
      return is_owner(conn, 0) || leader ? std::nullopt
                               : std::optional<std::string>("the checkpoint digest '" + key +
                                                            "' is rank 0's and " + who);
    if (auto r = storelimits::parse_bounded(*tail, 0, storewire::kNoRank - 1)) {
      if (leader && static_cast<std::size_t>(*r) < owner_.size() && owner_[*r] == 0)
        return std::nullopt;  // another node's record, copied in by the leader
      return per_rank(*r);
    }
    return std::nullopt;
  }
  // Under the tree nobody has a launcher's rights (the judges claim places).
  const bool launcher = rank == storewire::kNoRank && launchers_ && !tree_;
  if (rank_of(key, "dead/"))
    return launcher ? std::nullopt
                    : std::optional<std::string>("only a launcher reports a death ('" + key +
                                                 "'), and " + who);
  if (key == "failures" && !is_add)
    return "the announcement counter 'failures' is only added to, 1 at a time, and " + who;
  if (key == "failures" || rank_of(key, "failure/")) {
    if (!launcher && !(rank < owner_.size() && is_owner(conn, rank)))
      return "only a rank's own connection or a launcher announces a failure ('" + key + "'), and " +
             who +
             (rank == storewire::kNoRank ? ""
              : rank >= owner_.size()    ? ", outside this job of " + std::to_string(owner_.size()) +
                                            " ranks"
                                         : " after another connection");
    if (auto n = rank_of(key, "failure/")) {
      // The text of announcement n comes from the connection that got n.
      const auto i = static_cast<std::size_t>(*n);
      if (i >= announcer_.size() || announcer_[i] != conn)
        return "announcement " + std::to_string(*n) + " ('" + key +
               "') was not numbered for this connection by its ADD to 'failures'";
    }
  }
  return std::nullopt;
}

std::optional<std::string> KeyOwners::refuse_add(std::uint64_t conn, std::uint32_t rank,
                                                 const std::string& key, std::int64_t delta,
                                                 bool trusted) {
  if (auto why = refuse(conn, rank, key, true, trusted)) return why;
  if (owner_.empty() || trusted || key != "failures") return std::nullopt;
  if (delta != 1)
    return "an announcement adds 1 to 'failures', not " + std::to_string(delta);
  const int budget = rank == storewire::kNoRank || owns_tree_claim(conn, rank)
                         ? static_cast<int>(owner_.size()) + kRankAnnouncements
                         : kRankAnnouncements;
  if (announced_[conn] >= budget)
    return "this connection already made " + std::to_string(budget) +
           " announcements, as many as it may";
  return std::nullopt;
}

void KeyOwners::added(std::uint64_t conn, const std::string& key, std::int64_t sum) {
  if (owner_.empty() || key != "failures" || sum < 1) return;
  ++announced_[conn];
  // Numbers beyond what the job's connections can make are never owned.
  const std::size_t most = (owner_.size() + 1) * (kRankAnnouncements + 1) + owner_.size();
  const auto n = static_cast<std::size_t>(sum);
  if (n >= most) return;
  if (announcer_.size() <= n) announcer_.resize(n + 1, 0);
  announcer_[n] = conn;
}

}  // namespace gpudiag
