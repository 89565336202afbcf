// What a torch program's NCCL flight recorder says after a failed or hung
// attempt: the launcher points torch's dumps into the attempt's folder
// (TORCH_NCCL_DEBUG_INFO_TEMP_FILE, launcher.cpp) and, when some exist, reads
// them as `gpudiag fr` does (flight_recorder/) and prints its findings; the
// dumps are a rank's output, so read with fr's bounds and a deadline.
#pragma once

#include <string>
#include <vector>

namespace gpudiag::launch {

/// `gpudiag fr`'s text for the dumps in `dir`, line by line (at most 40);
/// empty when there are none; one line saying why when they cannot be read
/// (fr's limits: flight_recorder/value.h), or when reading them takes more
/// than `deadline_s` (the launcher then goes on). Never an exception.
std::vector<std::string> flight_recorder_findings(const std::string& dir, double deadline_s = 30);

}  // namespace gpudiag::launch
