// A rank's verdict, handed to gpudiag launch: a gpudiag subcommand whose
// exit 1 is its answer (a sweep that names nodes to exclude) rather than a
// failure writes one line to GPUDIAG_VERDICT_FILE, a file the launcher named
// in the attempt's folder; the launcher reads it when the rank exits with
// status 1 and words the end as a verdict ("sweep: 1 node to exclude"), not as
// failed ranks, and does not stop the others for it.
#pragma once

#include <optional>
#include <string>

namespace gpudiag::launch {

/// The verdict at `path` (its first line, at most 200 bytes, escaped); nullopt
/// when there is none (no file, empty, unreadable).
std::optional<std::string> read_verdict(const std::string& path);

/// (In a rank) writes `line` to GPUDIAG_VERDICT_FILE when the launcher set
/// one; a failure to write is not an error (the end is then worded as before).
void write_verdict(const std::string& line);

}  // namespace gpudiag::launch
