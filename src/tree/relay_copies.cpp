// A tree judge's copies between levels (see relay.h): the records a node's
// ranks ask for from other nodes (from its group's store, another group's,
// or the root's when that group's judge was lost), the root's share for rank
// 0 (node 0's leader), and the failure and death announcements it copies up
// and down.
#include <spdlog/spdlog.h>

#include <map>
#include <optional>
#include <set>

#include "plane/checkpoint_digest.h"
#include "tree/relay.h"
#include "tree/relay_detail.h"
#include "plane/store_plane.h"

namespace gpudiag {

using namespace relay_detail;

/// The node's ranks' need/<n>/<r> ("5,17,33", or "*"), at most kMaxNeeds
/// ranks each, those on other nodes only.
std::set<int> Relay::far_needs(int seq, bool& every) {
  const auto& L = o_.layout;
  auto [a, b] = L.ranks_of_node(o_.index);
  std::vector<std::string> keys;
  for (int r = a; r <= b; ++r) keys.push_back("need/" + std::to_string(seq) + "/" + std::to_string(r));
  auto v = o_.below->multi_get(keys, Deadline::after(kAnswer));
  std::set<int> wanted;
  every = false;
  for (const auto& text : v) {
    if (!text) continue;
    if (*text == "*") {
      every = true;
      continue;
    }
    std::size_t count = 0, at = 0;
    while (at <= text->size() && count++ < kMaxNeeds) {
      auto comma = text->find(',', at);
      auto r = storelimits::parse_bounded(
          text->substr(at, comma == std::string::npos ? std::string::npos : comma - at), 0,
          L.world - 1);
      if (r && (*r < a || *r > b)) wanted.insert(static_cast<int>(*r));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  return wanted;
}

/// Copies into the node's store the records its ranks asked for that live
/// on other nodes, from those nodes' parts in the parent's store; a rank
/// beyond what the parent holds stays absent. Records the digest carries
/// (rank 0's, when a rank below asked for it: TreePart::wants_rank0) are
/// read there: fetching them would have every leader read node 0's part,
/// from group 0's store in a grouped tree. The needs are read again here,
/// not kept from the collect: a rank that came after it asks too.
void Relay::copy_needs(int seq, const std::string& digest) {
  const auto& L = o_.layout;
  bool every = false;
  std::set<int> wanted = far_needs(seq, every);
  if (!wanted.empty()) {
    Gathered carried;
    carried.records.resize(static_cast<std::size_t>(L.world));
    if (decode_digest(digest, -1, L.world, carried))
      for (auto it = wanted.begin(); it != wanted.end();)
        it = carried.records.at(static_cast<std::size_t>(*it)) ? wanted.erase(it) : std::next(it);
  }
  if (wanted.empty() && !every) return;
  std::vector<int> nodes;
  if (every) {
    for (int k = 0; k < L.nodes(); ++k)
      if (k != o_.index) nodes.push_back(k);
  } else {
    for (int r : wanted)
      if (nodes.empty() || nodes.back() != L.node_of(r)) nodes.push_back(L.node_of(r));
  }
  // Nodes' parts are in the parent's store (a group's own nodes), or in the
  // store of their group's judge (every record, at the end, on rank 0's node).
  std::map<int, std::vector<int>> by_store;  // -1: the parent's
  for (int k : nodes) {
    const int g = L.grouped() ? L.group_of_node(k) : -1;
    const bool here = !L.grouped() || g == L.group_of_node(o_.index);
    by_store[here || !o_.connect_judge ? -1 : g].push_back(k);
  }
  // Copies the wanted records of nodes `ks` from `from`; returns the nodes
  // whose part was not there.
  auto copy_from = [&](Store& from, const std::vector<int>& ks) {
    std::vector<int> absent;
    constexpr std::size_t kSlice = 128;  // parts per request
    for (std::size_t at = 0; at < ks.size(); at += kSlice) {
      std::vector<std::string> part_keys;
      for (std::size_t i = at; i < ks.size() && i < at + kSlice; ++i)
        part_keys.push_back(tree_cp(seq) + "node/" + std::to_string(ks[i]));
      auto parts = from.multi_get(part_keys, Deadline::after(kAnswer));
      for (std::size_t i = 0; i < part_keys.size(); ++i) {
        if (!parts[i]) {
          absent.push_back(ks[at + i]);
          continue;
        }
        up_bytes_ += part_keys[i].size() + parts[i]->size();
        auto [first, last] = L.ranks_of_node(ks[at + i]);
        auto p = decode_part(*parts[i], first, last);
        if (!p) continue;
        for (const auto& [r, text] : p->records)
          if (every || wanted.count(r))
            o_.below->set(cp(seq) + std::to_string(r), text, Deadline::after(kAnswer));
      }
    }
    return absent;
  };
  // A dead judge's store is tried once, not once per group below it: a
  // supergroup's 128 groups would each wait out its connection.
  std::set<std::pair<int, int>> unreached;
  for (const auto& [g, ks] : by_store) {
    if (g < 0) {
      copy_from(parent(), ks);
      continue;
    }
    // Another group's parts: at its judge's store, read there first, so a
    // healthy job's leaders never reach past it (a sweep's partners in other
    // groups would have every leader connect to the root's store each round,
    // past its connection limit). The nodes whose parts are not there are
    // looked for at the nearest live judge above, where they reported when
    // their judge was lost.
    std::vector<int> left = ks;
    try {
      std::unique_ptr<Store> own;
      left = copy_from(*judge_store(1, g, own, unreached), ks);
    } catch (const Error&) {
    }
    if (left.empty()) continue;
    try {
      std::unique_ptr<Store> other;
      copy_from(*parts_of_group(g, other, unreached), left);
    } catch (const Error& e) {
      spdlog::warn("{}: cannot read {}'s records: {}", L.node_label(o_.index), L.group_label(g),
                   e.one_line());
    }
  }
}

void Relay::copy_judge_share(int seq) {
  // Down the digest's way, set before it at each level: each judge over
  // node 0 copies it from its parent's store, node 0's leader last.
  const std::string key = tree_cp(seq) + "judge";
  try {
    auto share = parent().try_get(key, Deadline::after(kAnswer));
    if (!share) return;
    up_bytes_ += share->size();
    o_.below->set(o_.level == RelayLevel::group ? key : cp(seq) + "judge", *share,
                  Deadline::after(kAnswer));
  } catch (const Error& e) {
    // Rank 0 then finds no share, and says what it lacks.
    spdlog::warn("{}: the root's share for rank 0 not copied: {}", o_.layout.node_label(o_.index),
                 e.one_line());
  }
}

/// The store of the judge of `level` over group g: this node's own chain
/// where it shares it, else a new connection kept in `keep` (the root's is
/// the last of ours); one not reached before (in `unreached`) is not tried.
Store* Relay::judge_store(int level, int g, std::unique_ptr<Store>& keep,
                          std::set<std::pair<int, int>>& unreached) {
  const auto& L = o_.layout;
  if (level > L.levels()) return o_.beyond.empty() ? o_.above : o_.beyond.back();
  const int j = L.judge_above(level, 1, g);
  if (j == judge_at(level))
    return level == 1 ? o_.above : o_.beyond[static_cast<std::size_t>(level - 2)];
  if (unreached.count({level, j}))
    throw Error(ExitCode::broken, L.label(level, j) + "'s store was not reached before");
  try {
    keep = o_.connect_judge(level, j);
  } catch (const Error&) {
    unreached.insert({level, j});
    throw;
  }
  return keep.get();
}

/// Where the parts of group g's nodes are (copy_needs asks for those not
/// found at its judge's store): at that store, or, when
/// that judge is lost (its nodes said so one level up: tree/lost/<g>), at the
/// store above, and so on up to the root's. A judge above that cannot be
/// reached cannot say: then the judge below is tried itself. What the root
/// knows is read first, so a dead judge whose children reported past it to
/// the root costs no connection; one not reached is not tried again.
Store* Relay::parts_of_group(int g, std::unique_ptr<Store>& held,
                             std::set<std::pair<int, int>>& unreached) {
  const auto& L = o_.layout;
  auto store_of = [&](int level, std::unique_ptr<Store>& keep) {
    return judge_store(level, g, keep, unreached);
  };
  // What the root already knows: the judges over g whose children went
  // past them to the root (tree/lost/... there). Those are not tried, and
  // a lost judge's children are asked about at the next judge up not lost.
  std::vector<bool> known(static_cast<std::size_t>(L.levels()) + 2, false);
  try {
    std::vector<std::string> keys;
    for (int level = 1; level <= L.levels(); ++level)
      keys.push_back(lost_key(level, L.judge_above(level, 1, g)));
    std::unique_ptr<Store> none;
    auto v = store_of(L.levels() + 1, none)->multi_get(keys, Deadline::after(kAnswer));
    for (int level = 1; level <= L.levels(); ++level)
      known[static_cast<std::size_t>(level)] = v[static_cast<std::size_t>(level - 1)].has_value();
  } catch (const Error&) {
  }
  for (int level = 1; level <= L.levels(); ++level) {
    if (known[static_cast<std::size_t>(level)]) continue;
    int asked = level + 1;
    while (asked <= L.levels() && known[static_cast<std::size_t>(asked)]) ++asked;
    std::optional<bool> lost;  // unknown while the judge above cannot be asked
    try {
      std::unique_ptr<Store> up_keep;
      lost = store_of(asked, up_keep)
                 ->try_get(lost_key(level, L.judge_above(level, 1, g)), Deadline::after(kAnswer))
                 .has_value();
    } catch (const Error&) {
    }
    if (lost.value_or(false)) continue;
    if (lost) return store_of(level, held);
    try {
      Store* s = store_of(level, held);
      s->try_get("server", Deadline::after(kAnswer));  // reached, and answers
      return s;
    } catch (const Error&) {
    }
  }
  return store_of(L.levels() + 1, held);
}

bool Relay::up_if_parent_gone() {
  if (!parent_gone_ || parent_gone_->first != hop_ || !can_go_up()) return false;
  const std::string why = parent_gone_->second;
  parent_gone_.reset();
  lose_parent(why);
  return true;
}

void Relay::forward_announcements(bool now) {
  if (!now && Deadline::Clock::now() < next_forward_) return;
  next_forward_ = Deadline::Clock::now() + kForwardEvery;
  const int world = o_.layout.world;
  auto copy = [&](Store& from, Store* to, std::int64_t& seen, std::set<std::int64_t>& skip,
                  std::set<std::int64_t>& made, bool up) {
    auto text = from.try_get("failures", Deadline::after(kAnswer));
    if (!text) return;
    auto count = storelimits::parse_bounded(*text, 0, 16LL * world + 64);
    if (!count || *count <= seen) return;
    std::vector<std::string> keys;
    // In steps a small store answers (keys per request follow its world).
    for (std::int64_t n = seen + 1; n <= std::min<std::int64_t>(*count, seen + 128); ++n)
      keys.push_back("failure/" + std::to_string(n));
    auto values = from.multi_get(keys, Deadline::after(kAnswer));
    for (const auto& v : values) {
      if (!v) break;
      ++seen;
      if (skip.count(seen)) continue;
      if (up) aborted_below_ = true;
      auto tab = v->find('\t');
      const bool died = v->rfind("died", 0) == 0;
      const std::string body = tab == std::string::npos ? *v : v->substr(tab + 1);
      // A death or failure anywhere explains a checkpoint's missing ranks.
      auto& first = died ? first_death_ : first_failure_;
      if (!first) first = storelimits::store_text(body, 1024);
      if (!to) continue;
      made.insert(publish_failure(*to, body, Deadline::after(kAnswer),
                                  died ? FailureKind::died : FailureKind::failed,
                                  died ? named_rank(body, world) : -1));
    }
  };
  try {
    // A parent found gone is not asked again: its client would reconnect,
    // and a refused port is retried for the whole answer's wait (kAnswer),
    // every time, while this relay still waits for its children.
    const bool gone = parent_gone_ && parent_gone_->first == hop_;
    Store* up = o_.level == RelayLevel::root || gone ? nullptr : &parent();
    copy(*o_.below, up, seen_below_, own_below_, own_above_, true);
    // A judge reads its parent's less often while nothing new comes there: it
    // waits as long as the levels above wait for their slowest child, and a
    // read every 100 ms made its requests there grow with that wait.
    const auto at = Deadline::Clock::now();
    if (up && (now || level_ == 0 || at >= next_above_)) {
      const std::int64_t before = seen_above_;
      copy(*up, o_.below, seen_above_, own_above_, own_below_, false);
      above_every_ = seen_above_ != before ? std::chrono::milliseconds(kForwardEvery)
                                           : next_slice(above_every_);
      next_above_ = at + above_every_;
    }
  } catch (const TimeoutError&) {
  } catch (const Error& e) {
    spdlog::debug("relay: announcements not copied: {}", e.one_line());
    // Its own store lives as long as this relay: a store gone is the parent's.
    if (store_gone(e) && o_.level != RelayLevel::root) parent_gone_ = {hop_, e.one_line()};
  }
}

}  // namespace gpudiag
