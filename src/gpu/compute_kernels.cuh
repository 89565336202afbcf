// The compute check's inner steps, for compute_gemm.cu's kernels and the PTX
// budget probe (tests/ptx/compute_probe.cu): one k-tile of the fp32 GEMM (16
// fused multiply-adds from shared memory, in k order, round to nearest: no
// contraction or reordering is left to the compiler) and one 16x16x16 WMMA
// step of the bf16/fp16 GEMM.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

// Any change here that moves a result bit bumps kComputeKernelVersion
// (compute/math.h): the known checksums are keyed by it.
namespace gpudiag::compute_kernels {

inline constexpr int kTile = 16;

/// acc += As[ty][k] * Bs[k][tx] for k = 0..15, each a fused multiply-add.
__device__ __forceinline__ float fp32_tile_step(float acc, const float (&as)[kTile][kTile + 1],
                                                const float (&bs)[kTile][kTile + 1], int ty, int tx) {
#pragma unroll
  for (int k = 0; k < kTile; ++k) acc = __fmaf_rn(as[ty][k], bs[k][tx], acc);
  return acc;
}

template <class T>
using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, nvcuda::wmma::row_major>;
template <class T>
using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, nvcuda::wmma::row_major>;
using FragC = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

/// One k-step of a warp's 16x16 tile of C: its rows of A and columns of B
/// from global memory (`a` and `b` point at the step's corner, `n` the row
/// length), multiplied on the tensor cores into `acc`.
template <class T>
__device__ __forceinline__ void wmma_step(FragC& acc, const T* a, const T* b, int n) {
  FragA<T> fa;
  FragB<T> fb;
  nvcuda::wmma::load_matrix_sync(fa, a, n);
  nvcuda::wmma::load_matrix_sync(fb, b, n);
  nvcuda::wmma::mma_sync(acc, fa, fb, acc);
}

}  // namespace gpudiag::compute_kernels
