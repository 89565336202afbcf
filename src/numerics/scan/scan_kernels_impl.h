// Per-dtype scan loops, included by scan_kernels.cpp (built for the baseline
// instruction set) and scan_kernels_avx2.cpp (built with -mavx2): everything
// here is in an unnamed namespace, so each file gets its own copy, compiled
// for its own target, and the dispatcher picks one at run time.
//
// Each loop body is branch-free integer work written for the compiler's
// auto-vectoriser (both files are built with -O3). Float elements are read as
// bit patterns with the sign cleared, which fit the signed type of the same
// width: every compare is a signed one (SSE2 has signed 16-bit compares and
// min/max, not unsigned ones). Counters are as wide as the elements and are
// flushed to 64 bits every sub-block, before they can wrap, so the
// vectoriser keeps them in the elements' own lanes instead of widening each.
// The replica checksum's loop (checksum.h) lives here too, for the same two
// builds, and can run on each block right after its statistics.
#pragma once

#include "numerics/scan/scan_kernels.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>

#include "numerics/scan/checksum.h"

namespace gpudiag::numerics {

namespace {

constexpr std::size_t kBlock = 4096;
constexpr double kThresholds[3] = {1e2, 1e3, 1e4};

struct Counts {
  std::uint64_t nan = 0, pos_inf = 0, neg_inf = 0, zero = 0, subnormal = 0, ge[3] = {0, 0, 0};
};

template <class U>
struct FloatParams {
  using S = std::make_signed_t<U>;
  U abs_mask, inf, neg_inf;
  S nan_above, min_normal, threshold[3];
};

/// Elements per sub-block: a per-lane counter of the element's width counts
/// at most this many (the 8-bit ones at most 255).
template <class U>
constexpr std::size_t kSub = sizeof(U) == 1 ? 240 : kBlock;

template <class U, bool kHasInf>
void float_block(const U* __restrict x, std::size_t n, const FloatParams<U>& p, U& mn, U& mx,
                 Counts& c) {
  using S = std::make_signed_t<U>;
  S lo = static_cast<S>(mn), hi = static_cast<S>(mx);
  for (std::size_t base = 0; base < n; base += kSub<U>) {
    const std::size_t m = std::min(kSub<U>, n - base);
    const U* __restrict y = x + base;
    U nan = 0, pinf = 0, ninf = 0, zero = 0, below_normal = 0, g0 = 0, g1 = 0, g2 = 0;
    for (std::size_t i = 0; i < m; ++i) {
      const U v = y[i];
      const S a = static_cast<S>(v & p.abs_mask);  // |x| as a pattern, >= 0
      lo = a < lo ? a : lo;
      hi = a > hi ? a : hi;
      nan += a > p.nan_above;
      if constexpr (kHasInf) {
        pinf += v == p.inf;
        ninf += v == p.neg_inf;
      }
      zero += a == 0;
      below_normal += a < p.min_normal;  // zeros too: taken out below
      g0 += a >= p.threshold[0];
      g1 += a >= p.threshold[1];
      g2 += a >= p.threshold[2];
    }
    c.nan += nan, c.pos_inf += pinf, c.neg_inf += ninf, c.zero += zero;
    c.subnormal += static_cast<std::uint64_t>(below_normal) - zero;
    c.ge[0] += g0, c.ge[1] += g1, c.ge[2] += g2;
  }
  mn = static_cast<U>(lo), mx = static_cast<U>(hi);
}

template <class S>
void int_block(const S* __restrict x, std::size_t n, const std::make_unsigned_t<S> (&above)[3],
               S& mn, S& mx, Counts& c) {
  using U = std::make_unsigned_t<S>;
  std::uint32_t zero = 0, g0 = 0, g1 = 0, g2 = 0;
  S lo = mn, hi = mx;
  for (std::size_t i = 0; i < n; ++i) {
    const S v = x[i];
    U mag = static_cast<U>(v);
    if constexpr (std::is_signed_v<S>) mag = v < 0 ? static_cast<U>(U{0} - mag) : mag;
    const S a = static_cast<S>(mag);  // the framework's abs: wraps the most negative value
    lo = a < lo ? a : lo;
    hi = a > hi ? a : hi;
    zero += v == 0;
    g0 += mag > above[0];
    g1 += mag > above[1];
    g2 += mag > above[2];
  }
  mn = lo, mx = hi;
  c.zero += zero, c.ge[0] += g0, c.ge[1] += g1, c.ge[2] += g2;
}

void bool_block(const std::uint8_t* __restrict x, std::size_t n, std::uint8_t& mn, std::uint8_t& mx,
                Counts& c) {
  std::uint32_t zero = 0;
  std::uint8_t lo = mn, hi = mx;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t v = x[i] != 0;
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    zero += v == 0;
  }
  mn = lo, mx = hi;
  c.zero += zero;
}

template <class T>
T byteswap(T v) {
  if constexpr (sizeof(T) == 2)
    return static_cast<T>(__builtin_bswap16(static_cast<std::uint16_t>(v)));
  if constexpr (sizeof(T) == 4)
    return static_cast<T>(__builtin_bswap32(static_cast<std::uint32_t>(v)));
  if constexpr (sizeof(T) == 8)
    return static_cast<T>(__builtin_bswap64(static_cast<std::uint64_t>(v)));
  return v;
}

/// The checksum sum (checksum.h) of `n` whole words at `p` (any alignment),
/// the first being word `k0` of its tensor. Written for the vectoriser: the
/// multipliers are an induction variable, each product a widening 32x32->64
/// multiply (vpmuludq), about 14 AVX2 instructions per 32 bytes.
std::uint64_t checksum_words(const std::uint8_t* __restrict p, std::uint64_t k0, std::size_t n) {
  std::uint64_t s = 0;
  std::uint32_t m = static_cast<std::uint32_t>(k0 + 1) * kChecksumStep;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t w;
    std::memcpy(&w, p + 4 * i, 4);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap32(w);
    s += (std::uint64_t{w} * m << 1) + w;  // w * (2m + 1), checksum.h
    m += kChecksumStep;
  }
  return s;
}

