// Internal to the bench's data pattern (pattern.h): the plan derived from a
// PatternCase, the integer codes of what rank p sends at element g and what a
// reduced element g must hold, and the conversion of a code to a DType.
//
// g is an index into the send buffers: for the reducing collectives the
// reduction runs element-wise over g (reduce_scatter's rank r receives g in
// [r * count, (r + 1) * count)); for the data-moving ones it is the index in
// the source rank's send buffer. Each mode has one formula per role, written
// once as a template on the mode so the fill and check loops carry no switch.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "bench/pattern.h"

namespace gpudiag::pattern_detail {

enum class Mode : std::uint8_t { move, dense_sum, sparse_sum, prod, max, min };

struct Plan {
  Coll coll = Coll::all_reduce;
  DType type = DType::float32;
  RedOp op = RedOp::sum;
  int root = 0;
  int n = 1;
  std::size_t count = 0;  ///< param_count
  Mode mode = Mode::move;
  int cbits = 6;                        ///< c(g) < 2^cbits, cbits in [1, 6]
  int move_bits = 32;                   ///< data-moving codes < 2^move_bits
  std::array<std::int64_t, 16> ones{};  ///< how many ranks in [0, n) have bit k set
};

Plan make_plan(const PatternCase& c);

/// A run of rank's recv buffer from one source: rank src's send elements
/// g0.., or (src < 0) the reduced elements g0...
struct Segment {
  std::size_t offset = 0, len = 0;
  int src = -1;
  std::uint64_t g0 = 0;
};
/// 0 when nothing is checked on `rank`.
std::size_t segment_count(const Plan& pl, int rank);
Segment segment(const Plan& pl, int rank, std::size_t s);

/// The suspect of a wrong result whose first wrong element is `first`
/// (pattern_suspect.cpp); "" when no single cause explains it.
std::string diagnose(const Plan& pl, const void* got, int rank, std::size_t first);

// ---- codes ----------------------------------------------------------------

/// A full-avalanche hash of the index (murmur3's finaliser): a plain
/// multiplicative hash would give indices a Fibonacci number apart the same
/// top bits, and blocks far apart the same values.
inline std::uint32_t mix(std::uint64_t g) {
  std::uint32_t x = static_cast<std::uint32_t>(g ^ (g >> 32));
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  return x ^ (x >> 16);
}
/// The per-element base value, < 2^cbits.
inline std::int64_t cval(const Plan& pl, std::uint64_t g) { return mix(g) >> (32 - pl.cbits); }
inline std::int64_t rank_bit(int p, std::uint64_t g) { return (p >> (g & 15)) & 1; }
// prod: every rank's sign is flipped where bit 11 of mix(g) is set (so no
// rank sends all +1), the owner's once more where bit 3 is, and the owner's
// value doubled where bit 7 is. Written as arithmetic, not branches: the
// signs are random, and a branch on them costs a misprediction per element.
inline std::int64_t prod_negative(int p, std::uint64_t g, std::uint32_t h) {
  return rank_bit(p, g) ^ ((h >> 11) & 1);
}
inline std::int64_t prod_flip(std::uint32_t h) { return (h >> 3) & 1; }
inline std::int64_t prod_two(std::uint32_t h) { return (h >> 7) & 1; }
inline std::int64_t sign_of(std::int64_t negative) { return 1 - 2 * negative; }
inline bool owns(const Plan& pl, int p, std::uint64_t g) {
  return g % static_cast<std::uint64_t>(pl.n) == static_cast<std::uint64_t>(p);
}
inline bool has_owner(Mode m) { return m != Mode::move && m != Mode::dense_sum; }

/// Data-moving collectives: a hash of (rank, index) in move_bits bits.
inline std::int64_t move_code(const Plan& pl, int p, std::uint64_t g) {
  return mix(g + static_cast<std::uint64_t>(p) * 0x9E3779B97F4A7C15u) >> (32 - pl.move_bits);
}

/// What rank p sends at g when it does not own g (every g for dense_sum).
template <Mode M>
inline std::int64_t background(const Plan& pl, int p, std::uint64_t g) {
  if constexpr (M == Mode::dense_sum || M == Mode::max) return cval(pl, g) + rank_bit(p, g);
  if constexpr (M == Mode::sparse_sum) return 0;
  if constexpr (M == Mode::prod) return sign_of(prod_negative(p, g, mix(g)));
  if constexpr (M == Mode::min) return cval(pl, g) + 2 + rank_bit(p, g);
  if constexpr (M == Mode::move) return move_code(pl, p, g);
}

/// What the owner of g (rank g mod n) sends there, for the modes with owners.
inline std::int64_t owner_value(const Plan& pl, int p, std::uint64_t g) {
  switch (pl.mode) {
    case Mode::sparse_sum:
      return 1 + cval(pl, g);
    case Mode::prod: {
      const std::uint32_t h = mix(g);
      return (1 + prod_two(h)) * sign_of(prod_negative(p, g, h) ^ prod_flip(h));
    }
    case Mode::max:
      return cval(pl, g) + 3;
    case Mode::min:
      return cval(pl, g);
    case Mode::dense_sum:
      return background<Mode::dense_sum>(pl, p, g);
    case Mode::move:
      return move_code(pl, p, g);
  }
  return 0;
}

/// The reduced element g over ranks [0, n), before avg's division.
template <Mode M>
inline std::int64_t reduced(const Plan& pl, std::uint64_t g) {
  if constexpr (M == Mode::dense_sum) return pl.n * cval(pl, g) + pl.ones[g & 15];
  if constexpr (M == Mode::sparse_sum) return 1 + cval(pl, g);
  if constexpr (M == Mode::prod) {
    // Ranks with bit (g mod 16) set are negative, or those without it where
    // bit 11 flips them all; then the owner's flip.
    const std::uint32_t h = mix(g);
    const std::int64_t set = pl.ones[g & 15], flip_all = (h >> 11) & 1;
    const std::int64_t negatives = set + flip_all * (pl.n - 2 * set);
    return (1 + prod_two(h)) * sign_of((negatives + prod_flip(h)) & 1);
  }
  if constexpr (M == Mode::max) return cval(pl, g) + 3;
  if constexpr (M == Mode::min) return cval(pl, g);
  if constexpr (M == Mode::move) return 0;
}

/// Calls f(std::integral_constant<Mode, M>{}) for the plan's mode.
template <class F>
decltype(auto) with_mode(Mode m, F&& f) {
  switch (m) {
    case Mode::dense_sum:
      return f(std::integral_constant<Mode, Mode::dense_sum>{});
    case Mode::sparse_sum:
      return f(std::integral_constant<Mode, Mode::sparse_sum>{});
    case Mode::prod:
      return f(std::integral_constant<Mode, Mode::prod>{});
    case Mode::max:
      return f(std::integral_constant<Mode, Mode::max>{});
    case Mode::min:
      return f(std::integral_constant<Mode, Mode::min>{});
    case Mode::move:
      break;
  }
  return f(std::integral_constant<Mode, Mode::move>{});
}

/// Rank p's contribution at g / the reduced value, any mode (slow paths).
inline std::int64_t contribution(const Plan& pl, int p, std::uint64_t g) {
  if (has_owner(pl.mode) && owns(pl, p, g)) return owner_value(pl, p, g);
  return with_mode(pl.mode, [&](auto m) { return background<decltype(m)::value>(pl, p, g); });
}
inline std::int64_t reduced_any(const Plan& pl, std::uint64_t g) {
  return with_mode(pl.mode, [&](auto m) { return reduced<decltype(m)::value>(pl, g); });
}

// ---- element types ----------------------------------------------------------

/// A DType's storage (T, compared bit for bit as Bits) and the conversion of
/// a code that the type holds exactly (integers: modulo 2^bits).
template <DType D>
struct Elem;
template <class Int>
struct IntElem {
  using T = Int;
  using Bits = std::make_unsigned_t<Int>;
  static constexpr bool floating = false;
  static T from_code(std::int64_t v) { return static_cast<T>(static_cast<std::uint64_t>(v)); }
};
template <>
struct Elem<DType::int8> : IntElem<std::int8_t> {};
template <>
struct Elem<DType::uint8> : IntElem<std::uint8_t> {};
template <>
struct Elem<DType::int32> : IntElem<std::int32_t> {};
template <>
struct Elem<DType::uint32> : IntElem<std::uint32_t> {};
template <>
struct Elem<DType::int64> : IntElem<std::int64_t> {};
template <>
struct Elem<DType::uint64> : IntElem<std::uint64_t> {};
template <>
struct Elem<DType::float32> {
  using T = float;
  using Bits = std::uint32_t;
  static constexpr bool floating = true;
  static T from_code(std::int64_t v) { return static_cast<float>(v); }
};
template <>
struct Elem<DType::float64> {
  using T = double;
  using Bits = std::uint64_t;
  static constexpr bool floating = true;
  static T from_code(std::int64_t v) { return static_cast<double>(v); }
};
template <>
struct Elem<DType::half> {
  using T = std::uint16_t;
  using Bits = std::uint16_t;
  static constexpr bool floating = true;
  /// |v| <= 2048: the float's bits re-biased, no rounding needed.
  static T from_code(std::int64_t v) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(static_cast<float>(v));
    const std::uint32_t mag = b & 0x7fffffffu;
    return static_cast<T>(((b >> 16) & 0x8000u) | (mag ? (mag >> 13) - (112u << 10) : 0u));
  }
};
template <>
struct Elem<DType::bfloat16> {
  using T = std::uint16_t;
  using Bits = std::uint16_t;
  static constexpr bool floating = true;
  /// |v| <= 256: the float's top half.
  static T from_code(std::int64_t v) {
    return static_cast<T>(std::bit_cast<std::uint32_t>(static_cast<float>(v)) >> 16);
  }
};

/// Calls f(Elem<t>{}).
template <class F>
decltype(auto) with_elem(DType t, F&& f) {
  switch (t) {
    case DType::int8:
      return f(Elem<DType::int8>{});
    case DType::uint8:
      return f(Elem<DType::uint8>{});
    case DType::int32:
      return f(Elem<DType::int32>{});
    case DType::uint32:
      return f(Elem<DType::uint32>{});
    case DType::int64:
      return f(Elem<DType::int64>{});
    case DType::uint64:
      return f(Elem<DType::uint64>{});
    case DType::half:
      return f(Elem<DType::half>{});
    case DType::float64:
      return f(Elem<DType::float64>{});
    case DType::bfloat16:
      return f(Elem<DType::bfloat16>{});
    case DType::float32:
      break;
  }
  return f(Elem<DType::float32>{});
}

}  // namespace gpudiag::pattern_detail
