// Kernels behind fill_and_verify_pattern(): write a position-dependent word
// pattern over a device buffer, then count the words that read back wrong.
// Grid-stride loops so any size works with a fixed launch.
#include <cuda_runtime.h>

#include "gpu/cuda.h"
#include "util/error.h"

namespace gpudiag {

namespace {

__global__ void fill_kernel(std::uint32_t* p, std::size_t n, std::uint32_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    p[i] = pattern_word(i, seed);
}

__global__ void verify_kernel(const std::uint32_t* p, std::size_t n, std::uint32_t seed,
                              unsigned long long* bad) {
  unsigned long long mine = 0;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x)
    mine += (p[i] != pattern_word(i, seed));
  if (mine) atomicAdd(bad, mine);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw Error(ExitCode::broken, std::string(what) + " failed: " + cudaGetErrorName(e) + " (" +
                                      cudaGetErrorString(e) + ")");
}

}  // namespace

std::uint64_t fill_and_verify_pattern(void* dst, std::size_t words, std::uint32_t seed) {
  auto* p = static_cast<std::uint32_t*>(dst);
  unsigned long long* bad = nullptr;
  check(cudaMalloc(&bad, sizeof *bad), "cudaMalloc(counter)");
  struct Free {
    unsigned long long* p;
    ~Free() { cudaFree(p); }
  } free_bad{bad};
  check(cudaMemset(bad, 0, sizeof *bad), "cudaMemset");
  const int threads = 256, blocks = 1024;
  fill_kernel<<<blocks, threads>>>(p, words, seed);
  check(cudaGetLastError(), "pattern fill kernel launch");
  verify_kernel<<<blocks, threads>>>(p, words, seed, bad);
  check(cudaGetLastError(), "pattern verify kernel launch");
  check(cudaDeviceSynchronize(), "pattern kernels");
  unsigned long long host_bad = 0;
  check(cudaMemcpy(&host_bad, bad, sizeof host_bad, cudaMemcpyDeviceToHost), "cudaMemcpy(counter)");
  return host_bad;
}

}  // namespace gpudiag
