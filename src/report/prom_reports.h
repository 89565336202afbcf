// --prometheus for check and bench: the metrics are read from the report's own
// JSON document (docs/json.md), so the file says exactly what the report
// says, with labels a dashboard joins on (host, rank, peer, op, bytes).
//   gpudiag-check/1  per rank: ok, all-reduce bus bandwidth, phase seconds;
//                    the job: ok, ranks, ranks ok; per node: hardware
//                    findings by class and action, and whether they make it unfit
//   gpudiag-info/1   this node's hardware findings by class and action, unfit
//   gpudiag-bench/2  per size: bus bandwidth and time, out of place and in
//                    place; the average bus bandwidth; wrong values
//   gpudiag-links/1  per link: GB/s each way, slow; slow links
// Every file also has gpudiag_info (version, the NCCL loaded).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace gpudiag {

/// The metrics file's text for a report document of `schema`; `nccl` is the
/// NCCL version the job loaded ("" none).
std::string prometheus_from_report(const std::string& schema, const nlohmann::json& doc,
                                   const std::string& nccl);

/// Writes it to `path` (atomically); returns 0, or 2 with one line on stderr.
int write_report_prometheus(const std::string& path, const std::string& schema,
                            const nlohmann::json& doc, const std::string& nccl);

}  // namespace gpudiag