/// Bytes [begin, end) of the tensor at `t` (begin a multiple of 4): whole
/// words, then the bytes of a last partial word.
std::uint64_t checksum_sum_here(const std::uint8_t* t, std::uint64_t begin, std::uint64_t end) {
  const std::uint64_t whole = (end - begin) / 4;
  std::uint64_t s = checksum_words(t + begin, begin / 4, static_cast<std::size_t>(whole));
  for (std::uint64_t o = begin + whole * 4; o < end; ++o) s += checksum_byte(t[o], o);
  return s;
}

/// Calls block(ptr, n) over elements [begin, end) of `v` as T, reading in
/// place when aligned little-endian, else through a swapped/aligned copy.
/// With `sum`, each block's stored bytes are added to the checksum sum right
/// after the block is scanned, while they are in the cache (one pass over
/// memory for both); then begin * sizeof(T) must be a multiple of 4.
template <class T, class Block>
void for_each_block(const TensorView& v, std::uint64_t begin, std::uint64_t end, Block&& block,
                    std::uint64_t* sum) {
  const std::uint8_t* p = v.data + begin * sizeof(T);
  const std::uint64_t n = end - begin;
  const bool swap = v.order == ByteOrder::big && sizeof(T) > 1;
  const bool direct = !swap && reinterpret_cast<std::uintptr_t>(p) % alignof(T) == 0;
  alignas(64) T buf[kBlock];
  for (std::uint64_t off = 0; off < n; off += kBlock) {
    const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(kBlock, n - off));
    if (direct) {
      block(reinterpret_cast<const T*>(p) + off, m);
    } else {
      std::memcpy(buf, p + off * sizeof(T), m * sizeof(T));
      if (swap)
        for (std::size_t i = 0; i < m; ++i) buf[i] = byteswap(buf[i]);
      block(buf, m);
    }
    if (sum) *sum += checksum_sum_here(v.data, (begin + off) * sizeof(T), (begin + off + m) * sizeof(T));
  }
}

void fill_counts(TensorStats& s, const Counts& c) {
  s.nan = c.nan, s.pos_inf = c.pos_inf, s.neg_inf = c.neg_inf, s.zero = c.zero;
  s.subnormal = c.subnormal, s.ge_1e2 = c.ge[0], s.ge_1e3 = c.ge[1], s.ge_1e4 = c.ge[2];
}

