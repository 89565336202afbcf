// The nccl-log report: a job summarised (per-rank table, transports) with its findings,
// rendered as text for people or JSON for scripts. Both go to stdout; the JSON carries every
// fact the text shows and more (all warnings with their chains, all communicators).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nccl_log/findings.h"
#include "nccl_log/job.h"

namespace gpudiag::nccl_log {

struct Report {
  Job job;
  std::vector<Finding> findings;

  /// 0 when no finding is a problem, 1 otherwise (the nccl-log exit status).
  int exit_code() const { return has_problem(findings) ? 1 : 0; }
};

/// Reads the files and run directories and finds what they mean. Throws UsageError as
/// read_job() does (unreadable path, not a regular file, too much input, no NCCL lines).
Report summarize(const std::vector<std::string>& paths, const InputLimits& limits = {});

/// Human-readable report: a header line, one row per process, transports, then findings.
std::string render_text(const Report& report);

/// Machine-readable report (schema in docs/nccl-log.md).
nlohmann::ordered_json render_json(const Report& report);

}  // namespace gpudiag::nccl_log
