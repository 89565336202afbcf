// See judge.h: collectives gathered by (group, sequence number), judged once
// complete, each rank's lateness kept over a window per group, and the
// naming and recovery decided on every collective judged.
#include "stragglers/judge.h"

#include <algorithm>
#include <cmath>

namespace gpudiag::stragglers {

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  const auto mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) {
    const double below = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
    m = (m + below) / 2;
  }
  return m;
}

/// Each value minus the values' median.
std::vector<double> excess(const std::vector<double>& v) {
  const double m = median_of(v);
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i] - m;
  return out;
}

constexpr std::size_t kKeptLates = 4096;
constexpr std::size_t kOffsetSamples = 15;

}  // namespace

std::string where_word(double comm, double load, double comp, double share) {
  const double total = comm + load + comp;
  if (!(total > 0)) return "";
  if (load >= share * total) return "data loading";
  if (comp >= share * total) return "compute";
  if (comm >= share * total) return "communication";
  return "";
}

Judge::Judge(JudgeSettings settings) : s_(std::move(settings)) {}

int Judge::domain(int rank) const {
  const auto r = static_cast<std::size_t>(rank);
  return r < s_.domain_of.size() ? s_.domain_of[r] : 0;
}

Judge::Group* Judge::group_for(int id, bool create) {
  if (auto it = groups_.find(id); it != groups_.end()) return &it->second;
  if (!create || id != 0 || static_cast<int>(groups_.size()) >= s_.max_groups) return nullptr;
  GroupDecl all{0, {}};
  for (int r = 0; r < s_.world_size && r < s_.max_members; ++r) all.ranks.push_back(r);
  declare_group(all);
  return group_for(0, false);
}

void Judge::declare_group(const GroupDecl& decl) {
  if (groups_.count(decl.group) || static_cast<int>(groups_.size()) >= s_.max_groups) return;
  if (decl.ranks.size() < 2 || static_cast<int>(decl.ranks.size()) > s_.max_members) return;
  Group g;
  g.members = decl.ranks;
  g.index_of.assign(static_cast<std::size_t>(s_.world_size), -1);
  for (std::size_t i = 0; i < g.members.size(); ++i) {
    const int r = g.members[i];
    if (r < 0 || r >= s_.world_size) return;
    g.index_of[static_cast<std::size_t>(r)] = static_cast<int>(i);
  }
  g.ranks.resize(g.members.size());
  groups_.emplace(decl.group, std::move(g));
}

std::vector<Event> Judge::add(int rank, const Arrival& a) {
  std::vector<Event> events;
  Group* g = group_for(a.group, true);
  if (!g || rank < 0 || rank >= s_.world_size) {
    ++untracked_;
    return events;
  }
  const int i = g->index_of[static_cast<std::size_t>(rank)];
  if (i < 0) {
    ++untracked_;
    return events;
  }
  if (a.seq <= g->last_seq - s_.max_pending) return events;  // long judged or forgotten
  auto it = g->pending.find(a.seq);
  if (it == g->pending.end()) {
    Pending p;
    p.op = a.op;
    p.slots.resize(g->members.size());
    it = g->pending.emplace(a.seq, std::move(p)).first;
  }
  Slot& slot = it->second.slots[static_cast<std::size_t>(i)];
  if (slot.have) return events;  // a second record for one rank's arrival: the first stands
  slot = {true, a.arrival_ns, a.end_ns, a.forward_ns, a.runq_ns, a.kernel_ns};
  if (++it->second.have == static_cast<int>(g->members.size())) {
    Pending done = std::move(it->second);
    g->pending.erase(it);
    judge(a.group, *g, a.seq, done, events);
  }
  while (static_cast<int>(g->pending.size()) > s_.max_pending) {
    g->pending.erase(g->pending.begin());
    ++incomplete_;
  }
  return events;
}

bool Judge::place(Group& g, const Pending& p, std::vector<double>& arrive,
                  std::vector<double>& ends, std::vector<double>& fwd) {
  const std::size_t n = g.members.size();
  // One timeline: the first member's clock; another host's shifted by the
  // median of its recent offsets, measured at collectives' ends.
  const int ref = domain(g.members[0]);
  std::map<int, std::int64_t> earliest_end;
  for (std::size_t i = 0; i < n; ++i) {
    const auto e = p.slots[i].e;
    if (e == 0) continue;
    auto [it, fresh] = earliest_end.emplace(domain(g.members[i]), e);
    if (!fresh) it->second = std::min(it->second, e);
  }
  std::map<int, double> shift;
  for (std::size_t i = 0; i < n; ++i) {
    const int d = domain(g.members[i]);
    if (d == ref || shift.count(d)) continue;
    auto& samples = g.offsets[d];
    if (earliest_end.count(d) && earliest_end.count(ref)) {
      samples.push_back(static_cast<double>(earliest_end[d] - earliest_end[ref]));
      if (samples.size() > kOffsetSamples) samples.pop_front();
    }
    if (samples.empty()) return false;
    shift[d] = median_of({samples.begin(), samples.end()});
  }
  auto on_line = [&](std::size_t i, std::int64_t t) {
    const int d = domain(g.members[i]);
    return static_cast<double>(t) - (d == ref ? 0.0 : shift[d]);
  };
  for (std::size_t i = 0; i < n; ++i) {
    arrive[i] = on_line(i, p.slots[i].a);
    ends[i] = p.slots[i].e ? on_line(i, p.slots[i].e) : 0;
    fwd[i] = p.slots[i].f ? on_line(i, p.slots[i].f) : 0;
  }
  return true;
}

