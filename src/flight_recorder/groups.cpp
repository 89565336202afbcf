// build_groups (groups.h): which group each rank's entries belong to, and each member's
// counters in it.
//
// Near-linear in the entries and the member lists: each dump's entries are indexed by group
// name once (with the group's first pg_id and whether it carries send/recv), so a member's
// track reads its group's entries only, never the whole buffer again; and a group (a name and
// its members) is stored once and named by its index, so the view of each (rank, name) holds
// an int, not a copy of the member list.
#include "flight_recorder/groups.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

#include "util/strings.h"

namespace gpudiag::fr {

namespace {

/// A group: its name and members (empty for a name no dump's pg_config gives members).
struct Key {
  std::string name;
  std::vector<int> ranks;
  bool operator<(const Key& o) const { return std::tie(name, ranks) < std::tie(o.name, o.ranks); }
};

/// The groups, each stored once; a group is its index.
class Keys {
 public:
  int intern(std::string_view name, const std::vector<int>& ranks) {
    auto named = index_.find(name);
    if (named == index_.end()) named = index_.emplace(std::string(name), Index()).first;
    auto [it, added] = named->second.try_emplace(ranks, static_cast<int>(keys_.size()));
    if (added) keys_.push_back({std::string(name), ranks});
    return it->second;
  }
  const Key& operator[](int k) const { return keys_[k]; }
  std::size_t size() const { return keys_.size(); }

 private:
  using Index = std::map<std::vector<int>, int>;
  std::vector<Key> keys_;
  std::map<std::string, Index, std::less<>> index_;
};

/// A dump's entries of one group, in record order.
struct Slice {
  std::vector<const Entry*> entries;
  std::int64_t pg_id = -1;  ///< the first one's pg_id that is set
  bool p2p = false;         ///< one is a send or recv
};

/// One dump, its entries by group.
struct Indexed {
  const RankDump* d = nullptr;
  bool starts_recorded = false;  ///< an entry recorded its start
  std::map<std::string_view, Slice> by_group;

