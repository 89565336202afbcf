// One judge of the tree (see relay.h): what it waits for below, what it
// sends up and passes down. Its place among the levels (its children, the
// judges it reports past when its parent is lost) is in relay_levels.cpp;
// the records a node's ranks ask for and the announcements it copies between
// levels are in relay_copies.cpp; the wait for the children at one
// checkpoint, and the part made of what came, in relay_gather.cpp.
#include "tree/relay.h"
#include "tree/relay_detail.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "plane/checkpoint_digest.h"
#include "store/store_limits.h"
#include "plane/store_plane.h"
#include "util/error.h"

namespace gpudiag {

using namespace relay_detail;

bool Relay::collect(int seq, Deadline idle, const std::function<bool()>& stop) {
  bool came = false;
  TreePart part = gather(seq, idle, stop, came);
  if (!came) return false;
  if (o_.level == RelayLevel::root) {
    // A missing rank's note goes down once, at the first checkpoint it
    // misses; ranks keep it (checks/check.cpp), so later digests stay small.
    for (auto it = part.notes.begin(); it != part.notes.end();)
      it = noted_.count(it->first) ? part.notes.erase(it) : std::next(it);
    for (const auto& [r, note] : part.notes) noted_.insert(r);
    // Rank 0's record rides only where a rank asked for it: parsing it at
    // every checkpoint was more than half of a rank's time reading the digest.
    const std::string d =
        encode_digest(part.missing, part.notes, part.aborted, part.review.value_or(""),
                      part.wants_rank0 ? part.records : std::map<int, std::string>{});
    // Rank 0's share first: node 0's leader reads it once the digest is there.
    if (!judge_share_.empty())
      o_.below->set(tree_cp(seq) + "judge", judge_share_, Deadline::after(kAnswer));
    judge_share_.clear();
    o_.below->set(tree_cp(seq) + "digest", d, Deadline::after(kAnswer));
    return true;
  }
  const std::string key =
      tree_cp(seq) + TreeLayout::level_key(level_) + "/" + std::to_string(o_.index);
  const std::string text = encode_part(part);
  up_bytes_ += key.size() + text.size();
  up_if_parent_gone();
  try {
    parent().set(key, text, Deadline::after(kAnswer));
  } catch (const Error& e) {
    // A refused write (too large, the store full) is not a lost judge.
    const bool hung = e.code() == ExitCode::timeout;
    if (!hung && !store_gone(e)) throw;
    lose_parent(e.one_line());
    parent().set(key, text, Deadline::after(kAnswer));
  }
  last_part_ = {key, text};
  return true;
}

bool Relay::pass_down(int seq, const std::function<bool()>& stop) {
  if (o_.level == RelayLevel::root) return true;
  const auto& L = o_.layout;
  const std::string key = tree_cp(seq) + "digest";
  // The levels above wait for their own stragglers: as long as the ranks
  // said (or the configured timeout), plus their slack, each.
  const auto wait = std::max(o_.timeout, last_wait_ + o_.slack + std::chrono::seconds(2));
  const int above = L.levels() + 1 - level_;
  Deadline until = Deadline::after(wait * above + 2 * wait + std::chrono::seconds(5));
  std::optional<std::string> digest;
  auto go_up = [&](const std::string& why) {
    lose_parent(why);
    // The lost judge may have had our part and never passed it on. The judge
    // above may be gone too (one host held both): then past it as well.
    for (;;) {
      try {
        parent().set(last_part_.first, last_part_.second, Deadline::after(kAnswer));
        break;
      } catch (const TimeoutError&) {
        break;  // it answers slowly: the wait below goes on with it
      } catch (const Error& e) {
        if (!store_gone(e) || !can_go_up()) throw;
        lose_parent(e.one_line());
      }
    }
    until = Deadline::after(wait * std::max(1, L.levels() + 1 - level_ - hop_) +
                            std::chrono::seconds(5));
  };
  // A node's leader looks every kSlice (its ranks wait on its copies); a
  // judge backs off (relay_detail.h).
  auto slice = std::chrono::milliseconds(kSlice);
  while (!digest) {
    try {
      const auto look = slice;
      if (level_ > 0) slice = next_slice(slice);
      if (parent().wait({key}, until.min(Deadline::after(look))))
        digest = parent().try_get(key, Deadline::after(kAnswer));
    } catch (const TimeoutError&) {
    } catch (const Error& e) {
      if (!store_gone(e) || !can_go_up()) throw;
      go_up(e.one_line());
      continue;
    }
    if (digest) break;
    forward_announcements();
    if (parent_gone_ && parent_gone_->first == hop_ && can_go_up()) {
      const std::string why = parent_gone_->second;
      parent_gone_.reset();
      go_up(why);
      continue;
    }
    if (stop && stop()) return false;
    if (until.expired()) {
      // A judge above that hangs (not gone): report past it.
      if (can_go_up()) {
        const int l = level_ + 1 + hop_;
        go_up(L.label(l, judge_at(l)) + "'s judge sent no digest by the deadline");
        continue;
      }
      return false;
    }
  }
  up_bytes_ += key.size() + digest->size();
  if (level_ > 0) {
    if (o_.index == 0) copy_judge_share(seq);  // the judges over node 0
    o_.below->set(key, *digest, Deadline::after(kAnswer));
  } else {
    copy_needs(seq, *digest);
    if (o_.index == 0) copy_judge_share(seq);
    o_.below->set(cp(seq) + "digest", *digest, Deadline::after(kAnswer));
  }
  return true;
}

/// Every child still expected said goodbye: a rank its bye/<r> (or it was
/// reported dead), a judge its tree/bye/...
bool Relay::all_said_bye() {
  std::vector<std::string> keys;
  for (const auto& c : children(0)) {
    if (gone_.count({c.level, c.id})) continue;
    if (c.level < 0) {
      keys.push_back("bye/" + std::to_string(c.id));
      keys.push_back("dead/" + std::to_string(c.id));
    } else {
      keys.push_back("tree/bye/" + TreeLayout::level_key(c.level) + "/" + std::to_string(c.id));
    }
  }
  auto v = multi_get_sliced(*o_.below, keys, Deadline::after(kAnswer));
  if (o_.level != RelayLevel::node)
    return std::all_of(v.begin(), v.end(), [](const auto& x) { return x.has_value(); });
  for (std::size_t i = 0; i < v.size(); i += 2)
    if (!v[i] && !v[i + 1]) return false;
  return true;
}

void Relay::run(std::chrono::milliseconds idle, const std::function<bool()>& stop) {
  auto done = [&] { return (stop && stop()) || all_said_bye(); };
  try {
    for (int seq = 0;; ++seq) {
      if (!collect(seq, Deadline::after(idle), done)) break;
      // Without a digest the ranks below judge for themselves; the next
      // checkpoint may go through again.
      if (!pass_down(seq, stop) && stop && stop()) break;
    }
    if (o_.level != RelayLevel::root)
      parent().set("tree/bye/" + TreeLayout::level_key(level_) + "/" + std::to_string(o_.index),
                   "1", Deadline::after(kAnswer));
  } catch (const Error& e) {
    spdlog::warn("the tree's judge of {} stopped: {}", label(), e.one_line());
    // A node's ranks would wait for digests that will not come, at every
    // checkpoint: say so in the node's store (StorePlane::read_digest).
    if (o_.level == RelayLevel::node) try {
        o_.below->set("tree/stopped", storelimits::store_text(e.one_line(), 512),
                      Deadline::after(kAnswer));
      } catch (const std::exception&) {
      }
  }
}

}  // namespace gpudiag
