// A group's fingerprints in brief, so that a tree of judges (tree/tree.h)
// compares fingerprints across the whole job and not only within each group
// of nodes. A group's judge summarizes its table: per compared field, the
// distinct values with the ranks (as ranges) and a few of the hosts that hold
// each, counted in full. The root merges its groups' summaries (adding, for a
// field a group never saw, its ranks as "unset" or "unknown", as the flat
// comparison reads an absent field) and compares the merged summary the way
// compare_fingerprints compares a flat job's ranks (fingerprint_compare.h):
// the same rules, the same Differences, the same lines.
//
// A summary is bounded whatever the group holds: at most kSummaryFields
// fields, kSummaryValues values a field, kSummaryRanges ranges a value,
// kSummaryHosts hosts named, and kMaxSummaryBytes in all (fields that matter
// least for NCCL are dropped first); what is cut is counted. A summary read
// back comes from another process: decode_summary never throws, and rejects
// one that breaks any bound, names a field that is not compared, or lists a
// rank outside the ranks its sender speaks for.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "world/fingerprint_compare.h"

namespace gpudiag {

inline constexpr std::size_t kSummaryFields = 256;
inline constexpr std::size_t kSummaryValues = 8;
inline constexpr std::size_t kSummaryRanges = 32;       ///< per value
inline constexpr std::size_t kSummaryRankRanges = 256;  ///< the ranks compared
inline constexpr std::size_t kSummaryHosts = 4;
inline constexpr std::size_t kSummaryHostChars = 64;
inline constexpr std::size_t kMaxSummaryBytes = 64u << 10;

/// [first, last] pairs, ascending and disjoint.
using RankRanges = std::vector<std::pair<int, int>>;

struct SummaryValue {
  std::string value;
  RankRanges ranges;               ///< the ranks listed
  long long ranks = 0;             ///< every rank holding it, listed or not
  std::vector<std::string> hosts;  ///< a few, sorted
  long long host_count = 0;        ///< every host holding it
};

struct SummaryField {
  std::string field;
  std::vector<SummaryValue> values;  ///< by lowest rank
  long long more_values = 0;         ///< values not listed
  long long more_ranks = 0;          ///< the ranks holding them
};

struct FingerprintSummary {
  RankRanges ranks;  ///< the ranks compared (those with a fingerprint)
  long long rank_count = 0;
  std::vector<std::string> hosts;  ///< a few, sorted
  long long host_count = 0;
  std::vector<SummaryField> fields;  ///< by name, distinct
  long long more_fields = 0;         ///< fields left out
  /// Every field and every rank listed: a field absent here is then absent
  /// on all of its ranks (unset, unknown), which the merge may say for it.
  bool complete() const;
};

/// Ranks in ranges.
long long ranks_in(const RankRanges& r);
/// Sorted, overlapping and adjacent ranges joined.
RankRanges normalized(RankRanges r);

/// The summary of a table's fingerprints (ranks without one are left out).
FingerprintSummary summarize_fingerprints(const std::vector<RankPrint>& prints);
/// Bounded JSON: at most kMaxSummaryBytes when dumped.
nlohmann::json summary_json(const FingerprintSummary& s);
/// A summary from whoever speaks for ranks [first, last]; nullopt when it is
/// not one or breaks a bound. Never throws.
std::optional<FingerprintSummary> decode_summary(const nlohmann::json& j, int first, int last);

/// One summary of disjoint parts of the job.
FingerprintSummary merge_summaries(const std::vector<FingerprintSummary>& parts);
/// The merged summary's differences (no findings: those are each group's),
/// as compare_fingerprints gives a flat job's.
FingerprintComparison compare_summary(const FingerprintSummary& s);
/// Whether the field differs within the summary itself (a group that already
/// saw, and reported, the difference).
bool differs_within(const FingerprintSummary& s, const std::string& field);

}  // namespace gpudiag
