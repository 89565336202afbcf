// The CUDA scan kernel's per-thread work (cuda_scan_kernel.cu), written for
// both compilers: under nvcc these are __host__ __device__ functions the kernel
// inlines; under a plain C++ compiler cuda_scan_lanes_test.cpp runs them for
// every thread of a block in turn and checks them against the CPU scanner,
// so the kernel's arithmetic is tested on machines without a GPU. Only the
// block-wide parts (cub::BlockReduce, atomics, the segment walk) are not.
//
// Order keys: min/max are taken over unsigned keys that order like the value
// compared: a float's sign-cleared bit pattern, an unsigned integer itself, a
// signed integer's wrapped abs (the framework's) with its sign bit flipped.
// The per-element tests are the CPU scanner's (scan_kernels_impl.h): nan is
// a pattern above nan_above, subnormal is nonzero below min_normal, |x| >=
// threshold compares against float_threshold_bits (NaN patterns counted and
// taken out on the host), integers compare their magnitude with t - 1.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "numerics/scan/cuda_scan_kernel.h"
#include "numerics/scan/cuda_scan_lane_types.h"

namespace gpudiag::numerics::cuda_scan::lanes {

template <class U, DKind K>
GPUDIAG_LANES void fold(Acc<Wide<U>>& s, Wide<U> v, const Params& p) {
  using W = Wide<U>;
  if constexpr (K == DKind::floating) {
    const W a = v & static_cast<W>(p.abs_mask);
    s.lo = s.lo < a ? s.lo : a;
    s.hi = s.hi > a ? s.hi : a;
    s.nan += a > static_cast<W>(p.nan_above);
    s.pos_inf += v == static_cast<W>(p.inf);  // never equal where the format has no inf
    s.neg_inf += v == static_cast<W>(p.neg_inf);
    s.zero += a == 0;
    s.subnormal += static_cast<W>(a - 1) < static_cast<W>(p.min_normal_minus_1);
    s.ge0 += a >= static_cast<W>(p.threshold[0]);
    s.ge1 += a >= static_cast<W>(p.threshold[1]);
    s.ge2 += a >= static_cast<W>(p.threshold[2]);
  } else if constexpr (K == DKind::boolean) {
    const W b = v != 0;
    s.lo = s.lo < b ? s.lo : b;
    s.hi = s.hi > b ? s.hi : b;
    s.zero += b == 0;
  } else {
    W mag = v, key = v;
    if constexpr (K == DKind::signed_int) {
      using S = std::make_signed_t<U>;
      const S sv = static_cast<S>(static_cast<U>(v));
      if (sv < 0) mag = static_cast<U>(U{0} - static_cast<U>(v));
      const S a = static_cast<S>(static_cast<U>(mag));  // the framework's abs: wraps the most negative
      using SW = std::make_signed_t<W>;
      key = static_cast<W>(static_cast<SW>(a)) ^ (W{1} << (sizeof(W) * 8 - 1));
    }
    s.lo = s.lo < key ? s.lo : key;
    s.hi = s.hi > key ? s.hi : key;
    s.zero += v == 0;
    s.ge0 += mag > static_cast<W>(p.threshold[0]);
    s.ge1 += mag > static_cast<W>(p.threshold[1]);
    s.ge2 += mag > static_cast<W>(p.threshold[2]);
  }
}

/// The __byte_perm selector that turns a little-endian load of big-endian
/// elements into their values (per 32-bit word; 8-byte elements also swap words).
template <class U>
constexpr std::uint32_t kSwapSelector = sizeof(U) == 2 ? 0x2301 : sizeof(U) == 1 ? 0x3210 : 0x0123;

/// A thread's min and max over the lanes the fast path saw: for 1- and
/// 2-byte floats two 16-bit lanes of a word (a 1-byte key widened to 16
/// bits), each lane's identity all ones (beyond every real key: floats'
/// keys have the sign bit clear); otherwise one key of the element's width.
template <class W>
struct Fast {
  W lo = static_cast<W>(~W{0}), hi = 0;
};

/// The fast path of one 16-byte vector of floats (already byte-swapped into
/// `w`): every lane's key into the running min and max, and whether some lane
/// needs counting, which is so exactly when the vector's least key is below
/// min_normal (a zero or subnormal) or its greatest at or above special_from
/// (the lowest threshold, inf, nan). Min and max are one instruction per two
/// 16-bit lanes, so a vector of fp16 costs 4 ands, 6 + 2 min/max and a
/// handful to test the two extremes; cuda_scan_kernel.cu states the budget
/// and tests/integration/test_scan_kernel_ptx.py counts it.
template <class U>
GPUDIAG_LANES bool fast_fold(Fast<Wide<U>>& f, const std::uint32_t (&w)[4], bool swap,
                             const Params& p) {
  if constexpr (sizeof(U) <= 2) {
    std::uint32_t mn, mx;
    if constexpr (sizeof(U) == 2) {
      const std::uint32_t mask = static_cast<std::uint32_t>(p.abs_mask) * 0x00010001u;
      const std::uint32_t a0 = w[0] & mask, a1 = w[1] & mask, a2 = w[2] & mask, a3 = w[3] & mask;
      mn = vmin2(vmin2(a0, a1), vmin2(a2, a3));
      mx = vmax2(vmax2(a0, a1), vmax2(a2, a3));
    } else {  // bytes 0 and 2, then 1 and 3, of each word as 16-bit lanes
      const std::uint32_t mask = static_cast<std::uint32_t>(p.abs_mask) * 0x00010001u;
      std::uint32_t a[8];
GPUDIAG_UNROLL
      for (int i = 0; i < 4; ++i) {
        a[2 * i] = w[i] & mask;
        a[2 * i + 1] = (w[i] >> 8) & mask;
      }
      mn = vmin2(vmin2(vmin2(a[0], a[1]), vmin2(a[2], a[3])), vmin2(vmin2(a[4], a[5]), vmin2(a[6], a[7])));
      mx = vmax2(vmax2(vmax2(a[0], a[1]), vmax2(a[2], a[3])), vmax2(vmax2(a[4], a[5]), vmax2(a[6], a[7])));
    }
    f.lo = vmin2(f.lo, mn);
    f.hi = vmax2(f.hi, mx);
    const std::uint32_t least = lesser(mn & 0xFFFFu, mn >> 16), most = greater(mx & 0xFFFFu, mx >> 16);
    return (least < static_cast<std::uint32_t>(p.min_normal)) |
           (most >= static_cast<std::uint32_t>(p.special_from));
  } else if constexpr (sizeof(U) == 4) {
    const std::uint32_t mask = static_cast<std::uint32_t>(p.abs_mask);
    const std::uint32_t a0 = w[0] & mask, a1 = w[1] & mask, a2 = w[2] & mask, a3 = w[3] & mask;
    const std::uint32_t mn = lesser(lesser(a0, a1), lesser(a2, a3));
    const std::uint32_t mx = greater(greater(a0, a1), greater(a2, a3));
    f.lo = lesser(f.lo, mn);
    f.hi = greater(f.hi, mx);
    return (mn < static_cast<std::uint32_t>(p.min_normal)) |
           (mx >= static_cast<std::uint32_t>(p.special_from));
  } else {
    const std::uint64_t e0 = swap ? (std::uint64_t{w[0]} << 32) | w[1] : (std::uint64_t{w[1]} << 32) | w[0];
    const std::uint64_t e1 = swap ? (std::uint64_t{w[2]} << 32) | w[3] : (std::uint64_t{w[3]} << 32) | w[2];
    const std::uint64_t a0 = e0 & p.abs_mask, a1 = e1 & p.abs_mask;
    const std::uint64_t mn = lesser(a0, a1), mx = greater(a0, a1);
    f.lo = lesser(f.lo, mn);
    f.hi = greater(f.hi, mx);
    return (mn < p.min_normal) | (mx >= p.special_from);
  }
}

/// Folds the 16 / sizeof(U) lanes of one aligned 16-byte vector. Floats take
/// the fast path first and count lane by lane only when a lane needs it;
/// integers and bools always count.
template <class U, DKind K>
GPUDIAG_LANES void fold_vector(Acc<Wide<U>>& s, Fast<Wide<U>>& f, Vec16 v, std::uint32_t sel,
                               bool swap, const Params& p) {
  std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
  if constexpr (sizeof(U) > 1) {
    if (sel != 0x3210) {
GPUDIAG_UNROLL
      for (auto& x : w) x = byte_perm(x, sel);
    }
  }
  if constexpr (K == DKind::floating) {
    if (!fast_fold<U>(f, w, swap, p)) return;
  }
  if constexpr (sizeof(U) == 8) {
GPUDIAG_UNROLL
    for (int i = 0; i < 2; ++i) {
      const std::uint64_t lo = swap ? w[2 * i + 1] : w[2 * i], hi = swap ? w[2 * i] : w[2 * i + 1];
      fold<U, K>(s, (hi << 32) | lo, p);
    }
  } else {
    constexpr int kBits = sizeof(U) * 8, kPerWord = 4 / sizeof(U);
    constexpr std::uint32_t kMask = kBits == 32 ? 0xFFFFFFFFu : (1u << kBits) - 1;
GPUDIAG_UNROLL
    for (int i = 0; i < 4; ++i)
GPUDIAG_UNROLL
      for (int j = 0; j < kPerWord; ++j) fold<U, K>(s, (w[i] >> (j * kBits)) & kMask, p);
  }
}

/// The fast path's min and max merged into `s` (lane by lane when packed).
template <class U>
GPUDIAG_LANES void merge_fast(Acc<Wide<U>>& s, const Fast<Wide<U>>& f) {
  if constexpr (sizeof(U) <= 2) {
GPUDIAG_UNROLL
    for (int i = 0; i < 2; ++i) {
      const std::uint32_t lo = (f.lo >> (16 * i)) & 0xFFFFu, hi = (f.hi >> (16 * i)) & 0xFFFFu;
      if (lo != 0xFFFFu) s.lo = lesser(s.lo, lo);  // all ones: the lane saw nothing
      s.hi = greater(s.hi, hi);
    }
  } else {
    s.lo = lesser(s.lo, f.lo);
    s.hi = greater(s.hi, f.hi);
  }
}

/// One element at `q` (any alignment), read byte by byte.
template <class U>
GPUDIAG_LANES Wide<U> load_bytes(const std::uint8_t* q, bool swap) {
  Wide<U> v = 0;
GPUDIAG_UNROLL
  for (int i = 0; i < static_cast<int>(sizeof(U)); ++i) {
    const Wide<U> b = q[i];
    v |= b << (8 * (swap ? sizeof(U) - 1 - i : i));
  }
  return v;
}

template <class W>
GPUDIAG_LANES Acc<W> identity() {
  return {static_cast<W>(~W{0}), 0, 0, 0, 0, 0, 0, 0, 0, 0};
}

/// A thread's keys in 64-bit key space. Its identities (all ones, zero) stay
/// at or beyond every real key, and a flush always covers at least one
/// element, so the block's min and max are real keys.
template <class U, DKind K>
GPUDIAG_LANES Flush widen(const Acc<Wide<U>>& s) {
  auto key = [](Wide<U> k) -> std::uint64_t {
    if constexpr (K == DKind::signed_int && sizeof(U) < 8) {
      const auto a = static_cast<std::int32_t>(k ^ 0x80000000u);
      return static_cast<std::uint64_t>(static_cast<std::int64_t>(a)) ^ (std::uint64_t{1} << 63);
    }
    return k;
  };
  return {key(s.lo), key(s.hi), {s.nan, s.pos_inf, s.neg_inf, s.zero, s.subnormal, s.ge0, s.ge1,
                                 s.ge2}};
}

/// Tiles [t0, t1) of `seg` (tile numbers relative to the segment) into this
/// thread's part of the statistics.
template <class U, DKind K>
GPUDIAG_LANES Flush scan_run(const Segment& seg, std::uint64_t t0, std::uint64_t t1, const Params& p,
                            unsigned tid) {
  using W = Wide<U>;
  Acc<W> s = identity<W>();
  Fast<W> f;
  const std::uint64_t begin = seg.ptr, end = seg.ptr + seg.count * sizeof(U);
  const std::uint64_t base = begin & ~std::uint64_t{kVectorBytes - 1};
  const bool swap = seg.swap != 0;
  if (begin % sizeof(U) != 0) {
    // Elements not aligned to their size: each thread reads whole elements
    // byte by byte, those that start in the tile.
    for (std::uint64_t t = t0; t < t1; ++t) {
      const std::uint64_t lo = base + t * kTileBytes, hi = lo + kTileBytes;
      const std::uint64_t e0 = lo <= begin ? 0 : (lo - begin + sizeof(U) - 1) / sizeof(U);
      const std::uint64_t e1 = lesser(seg.count, (hi - begin + sizeof(U) - 1) / sizeof(U));
      for (std::uint64_t e = e0 + tid; e < e1; e += kThreads)
        fold<U, K>(s, load_bytes<U>(reinterpret_cast<const std::uint8_t*>(begin + e * sizeof(U)), swap),
                   p);
    }
    return widen<U, K>(s);
  }
  const std::uint32_t sel = swap ? kSwapSelector<U> : 0x3210;
  for (std::uint64_t t = t0; t < t1; ++t) {
    const std::uint64_t tile = base + t * kTileBytes;
    const std::uint64_t mine = tile + std::uint64_t{tid} * kVectorBytes;
    if (tile >= begin && tile + kTileBytes <= end) {  // the whole tile: loads first, then folds
      // 8-byte elements keep 64-bit keys and constants live: half the loads
      // at a time keeps the kernel within 64 registers without spilling.
      constexpr int kBatch = sizeof(U) == 8 ? kUnroll / 2 : kUnroll;
GPUDIAG_UNROLL
      for (int h = 0; h < kUnroll; h += kBatch) {
        Vec16 v[kBatch];
GPUDIAG_UNROLL
        for (int k = 0; k < kBatch; ++k)
          v[k] = load_vector(mine + static_cast<std::uint64_t>(h + k) * kThreads * kVectorBytes);
GPUDIAG_UNROLL
        for (int k = 0; k < kBatch; ++k) fold_vector<U, K>(s, f, v[k], sel, swap, p);
      }
      continue;
    }
GPUDIAG_UNROLL
    for (int k = 0; k < kUnroll; ++k) {
      const std::uint64_t q = mine + static_cast<std::uint64_t>(k) * kThreads * kVectorBytes;
      if (q >= begin && q + kVectorBytes <= end) {
        fold_vector<U, K>(s, f, load_vector(q), sel, swap, p);
      } else if (q + kVectorBytes > begin && q < end) {  // the segment's head or tail
        for (std::uint64_t e = greater(q, begin); e < lesser(q + kVectorBytes, end); e += sizeof(U)) {
          Wide<U> v = *reinterpret_cast<const U*>(e);
          if (swap) v = load_bytes<U>(reinterpret_cast<const std::uint8_t*>(e), true);
          fold<U, K>(s, v, p);
        }
      }
    }
  }
  merge_fast<U>(s, f);
  return widen<U, K>(s);
}

GPUDIAG_LANES Flush scan_dtype(const Segment& seg, std::uint64_t t0, std::uint64_t t1,
                               const Params& p, unsigned tid) {
  switch (static_cast<DType>(seg.dtype)) {
    case DType::F64: return scan_run<std::uint64_t, DKind::floating>(seg, t0, t1, p, tid);
    case DType::F32: return scan_run<std::uint32_t, DKind::floating>(seg, t0, t1, p, tid);
    case DType::F16:
    case DType::BF16: return scan_run<std::uint16_t, DKind::floating>(seg, t0, t1, p, tid);
    case DType::F8_E4M3:
    case DType::F8_E5M2: return scan_run<std::uint8_t, DKind::floating>(seg, t0, t1, p, tid);
    case DType::I64: return scan_run<std::uint64_t, DKind::signed_int>(seg, t0, t1, p, tid);
    case DType::I32: return scan_run<std::uint32_t, DKind::signed_int>(seg, t0, t1, p, tid);
    case DType::I16: return scan_run<std::uint16_t, DKind::signed_int>(seg, t0, t1, p, tid);
    case DType::I8: return scan_run<std::uint8_t, DKind::signed_int>(seg, t0, t1, p, tid);
    case DType::U64: return scan_run<std::uint64_t, DKind::unsigned_int>(seg, t0, t1, p, tid);
    case DType::U32: return scan_run<std::uint32_t, DKind::unsigned_int>(seg, t0, t1, p, tid);
    case DType::U16: return scan_run<std::uint16_t, DKind::unsigned_int>(seg, t0, t1, p, tid);
    case DType::U8: return scan_run<std::uint8_t, DKind::unsigned_int>(seg, t0, t1, p, tid);
    default: return scan_run<std::uint8_t, DKind::boolean>(seg, t0, t1, p, tid);
  }
}

inline Params params_for(DType t) {
  Params p{};
  if (is_float(t)) {
    const FloatFormat& f = float_format(t);
    p.abs_mask = f.sign_mask - 1;
    p.nan_above = f.nan_above();
    // No inf (F8_E4M3): a pattern no lane can hold, so nothing counts as inf.
    p.inf = f.has_inf ? f.inf : ~std::uint64_t{0};
    p.neg_inf = f.has_inf ? (f.inf | f.sign_mask) : ~std::uint64_t{0};
    p.min_normal_minus_1 = f.min_normal - 1;
    for (int k = 0; k < 3; ++k) p.threshold[k] = float_threshold_bits(t, kThresholds[k]);
    p.min_normal = f.min_normal;
    p.special_from = lesser(p.threshold[0], p.nan_above + 1);
    if (f.has_inf) p.special_from = lesser(p.special_from, f.inf);
    return p;
  }
  // |x| >= t  <=>  |x| > t - 1, clamped to the type's largest magnitude (never exceeded).
  const int bits = static_cast<int>(dtype_size(t)) * 8;
  const std::uint64_t max = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
  for (int k = 0; k < 3; ++k)
    p.threshold[k] = kThresholds[k] - 1 >= static_cast<double>(max)
                         ? max
                         : static_cast<std::uint64_t>(kThresholds[k] - 1);
  return p;
}

}  // namespace gpudiag::numerics::cuda_scan::lanes
