// Which files are dumps, whose, and reading each one without trusting it.
//
// Paths: a file, or a folder meaning every regular file directly in it, in name order (torch
// writes all ranks' dumps into one folder; other entries are skipped with a warning). A path
// that does not exist, or a FIFO, device or socket given by name, is a usage error: one
// line, exit 2. A file reached twice (by two paths, or a link) is read once.
//
// Rank: torch names each dump ${TORCH_NCCL_DEBUG_INFO_TEMP_FILE}<rank> (FlightRecorder.hpp,
// DebugInfoWriter: filename_ = namePrefix + rank), so the rank is the file name's trailing
// digits, whatever the prefix, as the analyser's loader reads it (flight_recorder/components/
// loader.py, read_dump and _determine_prefix: `(\d+)$`). A ".json", ".pkl" or ".pickle"
// ending a user added is removed first.
//
// Each file is opened without blocking, checked again with fstat, read up to
// Limits::max_file_bytes (a larger one is refused before it is read), and decoded by its
// first byte: PROTO (0x80) a pickle, '{' JSON. A file that cannot be used (empty, truncated,
// not a dump, too large, no rank in its name, a rank already read from another file) is one
// FileProblem, and the others are still read.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flight_recorder/dump.h"
#include "flight_recorder/value.h"

namespace gpudiag::fr {

struct FileProblem {
  std::string path;
  std::optional<int> rank;  ///< when the name gives one
  std::string kind;         ///< "empty", "truncated", "not-a-dump", "too-large", "unreadable",
                            ///< "no-rank", "duplicate-rank"
  std::string detail;       ///< one line: why
};

struct Inputs {
  std::vector<RankDump> dumps;  ///< sorted by rank
  std::vector<FileProblem> problems;
};

/// The rank a dump's file name gives, or nullopt when it ends in no digits (or more than
/// fit an int).
std::optional<int> rank_from_name(std::string_view file_name);

/// Decodes one file's bytes (a pickle or JSON) into a dump. Throws FormatError.
RankDump decode_dump(std::string_view bytes, int rank, const std::string& path,
                     const Limits& limits);

/// Reads every dump the paths name. Throws UsageError for a path that does not exist or is
/// not a regular file or folder, and for a folder that cannot be listed.
Inputs read_inputs(const std::vector<std::string>& paths, const Limits& limits);

}  // namespace gpudiag::fr
