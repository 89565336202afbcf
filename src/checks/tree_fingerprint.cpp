// See tree_fingerprint.h. The counts and findings from the groups' own
// comparisons are added up as before (up to the usual few named, the rest
// counted); the differences come from the merged summaries, plus those of
// groups that sent none.
#include "checks/tree_fingerprint.h"

#include <algorithm>
#include <optional>

#include "checks/verdict.h"
#include "world/fingerprint_summary.h"

namespace gpudiag {

namespace {

/// A count from a comparison (a group's: untrusted), 0 when it is not one.
std::size_t num(const nlohmann::json& p, const char* k) {
  auto it = p.find(k);
  if (it == p.end() || !it->is_number_integer()) return 0;
  const auto v = it->get<long long>();
  return v > 0 ? static_cast<std::size_t>(std::min<long long>(v, 1LL << 30)) : 0;
}

}  // namespace

JobPrints merge_group_prints(const std::vector<GroupPrints>& groups) {
  JobPrints out;
  std::vector<FingerprintSummary> summaries;
  std::vector<const nlohmann::json*> within;  // comparisons of groups without a summary
  std::size_t compared = 0;
  // Groups of nodes behind the summaries and the comparisons: a supergroup's
  // (merged from its groups') counts its own.
  std::size_t across_n = 0, within_n = 0;
  auto groups_in = [](const nlohmann::json& c) {
    return c.is_object() ? std::max<std::size_t>(1, num(c, "across_groups")) : 1;
  };
  for (const auto& g : groups) {
    if (!g.comparison.is_object() && g.summary.is_null()) continue;
    ++compared;
    if (auto s = decode_summary(g.summary, g.first, g.last)) {
      summaries.push_back(std::move(*s));
      across_n += groups_in(g.comparison);
      if (g.comparison.is_object()) within_n += num(g.comparison, "within_groups");
    } else if (g.comparison.is_object()) {
      within.push_back(&g.comparison);
      within_n += std::max<std::size_t>(1, num(g.comparison, "within_groups")) ;
    }
  }
  if (compared == 0) return out;
  nlohmann::json j;
  std::size_t ranks = 0, hosts = 0, fields = 0, more_d = 0, more_f = 0;
  auto diffs = nlohmann::json::array(), finds = nlohmann::json::array();
  if (!summaries.empty()) {
    const auto merged = merge_summaries(summaries);
    const auto job = compare_summary(merged);
    const auto jj = comparison_json(job);
    ranks = num(jj, "ranks_compared");
    hosts = num(jj, "hosts");
    fields = num(jj, "fields_compared");
    more_d = num(jj, "more_differences");
    diffs = jj["differences"];
    // Broken across the job, uniform in every group: no group said so.
    for (const auto& d : job.differences) {
      if (!d.broken) continue;
      const bool seen = std::any_of(summaries.begin(), summaries.end(),
                                    [&](const auto& s) { return differs_within(s, d.field); });
      if (!seen) out.conflicts.push_back(difference_line(d, 2) + " (" + d.remedy + ")");
    }
  }
  for (const auto* p : within) {
    ranks += num(*p, "ranks_compared");
    hosts += num(*p, "hosts");
    fields = std::max(fields, num(*p, "fields_compared"));
    more_d += num(*p, "more_differences");
    if (auto it = p->find("differences"); it != p->end() && it->is_array())
      for (const auto& d : *it) {
        if (diffs.size() < kReviewNames)
          diffs.push_back(d);
        else
          ++more_d;
      }
  }
  for (const auto& g : groups) {
    if (!g.comparison.is_object()) continue;
    more_f += num(g.comparison, "more_findings");
    if (auto it = g.comparison.find("findings"); it != g.comparison.end() && it->is_array())
      for (const auto& f : *it) {
        if (finds.size() < kReviewNames)
          finds.push_back(f);
        else
          ++more_f;
      }
  }
  j["ranks_compared"] = ranks;
  j["hosts"] = hosts;
  j["fields_compared"] = fields;
  j["differences"] = std::move(diffs);
  j["more_differences"] = more_d;
  j["findings"] = std::move(finds);
  j["more_findings"] = more_f;
  if (across_n > 1 || (across_n > 0 && within_n > 0)) j["across_groups"] = across_n;
  if (within_n > 1 || (within_n > 0 && across_n > 0)) j["within_groups"] = within_n;
  out.fingerprint = std::move(j);
  return out;
}

}  // namespace gpudiag
