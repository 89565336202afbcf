// The statistics variant of the frames dump, `gpudiag-frames-stats/1`: what
// ActivationDumper(mode="stats") writes instead of the tensors, one JSON file
// per batch (`batch-000003.stats.json`, `batch-000003.rank00001.stats.json`
// under a launcher): for every frame its module, class and entries, and for
// every tensor entry its dtype, shape and the scanner's statistics. `gpudiag
// scan` replays it through the same detector and prints the same report as
// from the tensor dump of the same run. Contract: docs/formats.md.
//
// Every file is untrusted input: at most 128 MiB, parsed with bounds (a count
// must equal the shape's product, every counter stay within the count,
// abs_min <= abs_max), one line naming the file and the field otherwise.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "numerics/detector/frames.h"
#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics {

inline constexpr const char* kStatsFormat = "gpudiag-frames-stats/1";

/// True for a path the stats reader takes: a name ending in ".stats.json".
bool is_stats_path(const std::string& path);

struct StatsDump {
  std::vector<Batch> batches;                    ///< sorted by rank, then number
  std::vector<int> batch_rank;                   ///< per batch: the rank of its file (-1 none)
  std::vector<std::vector<TensorStats>> stats;   ///< per batch, per tensor slot
  std::deque<TensorInfo> tensors;                ///< what Batch::tensors point to (no data)
  std::vector<int> ranks;                        ///< the ranks the files name, sorted, unique
};

/// Reads every file; throws UsageError naming the file on anything malformed,
/// two files of one batch (and rank), or files of several ranks when `rank`
/// is -1 and `all_ranks` is false. `rank` >= 0 keeps that rank's files only.
/// A frame's optional "time" (seconds since the epoch) is Frame::time.
StatsDump read_stats_dump(const std::vector<std::string>& files, int rank = -1,
                          bool all_ranks = false);

}  // namespace gpudiag::numerics
