// Element types of dumped tensors: the safetensors dtype names, their sizes,
// and for floating-point types the bit layout the scanner works with.
//
// Floating-point formats are described by their absolute-value bit patterns:
// for any non-NaN value, clearing the sign bit gives an unsigned integer that
// orders exactly like |x|. The scanner compares those integers instead of
// converting every element, and converts only the final min/max to double
// (every supported format converts to double exactly).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag::numerics {

enum class DType : std::uint8_t {
  F64,
  F32,
  F16,
  BF16,
  F8_E4M3,
  F8_E5M2,
  I64,
  I32,
  I16,
  I8,
  U64,
  U32,
  U16,
  U8,
  BOOL,
};

enum class DKind : std::uint8_t { floating, signed_int, unsigned_int, boolean };

/// Bit layout of a floating-point format.
struct FloatFormat {
  int bits;           ///< 8, 16, 32 or 64
  int mantissa_bits;  ///< stored fraction bits
  int exponent_bits;
  bool has_inf;              ///< F8_E4M3 (the "fn" variant) has no infinities
  std::uint64_t max_finite;  ///< bit pattern of the largest finite value
  std::uint64_t min_normal;  ///< bit pattern of the smallest normal value
  std::uint64_t inf;         ///< bit pattern of +inf (0 when !has_inf)
  std::uint64_t sign_mask;
  /// Largest abs bit pattern that is not NaN: +inf, or max_finite without inf.
  std::uint64_t nan_above() const { return has_inf ? inf : max_finite; }
};

/// Every dtype, in the order of the enum.
inline constexpr DType kAllDTypes[] = {
    DType::F64,     DType::F32, DType::F16, DType::BF16, DType::F8_E4M3,
    DType::F8_E5M2, DType::I64, DType::I32, DType::I16,  DType::I8,
    DType::U64,     DType::U32, DType::U16, DType::U8,   DType::BOOL,
};

/// The safetensors name ("BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType t);
/// Bytes per element.
std::size_t dtype_size(DType t);
DKind dtype_kind(DType t);
inline bool is_float(DType t) { return dtype_kind(t) == DKind::floating; }
/// The layout of a floating-point dtype; only valid when is_float(t).
const FloatFormat& float_format(DType t);

/// Exactly a safetensors dtype name (case-sensitive, as in the file format).
std::optional<DType> dtype_from_safetensors(std::string_view name);
/// A dtype as a user types it on the command line: safetensors names in any
/// case, plus bf16/bfloat16, f16/float16/half, f32/float32, f64/float64,
/// float8_e4m3fn/fp8_e4m3, float8_e5m2/fp8_e5m2.
std::optional<DType> dtype_from_user(std::string_view name);

/// The value of a float element given its bit pattern (low `bits` bits of
/// `pattern`), converted exactly to double. NaN patterns give a NaN.
double float_bits_to_double(DType t, std::uint64_t pattern);

/// The smallest absolute bit pattern of `t` whose value is >= `threshold`
/// (threshold > 0); the +inf pattern, or the first NaN pattern when the format
/// has no inf, when no finite value is that large. Counting patterns >= the
/// result and subtracting the NaN count counts the elements with |x| >= threshold.
std::uint64_t float_threshold_bits(DType t, double threshold);

}  // namespace gpudiag::numerics
