// A judge's wait for its children at one checkpoint (see relay.h), and the
// part it makes of what came: the loop asks only for what has not come yet,
// stretches its deadline while children keep arriving, waits longer for the
// children of a judge found lost (and for a child judge that says it waits
// for them: busy_key), and stops early when every absent rank of
// a node is known dead. The part then accounts for every rank below: a
// record, or missing with a note saying which leader or judge did not
// report; above the nodes the records are reviewed and only rank 0's goes on.
#include "tree/relay.h"
#include "tree/relay_detail.h"

#include <algorithm>
#include <map>

#include "store/store_limits.h"
#include "util/error.h"

namespace gpudiag {

using namespace relay_detail;

long long Relay::ranks_wait(int seq, const std::vector<Child>& kids,
                            const std::vector<std::optional<std::string>>& vals) {
  constexpr long long kMost = kMostWaitMs;
  if (o_.level == RelayLevel::node) {
    auto v = o_.below->try_get(cp(seq) + "wait", Deadline::after(kAnswer));
    auto w = v ? storelimits::parse_bounded(*v, 0, kMost) : std::nullopt;
    return w ? *w : 0;
  }
  for (std::size_t i = 0; i < kids.size(); ++i)
    if (vals[i])
      if (auto p = decode_part(*vals[i], kids[i].first, kids[i].last))
        return std::min(p->wait_ms, kMost);
  return 0;
}

std::string Relay::checkpoint_name(int seq) {
  auto v = o_.below->try_get(cp(seq) + "name", Deadline::after(kAnswer));
  return v ? storelimits::store_text(*v, 64) : std::string();
}

/// Notes for a node's missing ranks from their hello/ and phase/ keys.
void Relay::describe_ranks(TreePart& p, const std::vector<int>& missing) {
  std::vector<std::string> keys;
  std::vector<int> described;
  for (int r : missing) {
    if (described.size() >= kMaxPartNotes) break;
    described.push_back(r);
    keys.push_back("hello/" + std::to_string(r));
    keys.push_back("phase/" + std::to_string(r));
  }
  auto v = o_.below->multi_get(keys, Deadline::after(kAnswer));
  for (std::size_t i = 0; i < described.size(); ++i) {
    const auto& hello = v[2 * i];
    const auto& phase = v[2 * i + 1];
    p.notes[described[i]] =
        hello ? storelimits::store_text(*hello, 256) + ", last phase: " +
                    storelimits::store_text(phase.value_or("start"), 64)
              : "never joined its node's leader (" + o_.layout.node_label(o_.index) +
                    "): not started, or cannot reach " + o_.below->address();
  }
}

TreePart Relay::gather(int seq, Deadline idle, const std::function<bool()>& stop, bool& came) {
  std::vector<Child> kids = children(seq);
  std::vector<std::optional<std::string>> vals;
  came = wait_children(seq, idle, stop, kids, vals);
  return came ? assemble(seq, kids, vals) : TreePart{};
}

bool Relay::wait_children(int seq, Deadline idle, const std::function<bool()>& stop,
                          std::vector<Child>& kids, std::vector<std::optional<std::string>>& vals) {
  std::optional<Deadline> until;
  std::optional<Deadline> floor;  // the lost judges' children's time (kLostJudgeGrace)
  // (A judge) while its children keep coming, the wait stretches: each one
  // in gives the rest another level's slack, up to twice the wait. A child
  // judge reports only once its own children are in, and those that reached
  // the checkpoint late (a simulated step's last nodes on a busy machine, a
  // slow rack) came in after the wait that started at the first: they were
  // named missing though every rank had come, 100,362 ranks at 262,144.
  std::optional<Deadline> stretch_to;
  std::map<std::string, long long> busy_seen;  // children's busy counts, as last read
  std::size_t in_before = 0;
  const auto per_level = level_ > 0 ? o_.slack / level_ : std::chrono::milliseconds(0);
  above_every_ = kForwardEvery;  // the parent's announcements: often again at first
  next_above_ = {};
  for (;;) {
    // Only what has not come yet is asked for again: a group's part is read
    // once, not at every poll (128 parts a poll kept a judge's store busy).
    std::vector<std::string> keys, absent, ask;
    std::vector<std::size_t> asked;
    if (vals.size() != kids.size()) vals.assign(kids.size(), std::nullopt);
    for (std::size_t i = 0; i < kids.size(); ++i) {
      keys.push_back(kids[i].key);
      if (!vals[i]) {
        ask.push_back(kids[i].key);
        asked.push_back(i);
      }
    }
    auto got = multi_get_sliced(*o_.below, ask, Deadline::after(kAnswer));
    for (std::size_t j = 0; j < asked.size(); ++j) vals[asked[j]] = std::move(got[j]);
    std::vector<int> absent_ranks;
    bool any = false;
    for (std::size_t i = 0; i < kids.size(); ++i) {
      if (vals[i]) any = true;
      else if (!gone_.count({kids[i].level, kids[i].id})) {
        absent.push_back(kids[i].key);
        absent_ranks.push_back(kids[i].id);
      }
    }
    const auto in_now = static_cast<std::size_t>(
        std::count_if(vals.begin(), vals.end(), [](const auto& v) { return v.has_value(); }));
    if (any && !until) {
      const long long w = ranks_wait(seq, kids, vals);
      if (w > 0) last_wait_ = std::chrono::milliseconds(w);
      const auto span = w > 0 ? std::chrono::milliseconds(w) + o_.slack : o_.timeout;
      until = Deadline::after(span);
      stretch_to = Deadline::after(2 * span);
    } else if (until && stretch_to && in_now > in_before && per_level.count() > 0 &&
               !aborted_below_) {
      const Deadline more = Deadline::after(per_level).min(*stretch_to);
      if (more.when() > until->when()) until = more;
    }
    in_before = in_now;
    if (absent.empty()) break;
    // A judge whose children found it lost: wait for its children here.
    if (level_ >= 2 && learn_lost(kids, vals)) {
      floor = Deadline::after(kLostJudgeGrace);
      say_busy(seq);  // the parent's own wait may end before this one
      kids = children(seq);
      vals.clear();
      continue;
    }
    forward_announcements();
    // Parent gone: go up now, so the judge there waits for the lost one's children.
    up_if_parent_gone();
    if (aborted_below_ && until) until = until->min(Deadline::after(kFailureGrace));
    if (o_.level == RelayLevel::node && !absent_ranks.empty()) {
      std::vector<std::string> dead;
      for (int r : absent_ranks) dead.push_back("dead/" + std::to_string(r));
      auto d = o_.below->multi_get(dead, Deadline::after(kAnswer));
      if (any && std::all_of(d.begin(), d.end(), [](const auto& v) { return v.has_value(); }))
        break;
    }
    if (until && floor && floor->when() > until->when()) until = floor;
    // A child judge that is waiting for a lost judge's children said so:
    // its ranks are not missing yet (each time it learns of another).
    if (until && until->expired() && busy_below(seq, kids, vals, busy_seen))
      until = Deadline::after(kLostJudgeGrace + per_level);
    if (until && until->expired()) break;
    if (stop && stop()) return false;
    if (!until && idle.expired()) return false;
    Deadline slice =
        Deadline::after(level_ > 0 && absent.size() > kFewAbsent ? kJudgeSlice : kSlice);
    // Polled in slices: the first of the absent keys (the rest next time).
    auto& waited = absent.empty() ? keys : absent;
    if (waited.size() > kKeysPerRequest) waited.resize(kKeysPerRequest);
    o_.below->wait(waited, until ? until->min(slice) : idle.min(slice));
  }
  // Someone is missing: read the latest announcements, which may say why.
  for (std::size_t i = 0; i < kids.size(); ++i)
    if (!vals[i]) {
      forward_announcements(true);
      break;
    }
  return true;
}

TreePart Relay::assemble(int seq, const std::vector<Child>& kids,
                         const std::vector<std::optional<std::string>>& vals) {
  const auto& L = o_.layout;
  TreePart part;
  std::vector<int> oversized;  // ranks whose record is too large to pass on
  std::vector<ChildReview> reviews;
  std::map<int, std::string> direct;  // records from nodes (not through a group)
  std::set<int> node_kids;            // nodes that report here directly
  std::vector<int> missing_here;      // children absent at this checkpoint
  std::vector<std::pair<int, int>> gone_now;
  for (std::size_t i = 0; i < kids.size(); ++i) {
    const auto& c = kids[i];
    below_bytes_ += c.key.size() + (vals[i] ? vals[i]->size() : 0);
    if (c.level < 0) {
      if (vals[i] && vals[i]->size() <= kMaxRecordBytes) {
        part.records[c.id] = *vals[i];
        gone_.erase({c.level, c.id});  // back after a missed checkpoint
      } else {
        missing_here.push_back(c.id);
        gone_now.emplace_back(c.level, c.id);
        if (vals[i]) oversized.push_back(c.id);
      }
      continue;
    }
    if (c.level == 0) node_kids.insert(c.id);
    std::optional<TreePart> p;
    if (vals[i]) p = decode_part(*vals[i], c.first, c.last);
    if (!p) {
      missing_here.push_back(c.id);
      gone_now.emplace_back(c.level, c.id);
      const std::string why =
          c.level == 0   ? L.node_label(c.id) + ": its leader did not report"
          : c.level == 1 ? L.group_label(c.id) + ": its second-level judge did not report"
          : c.level == 2 ? L.label(2, c.id) + ": its third-level judge did not report"
                         : L.label(c.level, c.id) + ": its judge did not report";
      for (int r = c.first; r <= c.last; ++r) {
        part.missing.push_back(r);
        if (part.notes.size() < kMaxPartNotes)
          part.notes[r] = why + (vals[i] ? " (its part did not parse)" : " by the deadline");
      }
      if (c.level == 0) part.lost.push_back(c.id);
      continue;
    }
    gone_.erase({c.level, c.id});
    if (c.level == 0) {
      // A node's part accounts for each of its ranks: a record, or missing.
      for (int r = c.first; r <= c.last; ++r)
        if (!p->records.count(r) &&
            !std::binary_search(p->missing.begin(), p->missing.end(), r)) {
          p->missing.insert(std::upper_bound(p->missing.begin(), p->missing.end(), r), r);
          if (p->notes.size() < kMaxPartNotes)
            p->notes[r] = L.node_label(c.id) + ": its leader passed on neither its record nor "
                          "its absence";
        }
    }
    if (part.checkpoint.empty()) part.checkpoint = p->checkpoint;
    part.wait_ms = std::max(part.wait_ms, p->wait_ms);
    for (auto& [r, text] : p->records) (c.level > 0 ? part.records : direct)[r] = std::move(text);
    part.missing.insert(part.missing.end(), p->missing.begin(), p->missing.end());
    for (auto& [r, note] : p->notes)
      if (part.notes.size() < kMaxPartNotes) part.notes[r] = std::move(note);
    if (!part.aborted) part.aborted = p->aborted;
    part.wants_rank0 = part.wants_rank0 || p->wants_rank0;
    if (p->review) reviews.push_back({*p->review, c.first, c.last});
    part.lost.insert(part.lost.end(), p->lost.begin(), p->lost.end());
  }
  for (const auto& k : gone_now) gone_.insert(k);
  if (level_ == 0) {
    part.checkpoint = checkpoint_name(seq);
    part.wait_ms = ranks_wait(seq, kids, vals);
    bool every = false;
    part.wants_rank0 = far_needs(seq, every).count(0) > 0;
    part.missing = missing_here;
    describe_ranks(part, missing_here);
    for (int r : oversized)
      part.notes[r] = "its record is larger than " + std::to_string(kMaxRecordBytes / 1024) +
                      " KiB: not passed on";
  } else {
    std::sort(part.missing.begin(), part.missing.end());
    // Records that came straight from nodes are reviewed here; the rest were
    // reviewed by the judges below.
    if (o_.reviewer && (!direct.empty() || reviews.empty())) {
      std::vector<int> missing_direct;
      for (int r : part.missing)
        if (node_kids.count(L.node_of(r))) missing_direct.push_back(r);
      reviews.push_back({o_.reviewer->review(part.checkpoint, direct, missing_direct, part.notes),
                         0, L.world - 1});
    }
    // The root always merges: its review is the digest's. A judge between
    // (a supergroup) merges for its parent, which merges again.
    if (o_.reviewer)
      part.review = o_.level == RelayLevel::root ? o_.reviewer->merge(part.checkpoint, reviews)
                    : reviews.size() == 1        ? reviews[0].text
                                                 : o_.reviewer->merge_up(part.checkpoint, reviews);
    if (o_.reviewer && o_.level == RelayLevel::root)
      judge_share_ = o_.reviewer->for_judge(part.checkpoint, reviews);
    // Only rank 0's record goes on (the root passes it to every rank when
    // one asked: its NCCL id); a judge's part that carries more is not
    // believed for the rest.
    std::optional<std::string> rank0;
    if (auto it = direct.find(0); it != direct.end()) rank0 = it->second;
    else if (auto it0 = part.records.find(0); it0 != part.records.end()) rank0 = it0->second;
    part.records.clear();
    if (rank0) part.records[0] = *rank0;
  }
  // A death explains a checkpoint best, then the first failure announced.
  if (!part.aborted && (first_death_ || first_failure_))
    part.aborted = first_death_ ? first_death_ : first_failure_;
  return part;
}

}  // namespace gpudiag
