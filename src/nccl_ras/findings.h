// What a Report (report.h) says, in gpudiag's words: one line per thing RAS found wrong,
// a summary line, the caveats, and the JSON form. Shared by `gpudiag ras` and the hang
// report of `gpudiag launch`, which names processes by its own ranks (ProcessNamer).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nccl_ras/report.h"

namespace gpudiag::ras {

/// How a line names a process ("[node0-3] pid 4242"); "" for "process PID on HOST".
using ProcessNamer = std::function<std::string(const ProcessRef&)>;

/// One line per finding, each starting with its kind: "dead:", "unresponsive:", "no data:",
/// "mismatch:" (counts that differ and did not move between two samples: "behind:" names
/// those ranks), "state:", "error:". Empty when RAS saw nothing wrong. Strings from RAS
/// are escaped. A report whose communicators were read from the wrong bytes
/// (Report::rows_unreliable) marks its per-communicator lines "unreliable (NCCL before
/// 2.29.2)".
std::vector<std::string> finding_lines(const Report& r, const ProcessNamer& name = {});

/// Counts that differ and are no finding: "in flight:" (they moved between two samples) and
/// "unconfirmed:" (one sample only, or the second could not tell). Never "behind".
std::vector<std::string> motion_lines(const Report& r, const ProcessNamer& name = {});

/// "NCCL 2.28.9 (json): 4 processes on 1 node, 1 communicator, gathered in 0.004 s".
std::string summary_line(const Report& r);

/// What limits RAS's view: its own timeouts while gathering, repairs, notes.
std::vector<std::string> caveat_lines(const Report& r);

/// The report as JSON (part of gpudiag-ras/1, docs/ras.md).
nlohmann::json report_json(const Report& r);

}  // namespace gpudiag::ras
