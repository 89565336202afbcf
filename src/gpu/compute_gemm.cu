// The compute check's GEMMs (compute_gemm.h) and the reduction to a checksum,
// on one stream: inputs generated on the device from compute/math.h's draw,
// then per run a GEMM between two events, the test hook's bit flip when asked,
// the checksum's per-block partials in math.h's fixed geometry, copied back
// and finished on the host (compute/arith.h). Written by hand, not with CUB or
// cuBLAS: the reduction's order and the GEMM's kernel must not change with a
// library's version or the GPU's SM count, or the checksums stop comparing.
#include <cuda_runtime.h>

#include <chrono>
#include <thread>
#include <vector>

#include "compute/arith.h"
#include "gpu/compute_gemm.h"
#include "gpu/compute_kernels.cuh"
#include "util/error.h"

namespace gpudiag {

namespace {

using compute::Precision;
namespace ck = compute_kernels;

__global__ void compute_inputs(void* a, void* b, std::uint64_t count, Precision p) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += std::uint64_t(gridDim.x) * blockDim.x) {
    if (p == Precision::fp32) {
      static_cast<std::uint32_t*>(a)[i] = compute::input_fp32(0, i);
      static_cast<std::uint32_t*>(b)[i] = compute::input_fp32(1, i);
    } else if (p == Precision::bf16) {
      static_cast<std::uint16_t*>(a)[i] = compute::input_bf16(0, i);
      static_cast<std::uint16_t*>(b)[i] = compute::input_bf16(1, i);
    } else {
      static_cast<std::uint16_t*>(a)[i] = compute::input_fp16(0, i);
      static_cast<std::uint16_t*>(b)[i] = compute::input_fp16(1, i);
    }
  }
}

/// One thread per element of C, 16x16 tiles through shared memory; k in order.
__global__ void gemm_fp32(const float* a, const float* b, float* c, int n) {
  __shared__ float as[ck::kTile][ck::kTile + 1], bs[ck::kTile][ck::kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * ck::kTile + ty, col = blockIdx.x * ck::kTile + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < n; k0 += ck::kTile) {
    as[ty][tx] = a[std::size_t(row) * n + k0 + tx];
    bs[ty][tx] = b[std::size_t(k0 + ty) * n + col];
    __syncthreads();
    acc = ck::fp32_tile_step(acc, as, bs, ty, tx);
    __syncthreads();
  }
  c[std::size_t(row) * n + col] = acc;
}

/// One warp per 16x16 tile of C, k in steps of 16 in order.
template <class T>
__global__ void gemm_wmma(const T* a, const T* b, float* c, int n) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int tiles = n / 16;
  if (warp >= tiles * tiles) return;
  const int tr = warp / tiles, tc = warp % tiles;
  ck::FragC acc;
  nvcuda::wmma::fill_fragment(acc, 0.0f);
  for (int k = 0; k < n; k += 16)
    ck::wmma_step(acc, a + std::size_t(tr) * 16 * n + k, b + std::size_t(k) * n + tc * 16, n);
  nvcuda::wmma::store_matrix_sync(c + std::size_t(tr) * 16 * n + tc * 16, acc, n,
                                  nvcuda::wmma::mem_row_major);
}

__global__ void flip_one_bit(float* c, std::uint64_t index) {
  c[index] = __uint_as_float(__float_as_uint(c[index]) ^ compute::kFlipBit);
}

/// math.h's reduction: thread t of block b, then a halving tree per block.
__global__ void checksum_partials(const float* c, std::uint64_t count, unsigned long long* hashes,
                                  float* sums) {
  __shared__ float v[compute::kReduceThreads];
  __shared__ unsigned long long h[compute::kReduceThreads];
  const int t = threadIdx.x;
  const std::uint64_t stride = std::uint64_t(compute::kReduceBlocks) * compute::kReduceThreads;
  float f = 0.0f;
  unsigned long long hh = 0;
  for (std::uint64_t i = std::uint64_t(blockIdx.x) * compute::kReduceThreads + t; i < count; i += stride) {
    const float x = c[i];
    f = __fadd_rn(f, x);
    hh += compute::element_hash(i, __float_as_uint(x));
  }
  v[t] = f;
  h[t] = hh;
  __syncthreads();
  for (int s = compute::kReduceThreads / 2; s > 0; s >>= 1) {
    if (t < s) {
      v[t] = __fadd_rn(v[t], v[t + s]);
      h[t] += h[t + s];
    }
    __syncthreads();
  }
  if (t == 0) {
    hashes[blockIdx.x] = h[0];
    sums[blockIdx.x] = v[0];
  }
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(ExitCode::broken,
                std::string("the compute check's ") + what + " failed: " + cudaGetErrorName(e) +
                    " (" + cudaGetErrorString(e) + ")",
                "check the GPU with nvidia-smi and dmesg (Xid errors)");
}

