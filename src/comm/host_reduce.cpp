// Host reductions (host_reduce.h): one templated loop per type, the
// operation chosen outside it so the compiler vectorises the loop.
#include "comm/host_reduce.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace gpudiag {

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        man <<= 1;
        ++e;
      } while (!(man & 0x400u));
      bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else {
    bits = sign | (exp + 112) << 23 | man << 13;
  }
  return std::bit_cast<float>(bits);
}

std::uint16_t float_to_half(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // inf or nan (nan keeps a quiet payload bit)
    return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504: inf
  if (ax < 0x38800000u) {                        // below the smallest normal half
    if (ax < 0x33000000u) return sign;           // under half the smallest subnormal
    const std::uint32_t man = (ax & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(ax >> 23);  // 14 + (113 - exp)
    const std::uint32_t half = man >> shift, rest = man & ((1u << shift) - 1),
                        mid = 1u << (shift - 1);
    return sign | static_cast<std::uint16_t>(half + (rest > mid || (rest == mid && (half & 1))));
  }
  const std::uint32_t base = ax - 0x38000000u;  // rebias 127 -> 15
  const std::uint32_t half = base >> 13, rest = base & 0x1fffu;
  return sign | static_cast<std::uint16_t>(half + (rest > 0x1000u || (rest == 0x1000u && (half & 1))));
}

float bf16_to_float(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t{b} << 16); }

std::uint16_t float_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

namespace {

struct Half {
  static float load(std::uint16_t v) { return half_to_float(v); }
  static std::uint16_t store(float v) { return float_to_half(v); }
};
struct Bf16 {
  static float load(std::uint16_t v) { return bf16_to_float(v); }
  static std::uint16_t store(float v) { return float_to_bf16(v); }
};

template <class T>
T combine(T a, T b, RedOp op) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case RedOp::sum: case RedOp::avg:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
      case RedOp::prod:
        return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
      case RedOp::max: return std::max(a, b);
      case RedOp::min: return std::min(a, b);
    }
  } else {
    switch (op) {
      case RedOp::sum: case RedOp::avg: return a + b;
      case RedOp::prod: return a * b;
      // NaN propagates, as on the GPU.
      case RedOp::max: return std::isnan(a) || std::isnan(b) ? a + b : std::max(a, b);
      case RedOp::min: return std::isnan(a) || std::isnan(b) ? a + b : std::min(a, b);
    }
  }
  return a;
}

template <class T, RedOp Op>
void loop(T* d, const T* s, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) d[i] = combine(d[i], s[i], Op);
}

template <class T>
void reduce_typed(void* dst, const void* src, std::size_t n, RedOp op) {
  auto* d = static_cast<T*>(dst);
  const auto* s = static_cast<const T*>(src);
  switch (op) {
    case RedOp::sum: case RedOp::avg: loop<T, RedOp::sum>(d, s, n); break;
    case RedOp::prod: loop<T, RedOp::prod>(d, s, n); break;
    case RedOp::max: loop<T, RedOp::max>(d, s, n); break;
    case RedOp::min: loop<T, RedOp::min>(d, s, n); break;
  }
}

template <class Conv>
void reduce_16(void* dst, const void* src, std::size_t n, RedOp op) {
  auto* d = static_cast<std::uint16_t*>(dst);
  const auto* s = static_cast<const std::uint16_t*>(src);
  for (std::size_t i = 0; i < n; ++i)
    d[i] = Conv::store(combine(Conv::load(d[i]), Conv::load(s[i]), op));
}

template <class T>
void avg_typed(void* data, std::size_t n, int nranks) {
  auto* d = static_cast<T*>(data);
  if constexpr (std::is_integral_v<T>) {
    // Divide in 64 bits: the rank count does not fit every T (256 ranks are
    // 0 as a uint8), and NCCL divides by the full count.
    using Wide = std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t>;
    const Wide div = static_cast<Wide>(nranks);
    for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<Wide>(d[i]) / div);
  } else {
    const T scale = T(1) / static_cast<T>(nranks);
    for (std::size_t i = 0; i < n; ++i) d[i] = d[i] * scale;
  }
}

template <class Conv>
void avg_16(void* data, std::size_t n, int nranks) {
  auto* d = static_cast<std::uint16_t*>(data);
  const float scale = Conv::load(Conv::store(1.0f / static_cast<float>(nranks)));
  for (std::size_t i = 0; i < n; ++i) d[i] = Conv::store(Conv::load(d[i]) * scale);
}

}  // namespace

void reduce_into(void* dst, const void* src, std::size_t count, DType type, RedOp op) {
  switch (type) {
    case DType::int8: return reduce_typed<std::int8_t>(dst, src, count, op);
    case DType::uint8: return reduce_typed<std::uint8_t>(dst, src, count, op);
    case DType::int32: return reduce_typed<std::int32_t>(dst, src, count, op);
    case DType::uint32: return reduce_typed<std::uint32_t>(dst, src, count, op);
    case DType::int64: return reduce_typed<std::int64_t>(dst, src, count, op);
    case DType::uint64: return reduce_typed<std::uint64_t>(dst, src, count, op);
    case DType::half: return reduce_16<Half>(dst, src, count, op);
    case DType::float32: return reduce_typed<float>(dst, src, count, op);
    case DType::float64: return reduce_typed<double>(dst, src, count, op);
    case DType::bfloat16: return reduce_16<Bf16>(dst, src, count, op);
  }
}

void finish_avg(void* data, std::size_t count, DType type, int nranks) {
  switch (type) {
    case DType::int8: return avg_typed<std::int8_t>(data, count, nranks);
    case DType::uint8: return avg_typed<std::uint8_t>(data, count, nranks);
    case DType::int32: return avg_typed<std::int32_t>(data, count, nranks);
    case DType::uint32: return avg_typed<std::uint32_t>(data, count, nranks);
    case DType::int64: return avg_typed<std::int64_t>(data, count, nranks);
    case DType::uint64: return avg_typed<std::uint64_t>(data, count, nranks);
    case DType::half: return avg_16<Half>(data, count, nranks);
    case DType::float32: return avg_typed<float>(data, count, nranks);
    case DType::float64: return avg_typed<double>(data, count, nranks);
    case DType::bfloat16: return avg_16<Bf16>(data, count, nranks);
  }
}

double element_as_double(const void* data, std::size_t i, DType type) {
  const auto* p = static_cast<const unsigned char*>(data) + i * dtype_size(type);
  auto get = [&]<class T>(T) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (type) {
    case DType::int8: return get(std::int8_t{});
    case DType::uint8: return get(std::uint8_t{});
    case DType::int32: return get(std::int32_t{});
    case DType::uint32: return get(std::uint32_t{});
    case DType::int64: return static_cast<double>(get(std::int64_t{}));
    case DType::uint64: return static_cast<double>(get(std::uint64_t{}));
    case DType::half: return half_to_float(get(std::uint16_t{}));
    case DType::float32: return get(float{});
    case DType::float64: return get(double{});
    case DType::bfloat16: return bf16_to_float(get(std::uint16_t{}));
  }
  return 0;
}

}  // namespace gpudiag
