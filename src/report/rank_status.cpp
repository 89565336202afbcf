// rank_statuses: one pass classifies each rank from what rank 0 saw (its last
// record, the checkpoint it was last seen at, the plane's note when it went
// missing, the launcher's death notice); a second pass traces each failure
// that names another rank back to the rank that started it, so "stopped by"
// points at the dead rank, not at the neighbour that timed out waiting on it.
#include "report/rank_status.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "util/strings.h"

namespace gpudiag {

namespace {

using Kind = RankStatus::Kind;

/// The first "rank K" in `reason` other than `self` (gpudiag's reasons lead
/// with the rank they blame: "stopped at the all-reduce checkpoint: rank 2
/// [n1-2] ..."); nullopt when it names none.
std::optional<int> first_named_rank(const std::string& reason, int self, int world) {
  static const std::regex re(R"(\brank (\d{1,9})\b)");
  for (auto it = std::sregex_iterator(reason.begin(), reason.end(), re);
       it != std::sregex_iterator(); ++it) {
    const int k = std::stoi((*it)[1].str());
    if (k != self && k >= 0 && k < world) return k;
  }
  return std::nullopt;
}

/// "pid 4242 on node2, last phase: all-reduce" -> "all-reduce" (the store
/// plane's note); "" when the note has none.
std::string phase_from_note(const std::string& note) {
  const std::string label = "last phase: ";
  auto at = note.rfind(label);
  if (at == std::string::npos) return "";
  auto phase = note.substr(at + label.size());
  auto end = phase.find_first_of(",;) ");
  return end == std::string::npos ? phase : phase.substr(0, end);
}

/// The launcher's notice "rank 2 [n1-2] (pid 42) was killed by SIGKILL (seen
/// by gpudiag launch on n1)": {2, "killed by SIGKILL"}.
std::optional<std::pair<int, std::string>> parse_death(const std::string& notice) {
  static const std::regex re(R"(^rank (\d{1,9}) \[[^\]]*\] \(pid \d+\) (?:was )?(.+?)(?: \(seen by .*\))?$)");
  std::smatch m;
  if (!std::regex_match(notice, m, re)) return std::nullopt;
  return std::make_pair(std::stoi(m[1].str()), m[2].str());
}

std::string at_or(const RankSlots<std::string>& v, int i) {
  return i >= 0 && i < static_cast<int>(v.size()) ? v[i] : std::string();
}

}  // namespace

std::string status_name(Kind kind) {
  switch (kind) {
    case Kind::ok: return "ok";
    case Kind::broken: return "broken";
    case Kind::timeout: return "timeout";
    case Kind::stopped: return "stopped";
    case Kind::dead: return "dead";
    case Kind::gone: return "gone";
    case Kind::missing: return "missing";
  }
  return "missing";
}

std::vector<RankStatus> rank_statuses(const CheckResult& result) {
  const int n = static_cast<int>(result.table.size());
  const int me = result.me.rank;
  // Rank 0 passes every checkpoint itself: where it was last is the end.
  const std::string final_checkpoint = me >= 0 && me < n ? at_or(result.last_seen, me) : "";
  std::optional<std::pair<int, std::string>> death;
  if (result.death) death = parse_death(*result.death);

  std::vector<RankStatus> out(n);
  std::map<int, int> blames;  // failed rank -> the rank its reason names first
  for (int r = 0; r < n; ++r) {
    auto& s = out[r];
    s.rank = r;
    const auto& rec = result.table[r];
    const bool at_the_end = rec && !final_checkpoint.empty() && at_or(result.last_seen, r) == final_checkpoint;
    if (at_the_end) {
      if (rec->ok) {
        s.kind = Kind::ok;
        continue;
      }
      s.kind = rec->timed_out ? Kind::timeout : Kind::broken;
      s.failed_phase = rec->failed_phase;
      if (!rec->hardware.empty()) s.hardware = rec->host + ": " + rec->hardware;
      if (auto k = first_named_rank(rec->reason, r, n)) blames[r] = *k;
      continue;
    }
    s.missed_at = at_or(result.missed_at, r);
    s.last_phase = phase_from_note(at_or(result.missing_note, r));
    if (!rec && s.last_phase.empty()) {
      s.kind = Kind::missing;  // the plane never heard of it either
      continue;
    }
    if (s.last_phase.empty()) s.last_phase = rec->phase;
    if (rec && !rec->ok) s.failed_phase = rec->failed_phase;
    if (death && death->first == r) {
      s.kind = Kind::dead;
      s.death = death->second;
    } else {
      s.kind = Kind::gone;
    }
  }
  // A failure that names another rank was caused by it when that rank is not
  // OK; follow the chain to where it starts (a cycle: nobody started it).
  for (auto& [r, named] : blames) {
    std::set<int> seen{r};
    int cur = named;
    while (blames.count(cur) && !seen.count(cur)) seen.insert(cur), cur = blames.at(cur);
    if (seen.count(cur) || out[cur].ok()) continue;
    out[r].kind = Kind::stopped;
    out[r].stopped_by = cur;
  }
  return out;
}

std::string whereabouts(const RankStatus& s) {
  if (!s.vanished()) return "";
  std::string where = s.kind == Kind::missing ? "never reported" : "last phase: " + s.last_phase;
  if (!s.missed_at.empty()) where += ", did not reach the " + s.missed_at + " checkpoint";
  return where;
}

int count_ok(const std::vector<RankStatus>& statuses) {
  return static_cast<int>(std::count_if(statuses.begin(), statuses.end(),
                                        [](const RankStatus& s) { return s.ok(); }));
}

std::string not_ok_phrase(const std::vector<RankStatus>& statuses) {
  // Grouped by the same words, in order of each group's lowest rank.
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (const auto& s : statuses) {
    if (s.ok()) continue;
    std::string what = status_name(s.kind);
    if (s.stopped_by) what += " by rank " + std::to_string(*s.stopped_by);
    if (s.kind == Kind::broken || s.kind == Kind::timeout) what += " in " + s.failed_phase;
    if (s.kind == Kind::broken && !s.hardware.empty()) what += " (node " + s.hardware + ")";
    if (s.vanished()) what += ": " + (s.death.empty() ? "" : s.death + ", ") + whereabouts(s);
    auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == what; });
    if (it == groups.end())
      groups.push_back({what, {s.rank}});
    else
      it->second.push_back(s.rank);
  }
  // The causes first, then the ranks they stopped.
  std::stable_partition(groups.begin(), groups.end(),
                        [](auto& g) { return g.first.rfind("stopped", 0) != 0; });
  std::vector<std::string> parts;
  for (const auto& [what, ranks] : groups)
    parts.push_back((ranks.size() == 1 ? "rank " : "ranks ") + format_ranks(ranks) + " " +
                    what);
  return join(parts, "; ");
}

}  // namespace gpudiag