void Judge::judge(int id, Group& g, std::int64_t seq, Pending& p, std::vector<Event>& events) {
  const std::size_t n = g.members.size();
  std::vector<double> arrive(n), ends(n), fwd(n);
  double mark = 0;  // the collective's moment, for the pace
  if (s_.kernels) {
    // No clock: the shortest kernel started last (judge.h).
    if (g.origin.size() != n) {
      g.origin.resize(n);
      for (std::size_t i = 0; i < n; ++i) g.origin[i] = p.slots[i].a;
    }
    std::vector<double> since(n);
    for (std::size_t i = 0; i < n; ++i) {
      arrive[i] = -static_cast<double>(p.slots[i].k);
      since[i] = static_cast<double>(p.slots[i].a - g.origin[i]);
    }
    mark = median_of(since);
  } else if (!place(g, p, arrive, ends, fwd)) {
    return;  // no common moment yet: this one cannot be placed
  } else {
    mark = median_of(arrive);
  }
  Seen seen;
  seen.seq = seq;
  seen.op = p.op;
  seen.med = mark;
  seen.late.resize(n);
  // Each rank against the median of the others (with two ranks: the other).
  std::vector<double> sorted = arrive;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(
        std::lower_bound(sorted.begin(), sorted.end(), arrive[i]) - sorted.begin());
    auto without = [&](std::size_t j) { return sorted[j < k ? j : j + 1]; };
    const std::size_t m = n - 1;
    const double others = m % 2 ? without(m / 2) : (without(m / 2 - 1) + without(m / 2)) / 2;
    seen.late[i] = arrive[i] - others;
  }
  // A rank late because it waited for a CPU more than the others did: the
  // machine's doing, taken off its lateness (judge.h).
  std::vector<double> queued(n);
  for (std::size_t i = 0; i < n; ++i) queued[i] = static_cast<double>(p.slots[i].q);
  const double usual_queue = median_of(queued);
  for (std::size_t i = 0; i < n; ++i)
    if (seen.late[i] > 0)
      seen.late[i] -= std::clamp(queued[i] - usual_queue, 0.0, seen.late[i]);
  g.history.push_back(seen.late);
  const std::size_t keep = std::clamp<std::size_t>(65536 / n, 20, 256);
  while (g.history.size() > keep) g.history.pop_front();
  // Where: only when the previous collective of the group ended, for every
  // member, at a known moment.
  bool ends_known = g.last_seq == seq - 1 && g.last_ends.size() == n;
  for (std::size_t i = 0; ends_known && i < n; ++i) ends_known = g.last_ends[i].e != 0;
  if (ends_known) {
    std::vector<double> comm(n), load(n), comp(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double prev = static_cast<double>(g.last_ends[i].e);
      const bool forward_since = fwd[i] > prev;
      comm[i] = prev;
      load[i] = forward_since ? fwd[i] - prev : 0;
      comp[i] = arrive[i] - (forward_since ? fwd[i] : prev);
    }
    seen.comm = excess(comm);
    seen.load = excess(load);
    seen.comp = excess(comp);
  }
  g.last_ends.assign(n, Slot{});
  for (std::size_t i = 0; i < n; ++i)
    g.last_ends[i] = {true, 0, static_cast<std::int64_t>(ends[i]), 0};
  g.last_seq = std::max(g.last_seq, seq);
  ++g.judged;
  g.window.push_back(std::move(seen));
  if (static_cast<int>(g.window.size()) > s_.window) g.window.pop_front();
  decide(id, g, events);
}

std::vector<double> Judge::thresholds(const Group& g, double pace) const {
  // The job's own spread: the 90th percentile of how late the other ranks
  // were over the group's history (each rank's own lateness left out where
  // the ranks are few, so a straggler does not raise its own bar).
  const std::size_t n = g.members.size();
  auto p90 = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    const auto at = v.size() * 9 / 10;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(at), v.end());
    return v[at];
  };
  std::vector<double> out(n);
  // Two ranks give no third to tell a late one from a stalled machine by:
  // the bar is then four times higher against the pace.
  const double floor = (n == 2 ? 4 : 1) * s_.pace_share * std::max(pace, 0.0);
  if (n > 16) {
    std::vector<double> all;
    for (const auto& c : g.history)
      for (double l : c) all.push_back(std::max(0.0, l));
    out.assign(n, std::max(s_.spread_factor * p90(std::move(all)), floor));
    return out;
  }
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> others;
    for (const auto& c : g.history)
      for (std::size_t q = 0; q < n; ++q)
        if (q != i) others.push_back(std::max(0.0, c[q]));
    out[i] = std::max(s_.spread_factor * p90(std::move(others)), floor);
  }
  return out;
}

