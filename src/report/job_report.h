// Rank 0's view of the whole job after a check: the versions line, the summary
// table, and the JSON report (--json FILE).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "checks/check.h"

namespace gpudiag {

/// "versions: backend=nccl, CUDA runtime 13.0, driver 13.0, NCCL 2.28.9, gpudiag 0.1.0"
std::string versions_line(const CheckResult& result);
/// The same without "versions: " and the newline, from one rank's record.
std::string versions_text(const RankRecord& me, const std::string& store_unauthenticated);

/// A header line, one row per rank (phase times, status) and the warnings.
/// Past `max_rows` ranks (0: no limit) the rows are the ranks that are not
/// OK (the first kMaxProblemRows of them) under a line of counts per state,
/// and a last line says where the whole table is (`full_at`).
std::string summary_table(const CheckResult& result, int max_rows = 0,
                          const std::string& full_at = "");
inline constexpr int kMaxProblemRows = 64;

nlohmann::json job_json(const CheckResult& result);

/// True when every rank is OK by rank_statuses (report/rank_status.h).
bool job_ok(const CheckResult& result);

}  // namespace gpudiag
