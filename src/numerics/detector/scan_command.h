// `gpudiag scan` as a library call: compare replica checksum files, open and
// validate every input, pick the scanner, then either replay frames dumps
// through the detector (one rank, or every rank of a job) or report loose
// tensors, and write the --json document. The CLI file only parses
// options into ScanOptions. Scanning never touches MPI or NCCL.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "numerics/detector/detector.h"
#include "numerics/scan/dtype.h"
#include "numerics/scan/scanner.h"

namespace gpudiag::numerics {

struct ScanOptions {
  std::vector<std::string> paths;
  DetectorOptions detector;
  std::string json_path;           ///< empty: no JSON; "-": stdout
  std::optional<DType> npy_dtype;  ///< --dtype for raw .npy elements
  unsigned threads = 0;            ///< 0: one per hardware thread
  ScanDevice device = ScanDevice::automatic;
  int gpu = -1;  ///< --gpu: CUDA device ordinal; -1: the local rank's (scan_gpu.h)
  double near_limit = 0.5;  ///< --near-limit: the headroom fraction (insights.h)
  int rank = -1;            ///< --rank: the rank whose dump alone to report; -1 every rank
};

/// Runs the scan, writing the report to `out`; returns the exit status
/// (0 clean, 1 inf/nan found or replicas diverged, 2 bad input). Malformed files are reported on
/// stderr, one line each, before returning 2; usage errors throw UsageError.
int run_scan(const ScanOptions& options, std::ostream& out);

}  // namespace gpudiag::numerics