  explicit Indexed(const RankDump& dump) : d(&dump) {
    for (const auto& e : dump.entries) {
      starts_recorded = starts_recorded || e.start_recorded;
      Slice& s = by_group[e.group];
      s.entries.push_back(&e);
      if (s.pg_id < 0 && e.pg_id >= 0) s.pg_id = e.pg_id;
      s.p2p = s.p2p || e.p2p;
    }
  }
  const Slice* slice(std::string_view group) const {
    auto it = by_group.find(group);
    return it == by_group.end() ? nullptr : &it->second;
  }
};

/// (rank, group name) -> the group that rank's entries of that name belong to. Names here and
/// in Indexed are views of the inputs' strings, which outlive build_groups.
using View = std::map<std::pair<int, std::string_view>, int>;

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

/// One member's track. `use_status`: whether pg_status may count (see build_groups). The
/// group's pg_id is the one the member's own entries give it, else the one other dumps'
/// entries give it (`ids`: ranks create groups in the same order, so ids agree in practice).
Track make_track(const std::string& group, const Indexed& x,
                 const std::map<std::string_view, std::int64_t>& ids, bool use_status) {
  const RankDump& d = *x.d;
  Track tr;
  tr.t.rank = d.rank;
  tr.t.dumped = true;
  tr.t.starts_recorded = x.starts_recorded;
  const Slice* slice = x.slice(group);
  const bool any_entry = slice != nullptr;
  static const std::vector<const Entry*> kNone;
  for (const Entry* e : slice ? slice->entries : kNone) {
    if (e->p2p) {
      tr.p2p.push_back({e->record_id, e->p2p_seq, e->state, &e->op});
      continue;
    }
    auto [it, added] = tr.seqs.try_emplace(e->seq, e->state, &e->op);
    if (!added) it->second.first = std::max(it->second.first, e->state);
    auto [rt, radded] = tr.record.try_emplace(e->seq, e->record_id);
    if (!radded) rt->second = std::min(rt->second, e->record_id);
  }
  for (const auto& [seq, v] : tr.seqs) {
    tr.t.enqueued = std::max(tr.t.enqueued, seq);
    if (v.first >= State::started) tr.t.started = std::max(tr.t.started, seq);
    if (v.first == State::completed) tr.t.completed = std::max(tr.t.completed, seq);
  }
  std::int64_t pg_id = slice ? slice->pg_id : -1;
  if (pg_id < 0)
    if (auto it = ids.find(group); it != ids.end()) pg_id = it->second;
  const auto status = d.status.find(pg_id);
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

/// Whether no rank is in two of the groups (each one's ranks sorted): one sort of them all,
/// where comparing every pair would take the square of their number.
bool disjoint(const Keys& keys, const std::vector<int>& ks) {
  std::vector<int> all;
  for (int k : ks) {
    const auto& r = keys[k].ranks;
    std::unique_copy(r.begin(), r.end(), std::back_inserter(all));
  }
  std::sort(all.begin(), all.end());
  return std::adjacent_find(all.begin(), all.end()) == all.end();
}

/// One note per name that several member sets share. `sorted`: every group, in Key order.
void note_shared_names(const Keys& keys, const std::vector<int>& sorted,
                       const std::vector<std::string>& desc, const View& view,
                       std::vector<std::string>& notes) {
  std::map<std::string_view, std::vector<int>> by_name;  // in Key order: by members
  for (int k : sorted) by_name[keys[k].name].push_back(k);
  std::map<std::string_view, std::vector<std::pair<int, int>>> seen;  // name -> (rank, group)
  for (const auto& [rn, k] : view) seen[rn.second].emplace_back(rn.first, k);
  for (const auto& [name, ks] : by_name) {
    if (ks.size() < 2) continue;
    const std::string& d = desc[ks[0]];
    const std::string label = "group " + std::string(name) + (d.empty() ? "" : " (" + d + ")");
    if (disjoint(keys, ks)) {
      notes.push_back(label + " is the name of " + std::to_string(ks.size()) +
                      " process groups with different members (split_group or DeviceMesh "
                      "subgroups): each is analysed apart");
      continue;
    }
    std::map<int, std::vector<int>> says;  // group -> the ranks that say it is theirs
    for (const auto& [rank, k] : seen[name]) says[k].push_back(rank);
    std::vector<std::string> parts;
    for (int k : ks) {  // by members, as ks is
      auto it = says.find(k);
      if (it == says.end()) continue;
      const auto& who = it->second;
      const auto& members = keys[k].ranks;
      parts.push_back((who.size() == 1 ? "rank " : "ranks ") + rank_list(who) +
                      (who.size() == 1 ? " says " : " say ") +
                      (members.empty() ? std::string("none") : rank_list(members)));
    }
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
  Keys keys;
  View view;
  std::vector<std::set<int>> using_it;  // group -> the ranks whose entries use it
  std::vector<std::string> desc;        // group -> its first description
  std::map<std::string_view, std::int64_t> ids;
  std::map<std::string_view, std::set<int>> configured;  // name -> groups pg_configs give it
  auto add = [&](std::string_view name, const std::vector<int>& ranks) {
    const int k = keys.intern(name, ranks);
    using_it.resize(keys.size());
    desc.resize(keys.size());
    return k;
  };
  auto describe_as = [&](int k, const std::string& d) {
    if (!d.empty() && desc[k].empty()) desc[k] = d;
  };
  for (const auto& d : inputs.dumps)
    for (const auto& [name, g] : d.groups) {
      if (g.ranks.empty()) continue;
      const int k = add(name, g.ranks);
      view[{d.rank, name}] = k;
      configured[name].insert(k);
      describe_as(k, g.desc);
    }
  std::vector<Indexed> indexed;
  indexed.reserve(inputs.dumps.size());
  for (const auto& d : inputs.dumps) {
    indexed.emplace_back(d);
    for (const auto& e : d.entries) {
      auto it = view.find({d.rank, e.group});
      if (it == view.end()) {  // no pg_config of its own: the one configured set it is in
        int k = -1, holding = 0;
        if (auto c = configured.find(e.group); c != configured.end())
          for (int h : c->second) {
            const auto& r = keys[h].ranks;
            if (std::binary_search(r.begin(), r.end(), d.rank)) ++holding, k = h;
          }
        if (holding != 1) k = add(e.group, {});
        it = view.emplace(std::make_pair(d.rank, std::string_view(e.group)), k).first;
      }
      using_it[it->second].insert(d.rank);
      if (e.pg_id >= 0) ids.try_emplace(e.group, e.pg_id);
      describe_as(it->second, e.group_desc);
    }
  }
  std::vector<int> sorted(keys.size());
  std::iota(sorted.begin(), sorted.end(), 0);
  std::sort(sorted.begin(), sorted.end(), [&](int a, int b) { return keys[a] < keys[b]; });
  note_shared_names(keys, sorted, desc, view, notes);
  std::map<std::string_view, int> per_name;
  for (int k : sorted) ++per_name[keys[k].name];
  std::sort(sorted.begin(), sorted.end(), [&](int a, int b) {
    if (keys[a].name != keys[b].name) return name_less(keys[a].name, keys[b].name);
    return keys[a].ranks < keys[b].ranks;
  });
  std::map<int, const Indexed*> by_rank;
  for (const auto& x : indexed) by_rank[x.d->rank] = &x;

  std::vector<Group> out;
  for (int k : sorted) {
    const Key& key = keys[k];
    Group g;
    g.report.name = key.name;
    g.report.desc = desc[k];
    g.report.shared_name = per_name[key.name] > 1;
    const std::set<int> members =
        key.ranks.empty() ? using_it[k] : std::set<int>(key.ranks.begin(), key.ranks.end());
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
        const Slice* slice = it->second->slice(key.name);
        if (v != view.end() && v->second == k && slice) p2p = p2p || slice->p2p;
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
      if (auto v = view.find({r, key.name}); v != view.end() && v->second != k) {
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
