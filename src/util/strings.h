// Small string helpers shared across gpudiag: strict integer parsing, split,
// join, and human-readable sizes and durations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

/// Whole-string decimal integer (optional leading '-'); nullopt on anything else.
std::optional<long long> parse_int(std::string_view s);
/// Splits on `sep`; keeps empty fields.
std::vector<std::string> split(std::string_view s, char sep);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
/// `text` with `prefix` before each of its lines (a last line without a newline too).
std::string prefix_lines(std::string_view text, std::string_view prefix);
std::string_view trim(std::string_view s);
/// 268435456 -> "256 MiB", 1500 -> "1.46 KiB".
std::string human_bytes(std::uint64_t bytes);
/// 0.0123 -> "12.3 ms", 2.5 -> "2.50 s".
std::string human_seconds(double s);
/// {0,1,2,5,7,8} -> "0-2,5,7,8": runs of three or more as a range, in any
/// order, duplicates ignored (how every report names a set of ranks).
std::string rank_ranges(std::vector<long long> ranks);

/// {0,1,2,5,7,8} -> "0-2,5,7,8": rank_ranges for int ranks (input in any order,
/// duplicates ignored).
std::string format_ranks(std::vector<int> ranks);
/// Edit distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace gpudiag
