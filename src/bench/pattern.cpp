// The bench's data pattern (pattern.h): the plan for a case, the fill loops
// for send buffers and expected results, and the check.
//
// The loops are templated on the element type and the mode so each is a
// plain arithmetic loop over the index (a multiplicative hash, shifts, one
// conversion). Owned elements, which need `g mod n`, are written in a second,
// strided pass instead of testing every element. check_recv() builds the
// expected values 4096 at a time on the stack and compares them with memcmp;
// only a chunk that differs is walked element by element.
#include <algorithm>
#include <cstring>

#include "bench/pattern_codes.h"
#include "bench/sizes.h"
#include "comm/host_reduce.h"

namespace gpudiag {

namespace pattern_detail {

namespace {

// The largest integer up to which every integer is exact (floating types).
std::int64_t exact_limit(DType t) {
  switch (t) {
    case DType::half:
      return 2048;
    case DType::bfloat16:
      return 256;
    case DType::float32:
      return std::int64_t{1} << 24;
    case DType::float64:
      return std::int64_t{1} << 53;
    default:
      return 0;
  }
}

int move_bits_of(DType t) {
  switch (t) {
    case DType::int8:
    case DType::uint8:
    case DType::bfloat16:
      return 8;
    case DType::half:
      return 11;
    case DType::float32:
      return 24;
    default:
      return 32;
  }
}

}  // namespace

Plan make_plan(const PatternCase& c) {
  Plan pl;
  pl.coll = c.coll;
  pl.type = c.type;
  pl.op = c.op;
  pl.n = std::max(c.nranks, 1);
  pl.root = std::clamp(c.root, 0, pl.n - 1);
  pl.count = c.param_count;
  pl.move_bits = move_bits_of(c.type);
  for (int k = 0; k < 16; ++k) {
    const std::int64_t n = pl.n, half = std::int64_t{1} << k;
    pl.ones[k] = (n >> (k + 1)) * half + std::max<std::int64_t>(0, n % (2 * half) - half);
  }
  if (!coll_reduces(c.coll)) return pl;
  switch (c.op) {
    case RedOp::prod:
      pl.mode = Mode::prod;
      return pl;
    case RedOp::max:
      pl.mode = Mode::max;
      return pl;
    case RedOp::min:
      pl.mode = Mode::min;
      return pl;
    case RedOp::sum:
    case RedOp::avg:
      break;
  }
  pl.mode = Mode::dense_sum;
  if (const std::int64_t limit = exact_limit(c.type)) {
    // Each rank sends at most 2^b; (n + 1) * 2^b stays exact even with one
    // rank counted twice, so the diagnosis of a doubled rank stays exact too.
    int b = 0;
    while (b < 6 && (static_cast<std::int64_t>(pl.n) + 1) << (b + 1) <= limit) ++b;
    const bool pow2 = (pl.n & (pl.n - 1)) == 0;
    if (b >= 1 && (c.op != RedOp::avg || pow2)) {
      pl.cbits = b;
    } else {
      pl.mode = Mode::sparse_sum;
      pl.cbits = 6;
    }
  }
  return pl;
}

std::size_t segment_count(const Plan& pl, int rank) {
  if (pl.coll == Coll::reduce && rank != pl.root) return 0;
  return pl.coll == Coll::all_gather || pl.coll == Coll::alltoall ? pl.n : 1;
}

Segment segment(const Plan& pl, int rank, std::size_t s) {
  const std::size_t count = pl.count;
  switch (pl.coll) {
    case Coll::all_reduce:
    case Coll::reduce:
      return {0, count, -1, 0};
    case Coll::reduce_scatter:
      return {0, count, -1, static_cast<std::uint64_t>(rank) * count};
    case Coll::all_gather:
      return {s * count, count, static_cast<int>(s), 0};
    case Coll::alltoall:
      return {s * count, count, static_cast<int>(s), static_cast<std::uint64_t>(rank) * count};
    case Coll::broadcast:
      return {0, count, pl.root, 0};
    case Coll::sendrecv:
      return {0, count, (rank + pl.n - 1) % pl.n, 0};
  }
  return {};
}

}  // namespace pattern_detail

namespace {

using namespace pattern_detail;

template <class E, class F>
void emit(typename E::T* out, std::uint64_t g0, std::size_t len, F code) {
  for (std::size_t i = 0; i < len; ++i) out[i] = E::from_code(code(g0 + i));
}

template <class E>
void emit_send(typename E::T* out, const Plan& pl, int p, std::uint64_t g0, std::size_t len) {
  with_mode(pl.mode, [&](auto m) {
    emit<E>(out, g0, len,
            [&](std::uint64_t g) { return background<decltype(m)::value>(pl, p, g); });
  });
  if (!has_owner(pl.mode)) return;
  const std::uint64_t n = static_cast<std::uint64_t>(pl.n);
  for (std::uint64_t g = g0 + (static_cast<std::uint64_t>(p) + n - g0 % n) % n; g < g0 + len;
       g += n)
    out[g - g0] = E::from_code(owner_value(pl, p, g));
}

/// Elements [from, from + len) of segment s.
template <class E>
void emit_expected(typename E::T* out, const Plan& pl, const Segment& s, std::size_t from,
                   std::size_t len) {
  const std::uint64_t g0 = s.g0 + from;
  if (s.src >= 0) {
    emit<E>(out, g0, len, [&](std::uint64_t g) { return move_code(pl, s.src, g); });
    return;
  }
  with_mode(pl.mode, [&](auto m) {
    emit<E>(out, g0, len, [&](std::uint64_t g) { return reduced<decltype(m)::value>(pl, g); });
  });
  if (pl.op == RedOp::avg) finish_avg(out, len, pl.type, pl.n);
}

/// Distance in units in the last place between two floating values of the
/// same type (their bit patterns mapped to a monotonic integer line).
template <class Bits>
std::uint64_t ulp_distance(Bits a, Bits b) {
  constexpr Bits sign = Bits(1) << (sizeof(Bits) * 8 - 1);
  auto line = [](Bits x) {
    const auto mag = static_cast<std::int64_t>(x & ~sign);
    return (x & sign) ? -mag : mag;
  };
  const std::int64_t d = line(a) - line(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

constexpr std::uint64_t kAvgUlps = 2;

template <class E>
WrongReport check_typed(const typename E::T* got, const Plan& pl, int rank) {
  using T = typename E::T;
  using Bits = typename E::Bits;
  constexpr std::size_t kChunk = 4096;
  T want[kChunk];
  const bool tolerant = E::floating && pl.op == RedOp::avg && coll_reduces(pl.coll);
  WrongReport r;
  for (std::size_t si = 0, ns = segment_count(pl, rank); si < ns; ++si) {
    const Segment s = segment(pl, rank, si);
    for (std::size_t from = 0; from < s.len; from += kChunk) {
      const std::size_t len = std::min(kChunk, s.len - from);
      emit_expected<E>(want, pl, s, from, len);
      const T* have = got + s.offset + from;
      if (std::memcmp(want, have, len * sizeof(T)) == 0) continue;
      for (std::size_t i = 0; i < len; ++i) {
        const Bits w = std::bit_cast<Bits>(want[i]), h = std::bit_cast<Bits>(have[i]);
        if (w == h || (tolerant && ulp_distance(w, h) <= kAvgUlps)) continue;
        if (r.wrong++ == 0) {
          r.first_index = s.offset + from + i;
          r.expected = element_as_double(want, i, pl.type);
          r.got = element_as_double(have, i, pl.type);
        }
      }
    }
  }
  if (r.wrong) r.suspect = diagnose(pl, got, rank, r.first_index);
  return r;
}

}  // namespace

void fill_send_range(void* out, const PatternCase& c, int rank, std::size_t first,
                     std::size_t len) {
  const Plan pl = make_plan(c);
  with_elem(pl.type, [&](auto e) {
    using E = decltype(e);
    emit_send<E>(static_cast<typename E::T*>(out), pl, rank, first, len);
  });
}

void fill_send(void* out, const PatternCase& c, int rank) {
  fill_send_range(out, c, rank, 0, send_count_for(c.coll, c.param_count, c.nranks));
}

bool fill_expected(void* out, const PatternCase& c, int rank) {
  const Plan pl = make_plan(c);
  const std::size_t ns = segment_count(pl, rank);
  if (ns == 0) return false;
  with_elem(pl.type, [&](auto e) {
    using E = decltype(e);
    auto* o = static_cast<typename E::T*>(out);
    for (std::size_t si = 0; si < ns; ++si) {
      const Segment s = segment(pl, rank, si);
      emit_expected<E>(o + s.offset, pl, s, 0, s.len);
    }
  });
  return true;
}

WrongReport check_recv(const void* got, const PatternCase& c, int rank) {
  const Plan pl = make_plan(c);
  return with_elem(pl.type, [&](auto e) {
    using E = decltype(e);
    return check_typed<E>(static_cast<const typename E::T*>(got), pl, rank);
  });
}

}  // namespace gpudiag
