// Every rank of a job in one scan: which rank went inf/nan first. Each rank's
// dump is replayed through its own detector (scan_command.cpp); from their
// first findings this file picks the earliest and renders, before the
// per-rank reports, one line and a table:
//
//   first inf/nan: rank 1, batch 5, frame 3 (net.2 Linear) output (also ranks 0,2-3)
//   rank  batch  first inf/nan
//      0      6  frame 0 (net.0 Linear) weight: inf
//      1      5  frame 3 (net.2 Linear) output: inf
//
// The earliest is the lowest batch, then the earliest time the dumper
// recorded the frame (ranks' clocks agree to NTP's precision), then the
// lowest rank. "(also ...)" names the other ranks that went bad in that same
// batch: an inf that one rank made and a collective spread (a forward
// all-reduce; the gradients' all-reduce shows as the next batch on the
// others).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "numerics/detector/detector.h"

namespace gpudiag::numerics {

struct RankOutcome {
  int rank = -1;
  DetectorResult result;      ///< result.first: the rank's first nan/inf
  std::uint64_t batches = 0;  ///< batches in its dump
  std::string report;         ///< what its detector printed
};

struct FirstBad {
  int rank = -1;
  Finding at;
  std::vector<int> also;  ///< other ranks whose first nan/inf is in the same batch
};

/// The earliest first nan/inf among `ranks`, nullopt when all are clean.
std::optional<FirstBad> first_bad(std::span<const RankOutcome> ranks);

/// "ranks 0-2,5", "rank 3" (compressed as the fingerprint comparison does).
std::string ranks_text(const std::vector<int>& ascending);

/// The "first inf/nan: ..." line (or "no inf or nan in any of ranks 0-3"
/// when all are clean) and the table.
void print_rank_table(std::ostream& out, std::span<const RankOutcome> ranks);

/// --json: {"first": {...} or null, "ranks": [{"rank", "batches", "first"}]}.
nlohmann::ordered_json rank_table_json(std::span<const RankOutcome> ranks);

}  // namespace gpudiag::numerics
