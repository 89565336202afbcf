// The replica checksum kernel: the checksum sum (checksum.h) of every tensor
// of a segment table (cuda_scan_kernel.h) in one launch over device memory.
//
// How: the statistics kernel's walk. A block takes a contiguous range of
// tiles of the concatenated segments, finds its first segment by binary
// search, and for each segment it touches runs lanes::checksum_run
// (cuda_checksum_lanes.h): kUnroll streaming 16-byte loads per thread per
// tile, four 32x32->64 multiply-adds per vector. cub::BlockReduce sums the
// threads' 64-bit sums and thread 0 adds the block's into the tensor's slot
// with a 64-bit atomic add: addition mod 2^64 is exact and order-free, so the
// result never depends on the grid. The host finishes each sum with the
// tensor's byte length (checksum_finish).
//
// The budget: per 16-byte vector a load, four IMAD.WIDE.U32 and the
// multipliers' adds, about 12 instructions against the 80 that HBM3's rate
// allows (cuda_scan_kernel.cu works the figure out), so the kernel is bound
// by the memory, not the SMs.
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>

#include "numerics/scan/cuda_checksum_lanes.h"
#include "numerics/scan/cuda_scan_kernel.h"

namespace gpudiag::numerics::cuda_scan {

namespace {

using SumReduce = cub::BlockReduce<unsigned long long, kThreads>;

__global__ void __launch_bounds__(kThreads)
    checksum_segments(const Segment* segments, std::uint32_t n_segments, std::uint64_t total_tiles,
                      unsigned long long* sums) {
  __shared__ typename SumReduce::TempStorage temp;
  const std::uint64_t per = (total_tiles + gridDim.x - 1) / gridDim.x;
  std::uint64_t t = blockIdx.x * per;
  const std::uint64_t t_end = min(total_tiles, t + per);
  if (t >= t_end) return;
  std::uint32_t s = 0, hi = n_segments;  // the last segment starting at or before t
  while (hi - s > 1) {
    const std::uint32_t mid = s + (hi - s) / 2;
    if (segments[mid].first_tile <= t)
      s = mid;
    else
      hi = mid;
  }
  while (t < t_end) {
    const Segment seg = segments[s];
    const std::uint64_t run_end = min(t_end, segments[s + 1].first_tile);
    const unsigned long long mine =
        lanes::checksum_run(seg, t - seg.first_tile, run_end - seg.first_tile, threadIdx.x);
    const unsigned long long r = SumReduce(temp).Sum(mine);
    if (threadIdx.x == 0 && r) atomicAdd(sums + seg.tensor, r);
    __syncthreads();  // temp is reused by the next reduction
    t = run_end;
    while (s + 1 < n_segments && segments[s + 1].first_tile <= t) ++s;
  }
}

}  // namespace

int checksum_blocks_per_sm(std::string* error) {
  int n = 0;
  const cudaError_t e =
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, checksum_segments, kThreads, 0);
  if (e != cudaSuccess) {
    if (error) *error = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return 0;
  }
  return n;
}

int launch_checksum(const Segment* segments, std::uint32_t n_segments, std::uint64_t total_tiles,
                    std::uint64_t* sums, int grid, void* stream) {
  if (total_tiles == 0 || n_segments == 0) return 0;
  checksum_segments<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      segments, n_segments, total_tiles, reinterpret_cast<unsigned long long*>(sums));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace gpudiag::numerics::cuda_scan
