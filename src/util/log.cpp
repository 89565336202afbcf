#include "util/log.h"

#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace gpudiag {

namespace {
std::string pattern_for(const std::string& tag) {
  return tag.empty() ? "gpudiag %^%l%$: %v" : "gpudiag [" + tag + "] %^%l%$: %v";
}
}  // namespace

void setup_logging(const std::string& level, const std::string& tag) {
  auto logger = spdlog::stderr_logger_mt("gpudiag");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern(pattern_for(tag));
  spdlog::set_level(spdlog::level::warn);
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL
  if (!level.empty()) spdlog::set_level(spdlog::level::from_str(level));
}

void set_log_tag(const std::string& tag) { spdlog::set_pattern(pattern_for(tag)); }

}  // namespace gpudiag
