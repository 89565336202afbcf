// The replica checksum: one 64-bit number per tensor, computed from its bytes
// alone (whatever the dtype), the same on the CPU and the GPU, whatever the
// threads, grid or alignment. Data-parallel replicas hold bit-identical
// parameters after every optimizer step, so two replicas whose checksums of
// one parameter differ hold different bits (docs/formats.md states the
// algorithm for other implementations).
//
// How. The bytes are read as little-endian 32-bit words w_k (a last partial
// word is padded with zero bytes). Word k is multiplied, mod 2^64, by
// m_k = 2 * ((k + 1) * 0x9E3779B9 mod 2^32) + 1, an odd 33-bit number from a
// Weyl sequence, and the products are summed mod 2^64:
//     sum = Σ w_k * m_k  (mod 2^64)
// The checksum is SplitMix64's finalizer applied to sum XOR (bytes *
// 0x9E3779B97F4A7C15), so tensors of different lengths differ too.
//
// Why this. A sum is associative: any split of the bytes over threads, thread
// blocks or ranges adds up to the same number (the GPU merges blocks with
// 64-bit atomic adds, exactly), so parallel code cannot make replicas differ.
// It is linear in each word, so a word can be assembled from its bytes
// wherever a tensor's address leaves them (heads, tails, unaligned data): byte
// j of word k adds (b << 8j) * m_k. Any change confined to one word (every
// single-bit flip) changes the word by d with 0 < |d| < 2^32, so the sum by
// d * m_k, never zero mod 2^64 since m_k is odd and |d| < 2^64: always
// detected; the finalizer is a bijection. Changes to several words go
// undetected only when their products cancel exactly mod 2^64. The m_k of
// 2^32 consecutive words (16 GiB) are all different (k + 1 -> (k + 1) * an odd
// number is a bijection mod 2^32), and swapping words i and j changes the sum
// by (w_i - w_j) * 2 * (a_j - a_i), which is never 0 mod 2^64 (each factor
// below 2^32): a swap is detected in any tensor below 16 GiB. (Version 1's
// multiplier, a | 1, gave words about 1.27 GiB apart one multiplier.)
// The product is computed as (w * a << 1) + w: one widening 32x32->64
// multiply as before. It is not a cryptographic hash: it finds faults,
// not adversaries. Per 32 bytes it costs about 14 AVX2 instructions (widening
// multiplies, vpmuludq), so it runs at the memory's rate.
#pragma once

#include <cstdint>

namespace gpudiag::numerics {

inline constexpr std::uint32_t kChecksumStep = 0x9E3779B9u;

/// a_k = (k + 1) * 0x9E3779B9 mod 2^32: word k's multiplier is 2 * a_k + 1.
constexpr std::uint32_t checksum_step_of(std::uint64_t k) {
  return static_cast<std::uint32_t>(k + 1) * kChecksumStep;
}

/// m_k = 2 * a_k + 1, the odd 33-bit multiplier of word k.
constexpr std::uint64_t checksum_multiplier(std::uint64_t k) {
  return 2 * std::uint64_t{checksum_step_of(k)} + 1;
}

/// What byte `b` at byte offset `o` of a tensor adds to its sum.
constexpr std::uint64_t checksum_byte(std::uint8_t b, std::uint64_t o) {
  return (std::uint64_t{b} << (8 * (o % 4))) * checksum_multiplier(o / 4);
}

/// The checksum of a tensor of `bytes` bytes whose words sum to `sum`.
constexpr std::uint64_t checksum_finish(std::uint64_t sum, std::uint64_t bytes) {
  std::uint64_t x = sum ^ (bytes * 0x9E3779B97F4A7C15ull);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The sum of bytes [begin, end) of a tensor whose byte 0 is at `tensor`;
/// `begin` is a multiple of 4, and `end` too unless it is the tensor's end.
/// The vectorised loops (scan_kernels_impl.h), any alignment.
std::uint64_t checksum_sum(const std::uint8_t* tensor, std::uint64_t begin, std::uint64_t end);

/// The checksum of `bytes` bytes at `data`, in the calling thread.
inline std::uint64_t checksum_of(const void* data, std::uint64_t bytes) {
  return checksum_finish(checksum_sum(static_cast<const std::uint8_t*>(data), 0, bytes), bytes);
}

}  // namespace gpudiag::numerics
