// Rank 0's report of the link test (gpudiag bench --links): the bandwidth of
// every pair (a matrix up to kMatrixMaxRanks ranks, a line per rank beyond),
// a matrix of hosts when there are several, each class of links, and the
// findings of checks/links.h; the same as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "checks/check.h"
#include "checks/links.h"

namespace gpudiag {

inline constexpr int kMatrixMaxRanks = 16;

/// The verdict on the links every rank measured (result.table).
LinkVerdict link_verdict(const CheckResult& result);

std::string link_table(const CheckResult& result, const LinkVerdict& verdict);
nlohmann::json link_json(const CheckResult& result, const LinkVerdict& verdict);

}  // namespace gpudiag
