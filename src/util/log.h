// Diagnostics go to stderr through spdlog; results go to stdout. Levels come
// from --log-level, else SPDLOG_LEVEL, else "warn" so a healthy run prints only
// its results.
#pragma once

#include <string>

namespace gpudiag {

/// Sets up the stderr logger once. `tag` (e.g. "rank 3") prefixes every line.
void setup_logging(const std::string& level, const std::string& tag = {});
/// Re-tags the logger once the rank is known.
void set_log_tag(const std::string& tag);

}  // namespace gpudiag
