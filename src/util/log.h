// Diagnostics go to stderr through spdlog; results go to stdout. The level
// comes from --log-level (before or after the subcommand), else
// GPUDIAG_LOG_LEVEL (how `gpudiag launch` hands its --log-level to the ranks),
// else SPDLOG_LEVEL, else "warn" so a healthy run prints only its results.
// Each line carries one prefix: "gpudiag [rank 3] warning: ..." on its own,
// "[rank3]: gpudiag warning: ..." under `gpudiag launch`, whose relay already
// names the rank (it sets GPUDIAG_LAUNCH_PREFIX=1 when it prefixes lines).
#pragma once

#include <string>

#include "util/env.h"

namespace gpudiag {

/// The names --log-level and GPUDIAG_LOG_LEVEL accept.
inline constexpr const char* kLogLevels[] = {"trace", "debug", "info", "warn",
                                             "error", "critical", "off"};
bool is_log_level(const std::string& name);

/// Sets up the stderr logger once. `level`: --log-level, empty if not given.
/// Throws UsageError for a GPUDIAG_LOG_LEVEL that is not a level's name.
void setup_logging(const std::string& level, const Env& env);
/// Tags every later line with e.g. "rank 3" once the rank is known, unless a
/// launcher already prefixes the rank's lines.
void set_log_tag(const std::string& tag);

}  // namespace gpudiag
