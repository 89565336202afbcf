// The compute check's inner steps (src/gpu/compute_kernels.cuh) unrolled 1 and
// 9 times, for test_compute_kernel_ptx.py to count PTX instructions per step:
// the fp32 GEMM's k-tile with its loads into shared memory and its barriers,
// as compute_gemm.cu's loop runs it, and the bf16/fp16 WMMA step.
#include "gpu/compute_kernels.cuh"

namespace ck = gpudiag::compute_kernels;

template <int Steps>
__device__ __forceinline__ void fp32_body(const float* a, const float* b, float* c, int n) {
  __shared__ float as[ck::kTile][ck::kTile + 1], bs[ck::kTile][ck::kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  float acc = 0.0f;
#pragma unroll
  for (int s = 0; s < Steps; ++s) {
    as[ty][tx] = a[ty * n + s * ck::kTile + tx];
    bs[ty][tx] = b[(s * ck::kTile + ty) * n + tx];
    __syncthreads();
    acc = ck::fp32_tile_step(acc, as, bs, ty, tx);
    __syncthreads();
  }
  c[ty * n + tx] = acc;
}

template <class T, int Steps>
__device__ __forceinline__ void wmma_body(const T* a, const T* b, float* c, int n) {
  ck::FragC acc;
  nvcuda::wmma::fill_fragment(acc, 0.0f);
#pragma unroll
  for (int k = 0; k < Steps; ++k) ck::wmma_step(acc, a + k * 16, b + k * 16 * n, n);
  nvcuda::wmma::store_matrix_sync(c, acc, n, nvcuda::wmma::mem_row_major);
}

extern "C" __global__ void probe_fp32_1(const float* a, const float* b, float* c, int n) { fp32_body<1>(a, b, c, n); }
extern "C" __global__ void probe_fp32_9(const float* a, const float* b, float* c, int n) { fp32_body<9>(a, b, c, n); }
extern "C" __global__ void probe_bf16_1(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c, int n) {
  wmma_body<__nv_bfloat16, 1>(a, b, c, n);
}
extern "C" __global__ void probe_bf16_9(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c, int n) {
  wmma_body<__nv_bfloat16, 9>(a, b, c, n);
}
extern "C" __global__ void probe_fp16_1(const __half* a, const __half* b, float* c, int n) {
  wmma_body<__half, 1>(a, b, c, n);
}
extern "C" __global__ void probe_fp16_9(const __half* a, const __half* b, float* c, int n) {
  wmma_body<__half, 9>(a, b, c, n);
}
