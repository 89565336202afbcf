// Report text for single values and entries, byte-for-byte what the
// reference detector prints with Python f-strings.
#pragma once

#include <string>
#include <string_view>

#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics {

/// Python's f"{x:8.2e}": shortest-correct rounding of the exact binary value
/// to 3 significant digits (ties to even), at least two exponent digits,
/// right-aligned in 8 columns; "inf", "-inf" and "nan" (never "-nan").
std::string format_e82(double x);
/// The same without the padding: "3.42e+04", "nan", "inf", "-inf".
std::string format_e2(double x);

/// The frame line of a tensor: f"{abs_min:8.2e} {abs_max:8.2e} {label}".
/// An empty tensor, where the framework's min() raises, prints
/// f"{'empty':>17} {label}" instead.
std::string stats_line(const TensorStats& s, std::string_view label);

/// The frame line of a non-tensor entry: f"{what:>17} {label}" with `what`
/// "None" or "not a tensor".
std::string placeholder_line(std::string_view what, std::string_view label);

/// The column header: f"{'abs min':8} {'abs max':8} metadata".
inline constexpr std::string_view kColumnHeader = "abs min  abs max  metadata";

/// The 17-space prefix of frame headers and batch markers.
inline constexpr std::string_view kPrefix = "                 ";

}  // namespace gpudiag::numerics
