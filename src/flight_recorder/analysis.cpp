// analyze (analysis.h): the rules, over the groups of groups.h, and each finding's line; the
// causes among the ranks they name come from causes.h.
//
// Near-linear in a group's members: a rule asks what it asks of every member's peers (did
// any complete this seq, did any complete `lag` more) of aggregates made once a group (the
// census of causes.h, the two furthest completed counters), not of each peer in turn; the
// work left per finding is the finding's own size (its states name every member).
#include "flight_recorder/analysis.h"

#include <algorithm>
#include <climits>
#include <set>

#include "flight_recorder/causes.h"
#include "flight_recorder/groups.h"
#include "util/strings.h"

namespace gpudiag::fr {

namespace {

std::string sizes_text(const std::vector<std::vector<std::int64_t>>& sizes) {
  std::string s = "[";
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    s += t ? ", [" : "[";
    for (std::size_t k = 0; k < sizes[t].size(); ++k)
      s += (k ? ", " : "") + std::to_string(sizes[t][k]);
    s += "]";
  }
  return s + "]";
}

std::string who(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

std::string group_name(const Group& g) {
  const auto& r = g.report;
  return group_label(r.name, r.desc, r.ranks, r.shared_name);
}

/// The members with a dump, by their state at a seq: "ranks 0,3 started it; rank 1 ...".
std::string states_text(const std::map<int, State>& states, bool starts_recorded) {
  std::map<State, std::vector<int>> by;
  for (const auto& [r, s] : states) by[s].push_back(r);
  std::vector<std::string> parts;
  for (auto s : {State::completed, State::started, State::scheduled, State::not_scheduled}) {
    if (!by.count(s)) continue;
    const char* what = s == State::completed ? " completed it"
                       : s == State::started ? " started it"
                       : s == State::scheduled
                           ? (starts_recorded ? " queued it and never started it"
                                              : " queued it and never completed it")
                           : " never scheduled it";
    parts.push_back(who(by[s]) + what);
  }
  return join(parts, "; ");
}

void add(Report& rep, const Group& g, Finding f, std::string detail) {
  f.group = g.report.name;
  f.group_desc = g.report.desc;
  f.group_ranks = g.report.ranks;
  f.text = group_name(g) + ": " + detail;
  rep.findings.push_back(std::move(f));
}

/// missing-ranks: the lowest queued counter, when others queued past it.
void missing_ranks(Report& rep, const Group& g, bool starts) {
  std::int64_t lo = INT64_MAX, hi = -1;
  for (const auto& tr : g.tracks)
    lo = std::min(lo, tr.t.enqueued), hi = std::max(hi, tr.t.enqueued);
  if (g.tracks.size() < 2 || lo >= hi) return;
  Finding f;
  f.kind = "missing-ranks";
  f.seq = std::max<std::int64_t>(lo + 1, 1);
  if (const Op* op = g.op(f.seq)) f.op = *op;
  f.states = g.states(f.seq);
  for (const auto& [r, s] : f.states)
    if (s == State::not_scheduled) f.ranks.push_back(r);
  add(rep, g, f, describe(f.seq, f.op) + ": " + states_text(f.states, starts));
}

/// gpu-stopped: the first seq a rank queued and did not start while a peer got further. A
/// peer is ahead at seq s where it completed s, or started it and the rank times starts; the
/// rank itself is neither (it queued s and never started it, or never completed it where it
/// does not time starts), so the group's census at s says whether anyone is.
void gpu_stopped(Report& rep, const Group& g, const Census& census) {
  std::map<std::int64_t, std::vector<const Track*>> at;  // seq -> the ranks stopped before it
  for (const auto& tr : g.tracks) {
    const bool starts = tr.t.starts_recorded;
    const std::int64_t s = (starts ? tr.t.started : tr.t.completed) + 1;
    if (s < 1 || s > tr.t.enqueued) continue;
    const auto n = census.count(s);
    if (n[static_cast<int>(State::completed)] + (starts ? n[static_cast<int>(State::started)] : 0))
      at[s].push_back(&tr);
  }
  for (const auto& [seq, stopped] : at) {
    Finding f;
    f.kind = "gpu-stopped";
    f.seq = seq;
    if (const Op* op = census.op(seq)) f.op = *op;
    bool starts = true, any_starts = false;  // all, any of the stopped ranks time starts
    for (const Track* tr : stopped) {
      f.ranks.push_back(tr->t.rank);  // by rank, as the tracks are
      starts = starts && tr->t.starts_recorded;
      any_starts = any_starts || tr->t.starts_recorded;
    }
    f.states = g.states(seq);
    std::map<int, State> ahead;
    for (const auto& [p, ps] : f.states)
      if ((ps == State::completed || (ps == State::started && any_starts)) &&
          !std::binary_search(f.ranks.begin(), f.ranks.end(), p)) {
        f.peers.push_back(p);
        ahead[p] = ps;
      }
    add(rep, g, f,
        describe(seq, f.op) + ": " + who(f.ranks) +
            (starts ? " queued it and never started it; " : " queued it and never completed it; ") +
            states_text(ahead, starts) + ": the GPU stopped before this collective");
  }
}

/// queued-far-past: a CPU that kept queueing while its GPU stopped completing. Whether any
/// peer completed `lag` more is a question for the furthest other peer (the two furthest
/// found once); the peers are listed only for a rank that gets a finding.
void queued_far_past(Report& rep, const Group& g, std::int64_t lag, const Census& census) {
  const Track* first = nullptr;  // the furthest completed, and the furthest of the others
  std::int64_t second = INT64_MIN;
  for (const auto& tr : g.tracks) {
    if (!first || tr.t.completed > first->t.completed) {
      if (first) second = first->t.completed;
      first = &tr;
    } else {
      second = std::max(second, tr.t.completed);
    }
  }
  for (const auto& tr : g.tracks) {
    if (tr.t.enqueued - tr.t.completed < lag) continue;
    const std::int64_t furthest = &tr == first ? second : first->t.completed;
    if (furthest == INT64_MIN ||
        static_cast<__int128>(furthest) - tr.t.completed < static_cast<__int128>(lag))
      continue;  // no peer is that far
    Finding f;
    f.kind = "queued-far-past";
    for (const auto& peer : g.tracks)
      if (peer.t.rank != tr.t.rank && peer.t.completed - tr.t.completed >= lag) {
        f.peers.push_back(peer.t.rank);
        f.peers_completed = std::max(f.peers_completed, peer.t.completed);
      }
    if (f.peers.empty()) continue;
    f.seq = tr.t.completed + 1;
    if (const Op* op = census.op(f.seq)) f.op = *op;
    f.ranks = {tr.t.rank};
    f.states = g.states(f.seq);
    add(rep, g, f,
        who(f.ranks) + " queued up to seq " + std::to_string(tr.t.enqueued) +
            " and completed only up to seq " + std::to_string(tr.t.completed) + " while " +
            who(f.peers) + " completed up to seq " + std::to_string(f.peers_completed) +
            ": its GPU stopped at " + describe(f.seq, f.op) + " and its CPU kept queueing");
  }
}

/// Where the group waits: the first seq some member with a dump has not completed.
void waits(Group& g) {
  std::int64_t lo = INT64_MAX, hi = -1;
  for (const auto& tr : g.tracks)
    lo = std::min(lo, tr.t.completed), hi = std::max(hi, tr.t.enqueued);
  if (g.tracks.empty() || lo + 1 > hi) return;
  g.report.waits_at = std::max<std::int64_t>(lo + 1, 1);
  if (const Op* op = g.op(g.report.waits_at)) g.report.waits_op = *op;
  g.report.waits_states = g.states(g.report.waits_at);
}

void no_dump(Report& rep, const Group& g, bool starts) {
  if (g.report.no_dump.empty()) return;
  Finding f;
  f.kind = "no-dump";
  f.ranks = g.report.no_dump;
  f.seq = g.report.waits_at;
  f.op = g.report.waits_op;
  f.states = g.report.waits_states;
  std::string line = who(f.ranks) + " of " + std::to_string(g.report.ranks.size()) +
                     " have no readable dump and are not judged";
  if (f.seq >= 0) line += "; at " + describe(f.seq, f.op) + ", " + states_text(f.states, starts);
  add(rep, g, f, line);
}

}  // namespace

std::string group_label(const std::string& name, const std::string& desc,
                        const std::vector<int>& ranks, bool shared_name) {
  return "group " + name + (shared_name ? " [" + rank_list(ranks) + "]" : "") +
         (desc.empty() || desc == "undefined" ? "" : " (" + desc + ")");
}

std::string rank_list(const std::vector<int>& ranks) {
  return rank_ranges(std::vector<long long>(ranks.begin(), ranks.end()));
}

std::string describe(std::int64_t seq, const Op& op) {
  std::string s = "seq " + std::to_string(seq);
  if (!op.known()) return s + " (gone from every ring buffer)";
  s += " " + op.name + " " + sizes_text(op.in_sizes);
  if (op.out_sizes != op.in_sizes) s += " -> " + sizes_text(op.out_sizes);
  auto types = [](const std::vector<std::string>& t) { return t.empty() ? "?" : join(t, ","); };
  s += " " + types(op.in_dtypes);
  if (op.out_dtypes != op.in_dtypes) s += " -> " + types(op.out_dtypes);
  return s + (op.cut ? " ..." : "");
}

Report analyze(Inputs inputs, const Options& options) {
  Report rep;
  rep.inputs = std::move(inputs);
  std::set<int> all, dumped;
  std::map<std::string, std::vector<int>> versions;
  bool starts = false;
  for (const auto& d : rep.inputs.dumps) {
    all.insert(d.rank);
    dumped.insert(d.rank);
    versions[d.version].push_back(d.rank);
    for (const auto& [name, g] : d.groups) all.insert(g.ranks.begin(), g.ranks.end());
    for (const auto& e : d.entries) starts = starts || e.start_recorded;
  }
  for (const auto& p : rep.inputs.problems)
    if (p.rank) all.insert(*p.rank);
  if (versions.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [v, ranks] : versions)
      parts.push_back((v.empty() ? "none" : v) + " (" + who(ranks) + ")");
    rep.notes.push_back("the dumps differ in version: " + join(parts, ", "));
  }
  auto groups = build_groups(rep.inputs, rep.notes);
  for (auto& g : groups) {
    const Census census(g);
    waits(g);
    missing_ranks(rep, g, starts);
    gpu_stopped(rep, g, census);
    queued_far_past(rep, g, options.lag, census);
    no_dump(rep, g, starts);
  }
  reduce_causes(rep, groups);
  for (auto& g : groups) rep.groups.push_back(std::move(g.report));
  rep.ranks.assign(all.begin(), all.end());
  for (int r : all)
    if (!dumped.count(r)) rep.no_dump_ranks.push_back(r);
  return rep;
}

}  // namespace gpudiag::fr
