// A tree judge's place among the levels (see relay.h, tree.h): its options,
// its children (a lost judge's children in its place, down to the nodes),
// and, when its own parent judge is lost, the judge above that it reports to
// instead, saying there which judges it lost (tree/lost/...).
#include <spdlog/spdlog.h>

#include <algorithm>

#include "tree/relay.h"
#include "tree/relay_detail.h"
#include "store/store_limits.h"
#include "util/error.h"

namespace gpudiag {

using namespace relay_detail;

RelayOptions relay_options(const TreeLayout& layout, RelayLevel level, int index,
                           std::chrono::milliseconds wait, std::chrono::milliseconds per_level,
                           int height) {
  RelayOptions o;
  o.level = level;
  o.index = index;
  o.height = height;
  o.layout = layout;
  // The levels below this judge, each of which may wait out its own straggler.
  const int below = level == RelayLevel::node    ? 0
                    : level == RelayLevel::group ? height
                                                 : layout.levels() + 1;
  o.slack = per_level * below;
  o.timeout = wait + o.slack;
  o.digest_grace = 2 * wait + std::chrono::seconds(5);
  return o;
}

Relay::Relay(RelayOptions o) : o_(std::move(o)) {
  level_ = o_.level == RelayLevel::node    ? 0
           : o_.level == RelayLevel::group ? o_.height
                                           : o_.layout.levels() + 1;
}

Store& Relay::parent() {
  if (hop_ == 0 || !o_.above) return *o_.above;
  return *o_.beyond[static_cast<std::size_t>(hop_ - 1)];
}

int Relay::judge_at(int level) const {
  return level > o_.layout.levels() ? 0 : o_.layout.judge_above(level, level_, o_.index);
}

std::string Relay::label() const {
  return level_ > o_.layout.levels() ? "the root" : o_.layout.label(level_, o_.index);
}

void Relay::lose_parent(const std::string& first_why) {
  const auto& L = o_.layout;
  std::string why = first_why;
  for (;;) {
    if (!can_go_up()) throw Error(ExitCode::broken, why);
    const int lost_level = level_ + 1 + hop_;
    ++hop_;
    // Each store numbers its announcements its own way: read them from the start.
    seen_above_ = 0;
    own_above_.clear();
    const int next = level_ + 1 + hop_;
    spdlog::info("{}: lost the judge of {}: {}; reporting to {}", label(),
                 L.label(lost_level, judge_at(lost_level)), why,
                 next > L.levels() ? std::string("the root")
                                   : "the judge of " + L.label(next, judge_at(next)));
    try {
      // Every judge between this relay and its new parent is lost: the new
      // parent waits for their children, down to this relay.
      for (int l = level_ + 1; l < next; ++l)
        parent().set(lost_key(l, judge_at(l)), storelimits::store_text(why, 512),
                     Deadline::after(kAnswer));
      return;
    } catch (const Error& e) {
      if (!store_gone(e) && e.code() != ExitCode::timeout) throw;
      why = e.one_line();  // that judge is lost too: on up
    }
  }
}

void Relay::add_child(std::vector<Child>& out, int seq, int level, int id) {
  const auto& L = o_.layout;
  if (level >= 1 && lost_.count({level, id})) {
    auto [a, b] = L.children_of(level, id);
    for (int c = a; c <= b; ++c) add_child(out, seq, level - 1, c);
    return;
  }
  auto [first, last] = L.ranks_of(level, id);
  out.push_back({level, id, tree_cp(seq) + TreeLayout::level_key(level) + "/" + std::to_string(id),
                 first, last});
}

std::vector<Relay::Child> Relay::children(int seq) {
  std::vector<Child> out;
  const auto& L = o_.layout;
  if (level_ == 0) {
    auto [a, b] = L.ranks_of_node(o_.index);
    for (int r = a; r <= b; ++r) out.push_back({-1, r, cp(seq) + std::to_string(r), r, r});
    return out;
  }
  auto [a, b] = level_ > L.levels() ? std::make_pair(0, L.judges(level_ - 1) - 1)
                                    : L.children_of(level_, o_.index);
  for (int c = a; c <= b; ++c) add_child(out, seq, level_ - 1, c);
  return out;
}

bool Relay::learn_lost(const std::vector<Child>& kids,
                       const std::vector<std::optional<std::string>>& vals) {
  std::vector<std::string> keys;
  std::vector<std::pair<int, int>> ids;
  for (std::size_t i = 0; i < kids.size(); ++i)
    if (kids[i].level >= 1 && !vals[i]) {
      keys.push_back(lost_key(kids[i].level, kids[i].id));
      ids.emplace_back(kids[i].level, kids[i].id);
    }
  if (keys.empty()) return false;
  auto lv = multi_get_sliced(*o_.below, keys, Deadline::after(kAnswer));
  bool changed = false;
  for (std::size_t i = 0; i < lv.size(); ++i)
    if (lv[i] && lost_.insert(ids[i]).second) {
      spdlog::warn("{}: {}'s judge is lost ({}); its {}s report here",
                   level_ > o_.layout.levels() ? std::string("root") : label(),
                   o_.layout.label(ids[i].first, ids[i].second),
                   storelimits::store_text(*lv[i], 256), TreeLayout::level_name(ids[i].first - 1));
      changed = true;
    }
  return changed;
}

void Relay::say_busy(int seq) {
  if (level_ > o_.layout.levels() || !o_.above) return;  // the root has no parent
  try {
    parent().set(busy_key(seq, level_, o_.index), std::to_string(lost_.size()), Deadline::after(kAnswer));
  } catch (const std::exception& e) {  // a parent gone is found when the part goes up
    spdlog::info("{}: could not tell its parent it waits for a lost judge's children: {}", label(),
                 e.what());
  }
}

bool Relay::busy_below(int seq, const std::vector<Child>& kids,
                       const std::vector<std::optional<std::string>>& vals,
                       std::map<std::string, long long>& seen) {
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < kids.size(); ++i)
    if (kids[i].level >= 2 && !vals[i] && !gone_.count({kids[i].level, kids[i].id}))
      keys.push_back(busy_key(seq, kids[i].level, kids[i].id));
  if (keys.empty()) return false;
  bool more = false;
  try {
    auto got = multi_get_sliced(*o_.below, keys, Deadline::after(kAnswer));
    for (std::size_t i = 0; i < keys.size(); ++i) {
      // From the store: a count of judges, bounded; each new one counts once.
      const auto n = got[i] ? storelimits::parse_bounded(*got[i], 1, 1 << 20) : std::nullopt;
      if (n && *n > seen[keys[i]]) {
        seen[keys[i]] = *n;
        more = true;
      }
    }
  } catch (const std::exception&) {
    return false;  // its own store not answering: the wait ends as it would
  }
  return more;
}

}  // namespace gpudiag
