// Picking and rendering the first rank to go inf/nan (rank_scan.h).
#include "numerics/detector/rank_scan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "world/fingerprint_compare.h"

namespace gpudiag::numerics {

namespace {

std::string where(const Finding& f) {
  return "frame " + std::to_string(f.frame) + " (" + (f.module.empty() ? "the model" : f.module) +
         " " + f.class_name + ") " + f.label;
}

std::string what(const Finding& f) { return f.nan && f.inf ? "nan, inf" : f.nan ? "nan" : "inf"; }

/// Sort key: batch, then time (unknown last), then rank.
std::tuple<std::uint64_t, double, int> key(const RankOutcome& r) {
  const double t = std::isnan(r.result.first->time) ? INFINITY : r.result.first->time;
  return {r.result.first->batch, t, r.rank};
}

nlohmann::ordered_json finding_json(const Finding& f) {
  nlohmann::ordered_json j;
  j["batch_number"] = f.batch;
  j["frame"] = f.frame;
  j["module"] = f.module;
  j["class"] = f.class_name;
  j["label"] = f.label;
  j["nan"] = f.nan;
  j["inf"] = f.inf;
  j["time"] = std::isnan(f.time) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.time);
  return j;
}

}  // namespace

std::string ranks_text(const std::vector<int>& ascending) {
  return (ascending.size() == 1 ? "rank " : "ranks ") + compress_ranks(ascending);
}

std::optional<FirstBad> first_bad(std::span<const RankOutcome> ranks) {
  const RankOutcome* best = nullptr;
  for (const auto& r : ranks)
    if (r.result.first && (!best || key(r) < key(*best))) best = &r;
  if (!best) return std::nullopt;
  FirstBad out{best->rank, *best->result.first, {}};
  for (const auto& r : ranks)
    if (&r != best && r.result.first && r.result.first->batch == out.at.batch)
      out.also.push_back(r.rank);
  std::sort(out.also.begin(), out.also.end());
  return out;
}

void print_rank_table(std::ostream& out, std::span<const RankOutcome> ranks) {
  if (const auto first = first_bad(ranks)) {
    out << "first inf/nan: rank " << first->rank << ", batch " << first->at.batch << ", "
        << where(first->at);
    if (!first->also.empty()) out << " (also " << ranks_text(first->also) << ")";
  } else {
    std::vector<int> all;
    for (const auto& r : ranks) all.push_back(r.rank);
    out << "no inf or nan in any of " << ranks_text(all);
  }
  out << "\nrank  batch  first inf/nan\n";
  for (const auto& r : ranks) {
    char head[32];
    if (r.result.first) {
      std::snprintf(head, sizeof head, "%4d  %5llu  ", r.rank,
                    static_cast<unsigned long long>(r.result.first->batch));
      out << head << where(*r.result.first) << ": " << what(*r.result.first) << "\n";
    } else {
      std::snprintf(head, sizeof head, "%4d  %5s  ", r.rank, "-");
      out << head << "none in " << r.batches << (r.batches == 1 ? " batch" : " batches") << "\n";
    }
  }
}

nlohmann::ordered_json rank_table_json(std::span<const RankOutcome> ranks) {
  nlohmann::ordered_json j;
  const auto first = first_bad(ranks);
  if (first) {
    j["first"] = finding_json(first->at);
    j["first"]["rank"] = first->rank;
    j["first"]["also_ranks"] = first->also;
  } else {
    j["first"] = nullptr;
  }
  j["ranks"] = nlohmann::ordered_json::array();
  for (const auto& r : ranks) {
    nlohmann::ordered_json e;
    e["rank"] = r.rank;
    e["batches"] = r.batches;
    e["first"] = r.result.first ? finding_json(*r.result.first) : nlohmann::ordered_json(nullptr);
    j["ranks"].push_back(std::move(e));
  }
  return j;
}

}  // namespace gpudiag::numerics
