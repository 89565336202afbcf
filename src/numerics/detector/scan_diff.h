// `gpudiag scan --diff A B`: two batches of frames dumps side by side, aligned
// frame by frame, and the entries whose abs max grew most from A to B: where
// the values started to run away, which the reference leaves to the reader's
// eye.
//
// A side is a batch number of the dumps given as paths (`3`), a dump file or
// directory holding one batch (`run1/`), or one batch of it (`run1/@3`).
// Entries are aligned by module, class, the call's occurrence in the batch
// (a module run twice has two frames) and label, so two batches whose frames
// differ in number still line up where they agree. Growth is abs max in B
// over abs max in A; an entry that became inf or nan in B, or grew from 0,
// comes first. The report goes to stdout, the JSON to --json.
#pragma once

#include <ostream>
#include <string>

#include "numerics/detector/scan_command.h"

namespace gpudiag::numerics {

/// Entries listed, at most.
inline constexpr std::size_t kDiffRows = 20;

/// Runs the comparison; returns the exit status (0, or 2 for bad input, after
/// one line on stderr; usage errors throw UsageError).
int run_diff(const ScanOptions& options, const std::string& a, const std::string& b,
             std::ostream& out);

}  // namespace gpudiag::numerics
