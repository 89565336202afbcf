// Rank 0's table for gpudiag bench: per size, the slowest rank's mean time per
// all-reduce and the algorithm and bus bandwidths it implies (nccl-tests'
// definitions), plus the same as JSON.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "checks/check.h"

namespace gpudiag {

std::string bench_table(const CheckResult& result);
nlohmann::json bench_json(const CheckResult& result);

}  // namespace gpudiag
