// build_groups (groups.h).
#include "flight_recorder/groups.h"

#include <algorithm>
#include <set>
#include <string>

namespace gpudiag::fr {

namespace {

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

Track make_track(const std::string& group, const RankDump& d,
                 const std::map<std::string, std::int64_t>& ids) {
  Track tr;
  tr.t.rank = d.rank;
  tr.t.dumped = true;
  for (const auto& e : d.entries) tr.t.starts_recorded = tr.t.starts_recorded || e.start_recorded;
  for (const auto& e : d.entries) {
    if (e.group != group || e.p2p) continue;
    tr.t.known = true;
    auto [it, added] = tr.seqs.try_emplace(e.seq, e.state, &e.op);
    if (!added) it->second.first = std::max(it->second.first, e.state);
  }
  for (const auto& [seq, v] : tr.seqs) {
    tr.t.enqueued = std::max(tr.t.enqueued, seq);
    if (v.first >= State::started) tr.t.started = std::max(tr.t.started, seq);
    if (v.first == State::completed) tr.t.completed = std::max(tr.t.completed, seq);
  }
  if (auto it = d.status.find(pg_id_of(group, d, ids)); it != d.status.end()) {
    tr.t.known = true;
    tr.t.enqueued = std::max(tr.t.enqueued, it->second.enqueued);
    tr.t.started = std::max(tr.t.started, it->second.started);
    tr.t.completed = std::max(tr.t.completed, it->second.completed);
  }
  // What completed had started; what started was queued (the watchdog's counters can trail).
  tr.t.started = std::max(tr.t.started, tr.t.completed);
  tr.t.enqueued = std::max(tr.t.enqueued, tr.t.started);
  return tr;
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

std::vector<Group> build_groups(const Inputs& inputs) {
  std::set<std::string> names;
  std::map<std::string, std::int64_t> ids;
  std::map<std::string, std::set<int>> configured, using_it;
  std::map<std::string, std::string> desc;
  for (const auto& d : inputs.dumps) {
    for (const auto& [name, g] : d.groups) {
      names.insert(name);
      configured[name].insert(g.ranks.begin(), g.ranks.end());
      if (!g.desc.empty()) desc.try_emplace(name, g.desc);
    }
    for (const auto& e : d.entries) {
      names.insert(e.group);
      using_it[e.group].insert(d.rank);
      if (e.pg_id >= 0) ids.try_emplace(e.group, e.pg_id);
      if (!e.group_desc.empty()) desc.try_emplace(e.group, e.group_desc);
    }
  }
  std::vector<std::string> sorted(names.begin(), names.end());
  std::sort(sorted.begin(), sorted.end(), name_less);
  std::map<int, const RankDump*> by_rank;
  for (const auto& d : inputs.dumps) by_rank[d.rank] = &d;

  std::vector<Group> out;
  for (const auto& name : sorted) {
    Group g;
    g.report.name = name;
    g.report.desc = desc.count(name) ? desc[name] : "";
    const auto& members = configured[name].empty() ? using_it[name] : configured[name];
    g.report.ranks_from_config = !configured[name].empty();
    g.report.ranks.assign(members.begin(), members.end());
    for (int r : g.report.ranks) {
      auto it = by_rank.find(r);
      if (it == by_rank.end()) {
        g.report.no_dump.push_back(r);
        RankTrack t;
        t.rank = r;
        g.report.tracks.push_back(t);
        continue;
      }
      g.tracks.push_back(make_track(name, *it->second, ids));
      g.report.tracks.push_back(g.tracks.back().t);
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace gpudiag::fr
