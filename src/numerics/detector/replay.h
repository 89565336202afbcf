// Replaying frames dumps through the reference detector (detector.h): one
// rank's batches (tensors scanned, or statistics read from a stats dump),
// with the JSON, the insights, a progress line on a terminal and the warnings
// the live detector's exceptions become; and the dumps of several ranks, each
// replayed into a report of its own, printed after the line and table that
// say which rank went inf/nan first (rank_scan.h).
#pragma once

#include <functional>
#include <ostream>
#include <span>
#include <vector>

#include "numerics/detector/detector.h"
#include "numerics/detector/insights.h"
#include "numerics/detector/rank_scan.h"
#include "numerics/detector/scan_json.h"

namespace gpudiag::numerics {

/// The statistics of batch i of a replay, scanned or read.
using StatsOf = std::function<std::vector<TensorStats>(std::size_t)>;

/// Replays `batches` (one rank's, in number order); `rank` >= 0 names the
/// rank in warnings and in the JSON's batches. Returns the detector's result.
DetectorResult replay(const DetectorOptions& options, std::span<const Batch> batches,
                      const StatsOf& stats_of, ScanJson& json, Insights& insights,
                      std::ostream& out, int rank = -1);

struct RankDump {
  int rank = -1;
  std::span<const Batch> batches;
  StatsOf stats_of;
};

/// Replays every rank's dump into its own report and insights (on stderr,
/// "gpudiag scan: rank R: ..."), then prints on `out` the first inf/nan line
/// and the table, then each rank's report after a "--- rank R ---" line.
/// Totals go to `totals`, the table to the JSON ("ranks"). Returns the outcomes.
std::vector<RankOutcome> replay_ranks(const DetectorOptions& options, double near_limit,
                                      const std::vector<RankDump>& dumps, ScanJson& json,
                                      Insights& totals, std::ostream& out);

}  // namespace gpudiag::numerics