template <class U>
TensorStats scan_float(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                       std::uint64_t* sum) {
  const FloatFormat& f = float_format(v.dtype);
  FloatParams<U> p{};
  using S = typename FloatParams<U>::S;
  p.abs_mask = static_cast<U>(f.sign_mask - 1);
  p.nan_above = static_cast<S>(f.nan_above());
  p.inf = static_cast<U>(f.inf);
  p.neg_inf = static_cast<U>(f.inf | f.sign_mask);
  p.min_normal = static_cast<S>(f.min_normal);
  for (int k = 0; k < 3; ++k)
    p.threshold[k] = static_cast<S>(float_threshold_bits(v.dtype, kThresholds[k]));
  U mn = static_cast<U>(f.sign_mask - 1), mx = 0;  // the largest |x| pattern, and 0
  Counts c;
  for_each_block<U>(v, begin, end, [&](const U* x, std::size_t n) {
    if (f.has_inf)
      float_block<U, true>(x, n, p, mn, mx, c);
    else
      float_block<U, false>(x, n, p, mn, mx, c);
  }, sum);
  // NaN patterns are above every threshold pattern: take them back out.
  for (auto& g : c.ge) g -= c.nan;
  TensorStats s;
  s.count = end - begin;
  fill_counts(s, c);
  if (s.nan > 0) {
    s.abs_min = s.abs_max = std::numeric_limits<double>::quiet_NaN();
  } else {
    s.abs_min = float_bits_to_double(v.dtype, mn);
    s.abs_max = float_bits_to_double(v.dtype, mx);
  }
  return s;
}

template <class S>
TensorStats scan_int(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                     std::uint64_t* sum) {
  using U = std::make_unsigned_t<S>;
  U above[3];  // |x| >= t  <=>  |x| > t - 1, clamped so it never matches when t > max
  for (int k = 0; k < 3; ++k) {
    const double t1 = kThresholds[k] - 1;
    above[k] = t1 >= static_cast<double>(std::numeric_limits<U>::max())
                   ? std::numeric_limits<U>::max()
                   : static_cast<U>(t1);
  }
  S mn = std::numeric_limits<S>::max(), mx = std::numeric_limits<S>::min();
  Counts c;
  for_each_block<S>(v, begin, end,
                    [&](const S* x, std::size_t n) { int_block<S>(x, n, above, mn, mx, c); }, sum);
  TensorStats s;
  s.count = end - begin;
  fill_counts(s, c);
  s.abs_min = static_cast<double>(mn);
  s.abs_max = static_cast<double>(mx);
  return s;
}

TensorStats scan_bool(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                      std::uint64_t* sum) {
  std::uint8_t mn = 1, mx = 0;
  Counts c;
  for_each_block<std::uint8_t>(
      v, begin, end, [&](const std::uint8_t* x, std::size_t n) { bool_block(x, n, mn, mx, c); }, sum);
  TensorStats s;
  s.count = end - begin;
  fill_counts(s, c);
  s.abs_min = mn;
  s.abs_max = mx;
  return s;
}

TensorStats scan_range_here(const TensorView& v, std::uint64_t begin, std::uint64_t end,
                            std::uint64_t* sum) {
  if (begin >= end) return {};
  switch (v.dtype) {
    case DType::F64:
      return scan_float<std::uint64_t>(v, begin, end, sum);
    case DType::F32:
      return scan_float<std::uint32_t>(v, begin, end, sum);
    case DType::F16:
    case DType::BF16:
      return scan_float<std::uint16_t>(v, begin, end, sum);
    case DType::F8_E4M3:
    case DType::F8_E5M2:
      return scan_float<std::uint8_t>(v, begin, end, sum);
    case DType::I64:
      return scan_int<std::int64_t>(v, begin, end, sum);
    case DType::I32:
      return scan_int<std::int32_t>(v, begin, end, sum);
    case DType::I16:
      return scan_int<std::int16_t>(v, begin, end, sum);
    case DType::I8:
      return scan_int<std::int8_t>(v, begin, end, sum);
    case DType::U64:
      return scan_int<std::uint64_t>(v, begin, end, sum);
    case DType::U32:
      return scan_int<std::uint32_t>(v, begin, end, sum);
    case DType::U16:
      return scan_int<std::uint16_t>(v, begin, end, sum);
    case DType::U8:
      return scan_int<std::uint8_t>(v, begin, end, sum);
    case DType::BOOL:
      return scan_bool(v, begin, end, sum);
  }
  return {};
}

}  // namespace
}  // namespace gpudiag::numerics
