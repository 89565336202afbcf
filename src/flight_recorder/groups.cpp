// build_groups (groups.h): which group each rank's entries belong to, and each member's
// counters in it.
#include "flight_recorder/groups.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>

#include "util/strings.h"

namespace gpudiag::fr {

namespace {

/// A group: its name and members (empty for a name no dump's pg_config gives members).
struct Key {
  std::string name;
  std::vector<int> ranks;
  bool operator<(const Key& o) const { return std::tie(name, ranks) < std::tie(o.name, o.ranks); }
  bool operator==(const Key& o) const = default;
};

/// Group names in a natural order: "0" < "1" < "10" < "tp".
bool name_less(const std::string& a, const std::string& b) {
  auto number = [](const std::string& s) {
    return !s.empty() && s.size() < 10 &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (number(a) && number(b)) return std::stoi(a) < std::stoi(b);
  if (number(a) != number(b)) return number(a);
  return a < b;
}

/// The pg_id a group has in `d`'s entries, else the one other dumps' entries give it (ranks
/// create groups in the same order, so ids agree in practice); -1 when none.
std::int64_t pg_id_of(const std::string& group, const RankDump& d,
                      const std::map<std::string, std::int64_t>& elsewhere) {
  for (const auto& e : d.entries)
    if (e.group == group && e.pg_id >= 0) return e.pg_id;
  auto it = elsewhere.find(group);
  return it == elsewhere.end() ? -1 : it->second;
}

/// One member's track. `use_status`: whether pg_status may count (see build_groups).
Track make_track(const std::string& group, const RankDump& d,
                 const std::map<std::string, std::int64_t>& ids, bool use_status) {
  Track tr;
  tr.t.rank = d.rank;
  tr.t.dumped = true;
  for (const auto& e : d.entries) tr.t.starts_recorded = tr.t.starts_recorded || e.start_recorded;
  bool any_entry = false;
  for (const auto& e : d.entries) {
    if (e.group != group) continue;
    any_entry = true;
    if (e.p2p) {
      tr.p2p.push_back({e.record_id, e.p2p_seq, e.state, &e.op});
      continue;
    }
    auto [it, added] = tr.seqs.try_emplace(e.seq, e.state, &e.op);
    if (!added) it->second.first = std::max(it->second.first, e.state);
    auto [rt, radded] = tr.record.try_emplace(e.seq, e.record_id);
    if (!radded) rt->second = std::min(rt->second, e.record_id);
  }
  for (const auto& [seq, v] : tr.seqs) {
    tr.t.enqueued = std::max(tr.t.enqueued, seq);
    if (v.first >= State::started) tr.t.started = std::max(tr.t.started, seq);
    if (v.first == State::completed) tr.t.completed = std::max(tr.t.completed, seq);
  }
  const auto status = d.status.find(pg_id_of(group, d, ids));
  const bool has_status = status != d.status.end();
  // Known: its buffer holds entries of the group, or pg_status counts for it. Neither entries
  // nor pg_status: it never queued anything there (FlightRecorder::record adds the group's
  // pg_status with its first entry), so -1 is the truth. pg_status it may not use and no
  // entry: the buffer lost them and the counters are not collective counts: unknown.
  tr.t.known = any_entry || (has_status && use_status) || !has_status;
  if (has_status && use_status) {
    tr.t.status_used = true;
    tr.t.enqueued = std::max(tr.t.enqueued, status->second.enqueued);
    tr.t.started = std::max(tr.t.started, status->second.started);
    tr.t.completed = std::max(tr.t.completed, status->second.completed);
  }
  // What completed had started; what started was queued (the watchdog's counters can trail).
  tr.t.started = std::max(tr.t.started, tr.t.completed);
  tr.t.enqueued = std::max(tr.t.enqueued, tr.t.started);
  return tr;
}

bool disjoint(const std::vector<int>& a, const std::vector<int>& b) {
  std::vector<int> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return both.empty();
}

/// One note per name that several member sets share.
void note_shared_names(const std::set<Key>& keys, const std::map<Key, std::string>& desc,
                       const std::map<std::pair<int, std::string>, Key>& view,
                       std::vector<std::string>& notes) {
  std::map<std::string, std::vector<Key>> by_name;
  for (const auto& k : keys) by_name[k.name].push_back(k);
  for (const auto& [name, ks] : by_name) {
    if (ks.size() < 2) continue;
    bool apart = true;
    for (std::size_t a = 0; a < ks.size(); ++a)
      for (std::size_t b = a + 1; b < ks.size(); ++b)
        apart = apart && disjoint(ks[a].ranks, ks[b].ranks);
    auto d = desc.find(ks[0]);
    const std::string label =
        "group " + name + (d == desc.end() || d->second.empty() ? "" : " (" + d->second + ")");
    if (apart) {
      notes.push_back(label + " is the name of " + std::to_string(ks.size()) +
                      " process groups with different members (split_group or DeviceMesh "
                      "subgroups): each is analysed apart");
      continue;
    }
    std::map<std::vector<int>, std::vector<int>> says;  // members -> the ranks that say so
    for (const auto& [rn, k] : view)
      if (rn.second == name) says[k.ranks].push_back(rn.first);
    std::vector<std::string> parts;
    for (const auto& [members, who] : says)
      parts.push_back((who.size() == 1 ? "rank " : "ranks ") + rank_list(who) +
                      (who.size() == 1 ? " says " : " say ") +
                      (members.empty() ? std::string("none") : rank_list(members)));
    notes.push_back("the dumps disagree on the members of " + label + ": " + join(parts, "; ") +
                    "; each member set is analysed apart");
  }
}

}  // namespace

State Track::state(std::int64_t s) const {
  if (auto it = seqs.find(s); it != seqs.end()) return it->second.first;
  if (s <= t.completed) return State::completed;
  if (s <= t.started) return State::started;
  if (s <= t.enqueued) return State::scheduled;
  return State::not_scheduled;
}

const Op* Group::op(std::int64_t seq) const {
  for (const auto& tr : tracks)
    if (auto it = tr.seqs.find(seq); it != tr.seqs.end()) return it->second.second;
  return nullptr;
}

std::map<int, State> Group::states(std::int64_t seq) const {
  std::map<int, State> out;
  for (const auto& tr : tracks) out[tr.t.rank] = tr.state(seq);
  return out;
}

std::vector<Group> build_groups(const Inputs& inputs, std::vector<std::string>& notes) {
  std::set<Key> keys;
  std::map<std::pair<int, std::string>, Key> view;  // (rank, name) -> its group
  std::map<Key, std::set<int>> using_it;
  std::map<Key, std::string> desc;
  std::map<std::string, std::int64_t> ids;
  std::map<std::string, std::set<Key>> configured;
  for (const auto& d : inputs.dumps)
    for (const auto& [name, g] : d.groups) {
      if (g.ranks.empty()) continue;
      Key k{name, g.ranks};
      view[{d.rank, name}] = k;
      keys.insert(k);
      configured[name].insert(k);
      if (!g.desc.empty()) desc.try_emplace(k, g.desc);
    }
  for (const auto& d : inputs.dumps)
    for (const auto& e : d.entries) {
      auto it = view.find({d.rank, e.group});
      if (it == view.end()) {  // no pg_config of its own: the one configured set it is in
        Key k{e.group, {}};
        std::vector<Key> holding;
        for (const auto& c : configured[e.group])
          if (std::binary_search(c.ranks.begin(), c.ranks.end(), d.rank)) holding.push_back(c);
        if (holding.size() == 1) k = holding[0];
        it = view.emplace(std::make_pair(d.rank, e.group), k).first;
        keys.insert(k);
      }
      using_it[it->second].insert(d.rank);
      if (e.pg_id >= 0) ids.try_emplace(e.group, e.pg_id);
      if (!e.group_desc.empty()) desc.try_emplace(it->second, e.group_desc);
    }
  note_shared_names(keys, desc, view, notes);
  std::map<std::string, int> per_name;
  for (const auto& k : keys) ++per_name[k.name];
  std::vector<Key> sorted(keys.begin(), keys.end());
  std::sort(sorted.begin(), sorted.end(), [](const Key& a, const Key& b) {
    if (a.name != b.name) return name_less(a.name, b.name);
    return a.ranks < b.ranks;
  });
  std::map<int, const RankDump*> by_rank;
  for (const auto& d : inputs.dumps) by_rank[d.rank] = &d;

  std::vector<Group> out;
  for (const auto& key : sorted) {
    Group g;
    g.report.name = key.name;
    g.report.desc = desc.count(key) ? desc[key] : "";
    g.report.shared_name = per_name[key.name] > 1;
    const std::set<int> members =
        key.ranks.empty() ? using_it[key] : std::set<int>(key.ranks.begin(), key.ranks.end());
    g.report.ranks_from_config = !key.ranks.empty();
    g.report.ranks.assign(members.begin(), members.end());
    // pg_status holds the sequence number of the last work enqueued, started and completed,
    // whatever its kind: ProcessGroupNCCL::workEnqueue sets lastEnqueuedSeq = work->seq_ and
    // the watchdog (ProcessGroupNCCL::Watchdog::runLoop; watchdogHandler before torch 2.7)
    // lastCompletedSeq = work.seq_, where ProcessGroupNCCL::initWork made seq_ = isP2P ?
    // seqP2P_ : seqCollective_; FlightRecorder::getPgStatus dumps those three. In a group that
    // carries send/recv they are p2p sequence numbers as often as collective ones, so they
    // count only where no member's buffer holds a p2p entry of the group.
    bool p2p = false;
    for (int r : g.report.ranks)
      if (auto it = by_rank.find(r); it != by_rank.end()) {
        auto v = view.find({r, key.name});
        if (v != view.end() && v->second == key)
          for (const auto& e : it->second->entries) p2p = p2p || (e.p2p && e.group == key.name);
      }
    g.report.carries_p2p = p2p;
    for (int r : g.report.ranks) {
      auto it = by_rank.find(r);
      RankTrack t;
      t.rank = r;
      if (it == by_rank.end()) {
        g.report.no_dump.push_back(r);
        g.report.tracks.push_back(t);
        continue;
      }
      if (auto v = view.find({r, key.name}); v != view.end() && !(v->second == key)) {
        t.dumped = true;  // its own pg_config puts it in another group of this name
        g.report.other_view.push_back(r);
        g.report.tracks.push_back(t);
        continue;
      }
      Track tr = make_track(key.name, *it->second, ids, !p2p);
      g.report.tracks.push_back(tr.t);
      if (tr.t.known) g.tracks.push_back(std::move(tr));
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace gpudiag::fr
