#include "numerics/scan/scan_reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace gpudiag::numerics::testing {

namespace {

std::uint64_t load(const TensorView& v, std::uint64_t i) {
  const std::size_t n = dtype_size(v.dtype);
  std::uint64_t bits = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint8_t byte = v.data[i * n + k];
    const std::size_t shift = v.order == ByteOrder::little ? k : n - 1 - k;
    bits |= std::uint64_t{byte} << (8 * shift);
  }
  return bits;
}

/// sign * (implicit + fraction / 2^m) * 2^(e - bias), written out per field.
double decode_small_float(std::uint64_t bits, int e_bits, int m_bits, bool fn_variant) {
  const int total = 1 + e_bits + m_bits;
  const bool neg = (bits >> (total - 1)) & 1;
  const int e = static_cast<int>((bits >> m_bits) & ((1u << e_bits) - 1));
  const int m = static_cast<int>(bits & ((1u << m_bits) - 1));
  const int bias = (1 << (e_bits - 1)) - 1;
  const int e_max = (1 << e_bits) - 1;
  double x;
  if (fn_variant && e == e_max && m == (1 << m_bits) - 1)
    return std::numeric_limits<double>::quiet_NaN();
  if (!fn_variant && e == e_max) {
    if (m != 0) return std::numeric_limits<double>::quiet_NaN();
    x = std::numeric_limits<double>::infinity();
  } else if (e == 0) {
    x = m / std::pow(2.0, m_bits) * std::pow(2.0, 1 - bias);
  } else {
    x = (1.0 + m / std::pow(2.0, m_bits)) * std::pow(2.0, e - bias);
  }
  return neg ? -x : x;
}

double min_normal(DType t) {
  switch (t) {
    case DType::F64:
      return std::numeric_limits<double>::min();
    case DType::F32:
      return std::numeric_limits<float>::min();
    case DType::F16:
      return std::pow(2.0, -14);
    case DType::BF16:
      return std::pow(2.0, -126);
    case DType::F8_E4M3:
      return std::pow(2.0, -6);
    default:
      return std::pow(2.0, -14);
  }
}

/// The framework's abs() of an integer element, computed in its own type.
template <class T>
double own_abs(std::uint64_t bits) {
  const T v = static_cast<T>(bits);
  if constexpr (std::is_signed_v<T>) {
    if (v == std::numeric_limits<T>::min()) return static_cast<double>(v);  // wraps
    return static_cast<double>(v < 0 ? -v : v);
  }
  return static_cast<double>(v);
}

double own_abs_int(DType t, std::uint64_t bits) {
  switch (t) {
    case DType::I64:
      return own_abs<std::int64_t>(bits);
    case DType::I32:
      return own_abs<std::int32_t>(bits);
    case DType::I16:
      return own_abs<std::int16_t>(bits);
    case DType::I8:
      return own_abs<std::int8_t>(bits);
    case DType::U64:
      return own_abs<std::uint64_t>(bits);
    case DType::U32:
      return own_abs<std::uint32_t>(bits);
    case DType::U16:
      return own_abs<std::uint16_t>(bits);
    case DType::U8:
      return own_abs<std::uint8_t>(bits);
    default:
      return bits != 0 ? 1.0 : 0.0;
  }
}

/// |value| exactly (long double holds every 64-bit integer).
long double int_magnitude(DType t, std::uint64_t bits) {
  const int width = static_cast<int>(dtype_size(t)) * 8;
  if (dtype_kind(t) == DKind::boolean) return bits != 0;
  if (dtype_kind(t) == DKind::unsigned_int) return static_cast<long double>(bits);
  const bool neg = (bits >> (width - 1)) & 1;
  if (!neg) return static_cast<long double>(bits);
  const long double mod = std::ldexp(1.0L, width);
  return mod - static_cast<long double>(bits);
}

}  // namespace

double reference_value(const TensorView& v, std::uint64_t i) {
  const std::uint64_t bits = load(v, i);
  switch (v.dtype) {
    case DType::F64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    case DType::F32: {
      const auto b32 = static_cast<std::uint32_t>(bits);
      float f;
      std::memcpy(&f, &b32, 4);
      return f;
    }
    case DType::BF16: {
      const std::uint32_t b32 = static_cast<std::uint32_t>(bits) << 16;
      float f;
      std::memcpy(&f, &b32, 4);
      return f;
    }
    case DType::F16:
      return decode_small_float(bits, 5, 10, false);
    case DType::F8_E4M3:
      return decode_small_float(bits, 4, 3, true);
    case DType::F8_E5M2:
      return decode_small_float(bits, 5, 2, false);
    case DType::BOOL:
      return bits != 0;
    default:
      break;
  }
  const int width = static_cast<int>(dtype_size(v.dtype)) * 8;
  if (dtype_kind(v.dtype) == DKind::signed_int && ((bits >> (width - 1)) & 1))
    return -static_cast<double>(int_magnitude(v.dtype, bits));
  return static_cast<double>(bits);
}

TensorStats reference_scan(const TensorView& v) {
  TensorStats s;
  s.count = v.count;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  const bool is_float_type = is_float(v.dtype);
  for (std::uint64_t i = 0; i < v.count; ++i) {
    long double mag;
    double a;
    if (is_float_type) {
      const double x = reference_value(v, i);
      if (std::isnan(x)) {
        ++s.nan;
        continue;
      }
      if (x == std::numeric_limits<double>::infinity()) ++s.pos_inf;
      if (x == -std::numeric_limits<double>::infinity()) ++s.neg_inf;
      if (x == 0) ++s.zero;
      if (x != 0 && std::fabs(x) < min_normal(v.dtype)) ++s.subnormal;
      a = std::fabs(x);
      mag = a;
    } else {
      const std::uint64_t bits = load(v, i);
      a = own_abs_int(v.dtype, bits);
      mag = int_magnitude(v.dtype, bits);
      if (mag == 0) ++s.zero;
    }
    lo = std::min(lo, a);
    hi = std::max(hi, a);
    s.ge_1e2 += mag >= 100;
    s.ge_1e3 += mag >= 1000;
    s.ge_1e4 += mag >= 10000;
  }
  if (s.nan > 0) lo = hi = std::numeric_limits<double>::quiet_NaN();
  s.abs_min = lo;
  s.abs_max = hi;
  return s;
}

}  // namespace gpudiag::numerics::testing
