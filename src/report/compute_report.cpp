// The compute phase in rank 0's report (compute_report.h).
#include "report/compute_report.h"

#include "checks/verdict.h"
#include "compute/judge.h"
#include "util/strings.h"

namespace gpudiag {

ComputeReport compute_report(const CheckResult& result) {
  ComputeReport out;
  std::vector<ComputeRank> ranks;
  for (const auto& rec : result.table)
    if (rec && rec->compute.ran()) ranks.push_back({rec->rank, rank_label(*rec), &rec->compute});
  if (ranks.empty()) return out;
  const auto crowded = oversubscribed_hosts(result.table);
  if (ranks.front().compute->device != "gpu")
    out.not_judged_why = "host backend";
  else if (!crowded.empty())
    out.not_judged_why = "more ranks than CPUs on " + join(crowded, ", ");
  out.rates_judged = out.not_judged_why.empty();
  out.line = compute_summary(ranks, out.rates_judged, out.not_judged_why);
  if (out.rates_judged)
    for (auto& [rank, why] : slow_ranks(ranks)) out.slow[rank] = std::move(why);
  return out;
}

std::string ComputeReport::text() const {
  std::string s = line;
  for (const auto& [rank, why] : slow)
    s += "warning: " + compute_slow_warning(why) + "\n";
  return s;
}

nlohmann::json compute_json(const RankRecord& rec, const ComputeReport& report) {
  const auto& c = rec.compute;
  nlohmann::json j = c;
  if (c.device != "gpu") j.erase("clocks");  // NVML's, on a GPU only
  std::vector<std::string> sums;
  for (const auto& p : c.parts) sums.push_back(p.checksum);
  j["checksum"] = join(sums, "/");
  j["agrees"] = c.judged == "agrees" ? nlohmann::json(true)
                : c.failed()         ? nlohmann::json(false)
                                     : nlohmann::json(nullptr);
  j["verdict"] = !c.ran()                      ? "not run"
                 : c.failed()                  ? c.judged
                 : report.slow.count(rec.rank) ? "slow"
                 : c.judged == "alone"         ? "alone"
                                               : "ok";
  j["rate_judged"] = report.rates_judged;
  return j;
}

}  // namespace gpudiag
