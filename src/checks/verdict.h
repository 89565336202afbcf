// Reading a checkpoint's table: which ranks are missing, which failed, and
// which conflicts only a whole-job view shows (two ranks on one GPU, world
// sizes or backends that disagree). Pure functions over records, so every
// rank reaches the same conclusions from the same table.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "checks/record.h"

namespace gpudiag {

/// "rank 3 [node2-1]" (host and local rank once known).
std::string rank_label(const RankRecord& r);
std::string rank_label(int rank, const std::optional<RankRecord>& known);

/// Whole-job conflicts visible at the exchange, one line each, naming ranks.
std::vector<std::string> exchange_conflicts(const std::vector<std::optional<RankRecord>>& table);

/// Ranks that share a GPU under distinct NCCL_HOSTIDs (allowed: NCCL then
/// treats each as a host of its own); one note per GPU, for the report.
std::vector<std::string> shared_gpu_notes(const std::vector<std::optional<RankRecord>>& table);

/// Version differences between ranks (warnings, not failures).
std::vector<std::string> version_differences(const std::vector<std::optional<RankRecord>>& table);

/// Hosts running more ranks than they have CPUs: "vm: 6 ranks on 2 CPUs".
std::vector<std::string> oversubscribed_hosts(
    const std::vector<std::optional<RankRecord>>& table);

/// Joins problems into one line: the first, then "(+N more)".
std::string one_line(const std::vector<std::string>& problems);

}  // namespace gpudiag