template <class P>
struct DevicePtr {
  P* p = nullptr;
  explicit DevicePtr(std::size_t bytes) { check(cudaMalloc(&p, bytes), "cudaMalloc"); }
  ~DevicePtr() { cudaFree(p); }
  DevicePtr(const DevicePtr&) = delete;
  DevicePtr& operator=(const DevicePtr&) = delete;
};

class CudaGemm final : public GpuGemm {
 public:
  CudaGemm(Precision p, int n)
      : p_(p), n_(n), count_(std::size_t(n) * n),
        a_(count_ * (p == Precision::fp32 ? 4 : 2)), b_(count_ * (p == Precision::fp32 ? 4 : 2)),
        c_(count_ * sizeof(float)), hashes_(compute::kReduceBlocks * sizeof(unsigned long long)),
        sums_(compute::kReduceBlocks * sizeof(float)) {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
    check(cudaEventCreate(&done_), "cudaEventCreate");
    compute_inputs<<<1024, 256, 0, stream_>>>(a_.p, b_.p, count_, p_);
    check(cudaGetLastError(), "input kernel launch");
  }
  ~CudaGemm() override {
    cudaStreamSynchronize(stream_);  // nothing in flight may outlive the buffers
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaEventDestroy(done_);
    cudaStreamDestroy(stream_);
  }

  double run(std::uint64_t& checksum, bool flip, Deadline deadline) override {
    check(cudaEventRecord(start_, stream_), "cudaEventRecord");
    if (p_ == Precision::fp32) {
      const dim3 threads(ck::kTile, ck::kTile), blocks(n_ / ck::kTile, n_ / ck::kTile);
      gemm_fp32<<<blocks, threads, 0, stream_>>>(static_cast<const float*>(a_.p),
                                                   static_cast<const float*>(b_.p), c_.p, n_);
    } else {
      const int warps = (n_ / 16) * (n_ / 16), per_block = 4;
      const int blocks = (warps + per_block - 1) / per_block;
      if (p_ == Precision::bf16)
        gemm_wmma<<<blocks, 32 * per_block, 0, stream_>>>(static_cast<const __nv_bfloat16*>(a_.p),
                                                          static_cast<const __nv_bfloat16*>(b_.p), c_.p, n_);
      else
        gemm_wmma<<<blocks, 32 * per_block, 0, stream_>>>(static_cast<const __half*>(a_.p),
                                                          static_cast<const __half*>(b_.p), c_.p, n_);
    }
    check(cudaGetLastError(), "GEMM kernel launch");
    check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
    if (flip) flip_one_bit<<<1, 1, 0, stream_>>>(c_.p, compute::flip_index(n_));
    checksum_partials<<<compute::kReduceBlocks, compute::kReduceThreads, 0, stream_>>>(
        c_.p, count_, hashes_.p, sums_.p);
    check(cudaGetLastError(), "checksum kernel launch");
    check(cudaEventRecord(done_, stream_), "cudaEventRecord");
    wait(deadline);  // then the copies below find their data ready and cannot hang
    std::vector<std::uint64_t> hashes(compute::kReduceBlocks);
    std::vector<float> sums(compute::kReduceBlocks);
    check(cudaMemcpy(hashes.data(), hashes_.p, hashes.size() * 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
    check(cudaMemcpy(sums.data(), sums_.p, sums.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    checksum = compute::finish_checksum(hashes.data(), sums.data());
    return ms / 1000.0;
  }

 private:
  /// Polls the last event: a hung GPU ends in a TimeoutError, not a hang.
  void wait(Deadline deadline) {
    for (int polls = 0;; ++polls) {
      const cudaError_t e = cudaEventQuery(done_);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) check(e, "GEMM or checksum");
      if (deadline.expired())
        throw TimeoutError("the compute check's GEMM did not finish in time on the GPU",
                           "check the GPU with nvidia-smi and dmesg (Xid errors)");
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Precision p_;
  int n_;
  std::size_t count_;
  DevicePtr<void> a_, b_;
  DevicePtr<float> c_;
  DevicePtr<unsigned long long> hashes_;
  DevicePtr<float> sums_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr, done_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuGemm> make_gpu_gemm(Precision p, int n) { return std::make_unique<CudaGemm>(p, n); }

}  // namespace gpudiag
