// The replica verdict and the offline comparison of replica files
// (replica_verdict.h). Files are grouped by their replica group (the global
// ranks the header lists; files without one form a single group); within a
// group only steps every file holds are compared, by their rows' digests
// first, and only the first step that differs is read again in full.
#include "numerics/detector/replica_verdict.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "numerics/detector/rank_scan.h"
#include "numerics/formats/replica_sums.h"
#include "util/error.h"

namespace gpudiag::numerics {

namespace {

constexpr std::size_t kShownTensors = 3;  // as replica_check.py's DETAIL_TENSORS

std::string listed(const std::vector<std::size_t>& differ, const std::vector<std::string>& names) {
  std::string out =
      "in " + std::to_string(differ.size()) + " of " + std::to_string(names.size()) + " tensors: ";
  for (std::size_t k = 0; k < differ.size() && k < kShownTensors; ++k)
    out += (k ? ", " : "") + names[differ[k]];
  if (differ.size() > kShownTensors)
    out += " and " + std::to_string(differ.size() - kShownTensors) + " more";
  return out;
}

std::vector<std::size_t> differing(const std::vector<std::uint64_t>& a,
                                   const std::vector<std::uint64_t>& b) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (a[i] != b[i]) out.push_back(i);
  return out;
}

}  // namespace

std::optional<ReplicaVerdict> replica_verdict(std::uint64_t step, const std::vector<int>& ranks,
                                              const std::vector<std::string>& names,
                                              const std::vector<std::vector<std::uint64_t>>& rows) {
  // Distinct rows with the ranks holding each, in order of first appearance.
  std::vector<std::pair<const std::vector<std::uint64_t>*, std::vector<int>>> sets;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    auto it =
        std::find_if(sets.begin(), sets.end(), [&](const auto& s) { return *s.first == rows[i]; });
    if (it == sets.end())
      sets.push_back({&rows[i], {ranks[i]}});
    else
      it->second.push_back(ranks[i]);
  }
  if (sets.size() <= 1) return std::nullopt;
  for (auto& s : sets) std::sort(s.second.begin(), s.second.end());
  std::stable_sort(sets.begin(), sets.end(),
                   [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
  const std::string head = "replicas diverged at step " + std::to_string(step) + ": ";
  ReplicaVerdict v;
  if (sets[0].second.size() > sets[1].second.size()) {
    std::vector<int> wrong;
    for (std::size_t i = 1; i < sets.size(); ++i)
      wrong.insert(wrong.end(), sets[i].second.begin(), sets[i].second.end());
    std::sort(wrong.begin(), wrong.end());
    v.rank = wrong[0];
    const std::size_t at = std::find(ranks.begin(), ranks.end(), v.rank) - ranks.begin();
    v.differ = differing(rows[at], *sets[0].first);
    std::string also;
    if (wrong.size() > 1) {
      const std::vector<int> others(wrong.begin() + 1, wrong.end());
      also = std::string(" (so do") + (others.size() == 1 ? "es " : " ") + ranks_text(others) + ")";
    }
    v.message = head + "rank " + std::to_string(v.rank) + " differs from " +
                ranks_text(sets[0].second) + also + " " + listed(v.differ, names);
    return v;
  }
  std::sort(sets.begin(), sets.end(),
            [](const auto& a, const auto& b) { return a.second.front() < b.second.front(); });
  v.differ = differing(*sets[0].first, *sets[1].first);
  std::string held;
  for (const auto& s : sets) held += (held.empty() ? "" : " vs ") + ranks_text(s.second);
  // Two replicas cannot outvote each other: a third would.
  const std::string two = ranks.size() == 2 ? " (2 replicas: a third would decide)" : "";
  v.message = head + held + ", no majority says which is wrong" + two + ", " + listed(v.differ, names);
  return v;
}

bool check_replica_files(const std::vector<std::string>& files, std::ostream& out,
                         nlohmann::ordered_json* json) {
  std::map<std::vector<int>, std::vector<ReplicaFile>> groups;
  for (const auto& f : files) {
    ReplicaFile r = index_replica_file(f);
    groups[r.group].push_back(std::move(r));
  }
  bool diverged = false;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (auto& [group, members] : groups) {
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.rank < b.rank; });
    std::vector<int> ranks;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (i > 0 && members[i].rank == members[i - 1].rank)
        throw UsageError(members[i].path + " and " + members[i - 1].path + " are both rank " +
                             std::to_string(members[i].rank) + "'s replica checksums",
                         "keep one file per rank (scan each job's folder on its own)");
      if (members[i].format != members[0].format)
        throw UsageError(members[i].path + " is " + members[i].format + " and " + members[0].path +
                             " is " + members[0].format +
                             ": checksums of two versions are not comparable",
                         "compare files written by one version of ReplicaCheck (rerun the job with "
                         "one gpudiag)");
      if (members[i].names != members[0].names)
        throw UsageError(members[i].path + " lists other tensors than " + members[0].path,
                         "compare the files of one model's replicas");
      ranks.push_back(members[i].rank);
    }
    // Steps every member holds, in order; the first whose digests differ.
    std::uint64_t compared = 0;
    std::optional<std::uint64_t> bad_step;
    for (const auto& [step, digest] : members[0].digests) {
      bool everywhere = true, same = true;
      for (const auto& m : members) {
        auto it = m.digests.find(step);
        everywhere = everywhere && it != m.digests.end();
        same = same && everywhere && it->second == digest;
      }
      if (!everywhere) continue;
      ++compared;
      if (!same) {
        bad_step = step;
        break;
      }
    }
    nlohmann::ordered_json g;
    g["ranks"] = ranks;
    g["steps_compared"] = compared;
    g["diverged"] = nullptr;
    if (bad_step) {
      std::vector<std::vector<std::uint64_t>> rows;
      for (const auto& m : members) rows.push_back(*replica_row(m, *bad_step));
      const auto v = replica_verdict(*bad_step, ranks, members[0].names, rows);
      if (v) {
        out << v->message << "\n";
        diverged = true;
        std::vector<std::string> names;
        for (auto i : v->differ) names.push_back(members[0].names[i]);
        g["diverged"] = {{"step", *bad_step},
                         {"rank", v->rank < 0 ? nlohmann::ordered_json(nullptr)
                                              : nlohmann::ordered_json(v->rank)},
                         {"tensors", names},
                         {"message", v->message}};
      }
    } else if (members.size() < 2) {
      spdlog::warn("scan: {} holds the replica checksums of one rank: nothing to compare it with",
                   members[0].path);
    } else {
      std::fprintf(stderr,
                   "gpudiag scan: replicas agree: %s, %llu steps compared, %zu tensors each\n",
                   ranks_text(ranks).c_str(), static_cast<unsigned long long>(compared),
                   members[0].names.size());
    }
    list.push_back(std::move(g));
  }
  if (json) (*json)["groups"] = std::move(list);
  return diverged;
}

}  // namespace gpudiag::numerics