void Judge::decide(int id, Group& g, std::vector<Event>& events) {
  const auto& w = g.window;
  double pace = 0;
  if (w.size() >= 2) pace = (w.back().med - w.front().med) / static_cast<double>(w.size() - 1);
  const auto thresholds_now = thresholds(g, pace);
  const Seen& now = w.back();
  for (std::size_t i = 0; i < g.members.size(); ++i) {
    const double thr = thresholds_now[i];
    RankState& st = g.ranks[i];
    int count = 0;
    double sum = 0, comm = 0, load = 0, comp = 0;
    std::vector<double> lates;
    std::int64_t first = -1;
    std::map<std::string, int> ops;
    for (const auto& c : w) {
      if (!(c.late[i] > thr)) continue;
      ++count;
      sum += c.late[i];
      lates.push_back(c.late[i]);
      if (first < 0) first = c.seq;
      ++ops[c.op];
      if (!c.comm.empty()) {
        comm += std::max(0.0, c.comm[i]);
        load += std::max(0.0, c.load[i]);
        comp += std::max(0.0, c.comp[i]);
      }
    }
    const double share = static_cast<double>(count) / static_cast<double>(w.size());
    if (st.named) {
      Episode& ep = episodes_[static_cast<std::size_t>(st.episode)];
      ++ep.judged;
      if (now.late[i] > thr) {
        ++st.late_count;
        if (st.lates.size() < kKeptLates) st.lates.push_back(now.late[i]);
        ++st.ops[now.op];
        if (!now.comm.empty()) {
          st.comm += std::max(0.0, now.comm[i]);
          st.load += std::max(0.0, now.load[i]);
          st.comp += std::max(0.0, now.comp[i]);
        }
      }
      ep.to_seq = now.seq;
      ep.late_ms = median_of(st.lates) / 1e6;
      ep.share = static_cast<double>(st.late_count) / static_cast<double>(std::max<std::int64_t>(ep.judged, 1));
      if (!s_.kernels) ep.where = where_word(st.comm, st.load, st.comp, s_.where_share);
      ep.op = std::max_element(st.ops.begin(), st.ops.end(), [](auto& a, auto& b) {
                return a.second < b.second;
              })->first;
      if (share <= s_.recovered_share && static_cast<int>(w.size()) >= s_.min_judged) {
        st.named = false;
        events.push_back({true, ep, share});
      } else {
        ep.to_seq = -1;
      }
      continue;
    }
    if (static_cast<int>(w.size()) < s_.min_judged || share < s_.late_share) continue;
    if (sum / static_cast<double>(w.size()) < s_.pace_share * pace) continue;  // costs too little
    Episode ep;
    ep.rank = g.members[i];
    ep.group = id;
    ep.members = g.members;
    ep.late_ms = median_of(lates) / 1e6;
    ep.share = share;
    ep.from_seq = first;
    ep.named_at = now.seq;
    ep.judged = static_cast<std::int64_t>(w.size());
    ep.where = s_.kernels ? "compute" : where_word(comm, load, comp, s_.where_share);
    ep.gpu = s_.kernels;
    ep.op = std::max_element(ops.begin(), ops.end(), [](auto& a, auto& b) {
              return a.second < b.second;
            })->first;
    if (static_cast<int>(episodes_.size()) >= kMaxEpisodes * s_.max_groups) continue;
    st = RankState{};
    st.named = true;
    st.episode = static_cast<int>(episodes_.size());
    st.lates = lates;
    st.late_count = count;
    st.comm = comm, st.load = load, st.comp = comp;
    st.ops = ops;
    episodes_.push_back(ep);
    events.push_back({false, ep, share});
  }
}

bool Judge::names(int rank, int group) const {
  const auto it = groups_.find(group);
  if (it == groups_.end() || rank < 0 || static_cast<std::size_t>(rank) >= it->second.index_of.size())
    return false;
  const int i = it->second.index_of[static_cast<std::size_t>(rank)];
  return i >= 0 && it->second.ranks[static_cast<std::size_t>(i)].named;
}

JudgeSummary Judge::summary() const {
  JudgeSummary out;
  for (const auto& [id, g] : groups_)
    out.groups.push_back({id, static_cast<int>(g.members.size()), g.judged});
  out.episodes = episodes_;
  out.incomplete = incomplete_;
  out.untracked = untracked_;
  return out;
}

}  // namespace gpudiag::stragglers
