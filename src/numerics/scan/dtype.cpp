// Dtype tables and the exact bit-pattern-to-double conversion shared by every
// float format (IEEE binary64/32/16, bfloat16 and the two OCP fp8 formats).
#include "numerics/scan/dtype.h"

#include <cctype>
#include <cmath>
#include <limits>

namespace gpudiag::numerics {

namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  std::size_t size;
  DKind kind;
};

constexpr DTypeInfo kInfo[] = {
    {DType::F64, "F64", 8, DKind::floating},
    {DType::F32, "F32", 4, DKind::floating},
    {DType::F16, "F16", 2, DKind::floating},
    {DType::BF16, "BF16", 2, DKind::floating},
    {DType::F8_E4M3, "F8_E4M3", 1, DKind::floating},
    {DType::F8_E5M2, "F8_E5M2", 1, DKind::floating},
    {DType::I64, "I64", 8, DKind::signed_int},
    {DType::I32, "I32", 4, DKind::signed_int},
    {DType::I16, "I16", 2, DKind::signed_int},
    {DType::I8, "I8", 1, DKind::signed_int},
    {DType::U64, "U64", 8, DKind::unsigned_int},
    {DType::U32, "U32", 4, DKind::unsigned_int},
    {DType::U16, "U16", 2, DKind::unsigned_int},
    {DType::U8, "U8", 1, DKind::unsigned_int},
    {DType::BOOL, "BOOL", 1, DKind::boolean},
};

const DTypeInfo& info(DType t) { return kInfo[static_cast<int>(t)]; }

constexpr FloatFormat kF64{64,
                           52,
                           11,
                           true,
                           0x7FEF'FFFF'FFFF'FFFFull,
                           0x0010'0000'0000'0000ull,
                           0x7FF0'0000'0000'0000ull,
                           0x8000'0000'0000'0000ull};
constexpr FloatFormat kF32{32, 23, 8, true, 0x7F7F'FFFF, 0x0080'0000, 0x7F80'0000, 0x8000'0000};
constexpr FloatFormat kF16{16, 10, 5, true, 0x7BFF, 0x0400, 0x7C00, 0x8000};
constexpr FloatFormat kBF16{16, 7, 8, true, 0x7F7F, 0x0080, 0x7F80, 0x8000};
constexpr FloatFormat kE4M3{8, 3, 4, false, 0x7E, 0x08, 0, 0x80};
constexpr FloatFormat kE5M2{8, 2, 5, true, 0x7B, 0x04, 0x7C, 0x80};

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string_view dtype_name(DType t) { return info(t).name; }
std::size_t dtype_size(DType t) { return info(t).size; }
DKind dtype_kind(DType t) { return info(t).kind; }

const FloatFormat& float_format(DType t) {
  switch (t) {
    case DType::F64:
      return kF64;
    case DType::F32:
      return kF32;
    case DType::F16:
      return kF16;
    case DType::BF16:
      return kBF16;
    case DType::F8_E4M3:
      return kE4M3;
    default:
      return kE5M2;
  }
}

std::optional<DType> dtype_from_safetensors(std::string_view name) {
  for (const auto& i : kInfo)
    if (i.name == name) return i.type;
  return std::nullopt;
}

std::optional<DType> dtype_from_user(std::string_view name) {
  const std::string n = lower(name);
  for (const auto& i : kInfo)
    if (lower(i.name) == n) return i.type;
  struct Alias {
    std::string_view name;
    DType type;
  };
  static constexpr Alias kAliases[] = {
      {"bf16", DType::BF16},        {"bfloat16", DType::BF16},  {"half", DType::F16},
      {"float16", DType::F16},      {"fp16", DType::F16},       {"float32", DType::F32},
      {"float", DType::F32},        {"fp32", DType::F32},       {"float64", DType::F64},
      {"double", DType::F64},       {"fp64", DType::F64},       {"float8_e4m3fn", DType::F8_E4M3},
      {"fp8_e4m3", DType::F8_E4M3}, {"f8e4m3", DType::F8_E4M3}, {"float8_e5m2", DType::F8_E5M2},
      {"fp8_e5m2", DType::F8_E5M2}, {"f8e5m2", DType::F8_E5M2}, {"int8", DType::I8},
      {"uint8", DType::U8},         {"int16", DType::I16},      {"uint16", DType::U16},
      {"int32", DType::I32},        {"uint32", DType::U32},     {"int64", DType::I64},
      {"uint64", DType::U64},       {"bool", DType::BOOL},
  };
  for (const auto& a : kAliases)
    if (a.name == n) return a.type;
  return std::nullopt;
}

double float_bits_to_double(DType t, std::uint64_t pattern) {
  const FloatFormat& f = float_format(t);
  const bool negative = (pattern & f.sign_mask) != 0;
  const std::uint64_t abs = pattern & (f.sign_mask - 1);
  double magnitude;
  if (f.has_inf && abs == f.inf) {
    magnitude = std::numeric_limits<double>::infinity();
  } else if (abs > f.nan_above()) {
    return std::numeric_limits<double>::quiet_NaN();
  } else {
    const int bias = (1 << (f.exponent_bits - 1)) - 1;
    const std::uint64_t exponent = abs >> f.mantissa_bits;
    const std::uint64_t fraction = abs & ((std::uint64_t{1} << f.mantissa_bits) - 1);
    // Every value is an integer significand times a power of two; both fit
    // a double exactly (at most 53 significant bits).
    if (exponent == 0)
      magnitude = std::ldexp(static_cast<double>(fraction), 1 - bias - f.mantissa_bits);
    else
      magnitude = std::ldexp(static_cast<double>(fraction | (std::uint64_t{1} << f.mantissa_bits)),
                             static_cast<int>(exponent) - bias - f.mantissa_bits);
  }
  return negative ? -magnitude : magnitude;
}

std::uint64_t float_threshold_bits(DType t, double threshold) {
  const FloatFormat& f = float_format(t);
  std::uint64_t lo = 0, hi = f.nan_above();
  if (!(float_bits_to_double(t, hi) >= threshold)) return hi + 1;
  // Abs bit patterns order like the values: binary search the first >= threshold.
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (float_bits_to_double(t, mid) >= threshold)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace gpudiag::numerics
