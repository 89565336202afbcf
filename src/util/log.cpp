// The stderr logger (log.h): one spdlog logger, its level decided once, its
// pattern carrying at most one tag.
#include "util/log.h"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "util/error.h"

namespace gpudiag {

namespace {

/// A launcher prefixes our lines with the rank: no tag of our own.
bool g_prefixed_by_launcher = false;

std::string pattern_for(const std::string& tag) {
  return tag.empty() || g_prefixed_by_launcher ? "gpudiag %^%l%$: %v"
                                               : "gpudiag [" + tag + "] %^%l%$: %v";
}

}  // namespace

bool is_log_level(const std::string& name) {
  for (const char* l : kLogLevels)
    if (name == l) return true;
  return false;
}

void setup_logging(const std::string& level, const Env& env) {
  g_prefixed_by_launcher = env.get_or("GPUDIAG_LAUNCH_PREFIX", "") == "1";
  auto logger = spdlog::get("gpudiag");
  if (!logger) logger = spdlog::stderr_logger_mt("gpudiag");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(pattern_for({}));
  spdlog::set_level(spdlog::level::warn);
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL
  std::string chosen = level;
  if (chosen.empty()) {
    chosen = env.get_or("GPUDIAG_LOG_LEVEL", "");
    if (!chosen.empty() && !is_log_level(chosen))
      throw UsageError("GPUDIAG_LOG_LEVEL=" + chosen + " is not a log level",
                       "use trace, debug, info, warn, error, critical or off");
  }
  if (!chosen.empty()) spdlog::set_level(spdlog::level::from_str(chosen));
}

void set_log_tag(const std::string& tag) { spdlog::set_pattern(pattern_for(tag)); }

}  // namespace gpudiag
