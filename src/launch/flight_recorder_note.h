// What a torch program's NCCL flight recorder says after a failed or hung
// attempt: the launcher points torch's dumps into the attempt's folder
// (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, launcher.cpp) and, when some exist, reads
// them as `gpudiag fr` does (flight_recorder/) and prints its findings.
#pragma once

#include <string>
#include <vector>

namespace gpudiag::launch {

/// `gpudiag fr`'s text for the dumps in `dir`, line by line; empty when
/// there are none (or none readable), never an exception.
std::vector<std::string> flight_recorder_findings(const std::string& dir);

}  // namespace gpudiag::launch
