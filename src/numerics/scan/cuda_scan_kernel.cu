// The CUDA scanner's one kernel: every statistic of every segment of a table
// (cuda_scan_kernel.h) in one pass over device memory, for every dtype.
//
// How: a block takes a contiguous range of tiles of the concatenated
// segments (contiguous rather than strided, so it meets each segment once and
// walks the table forward); for each segment it touches, a switch on the
// dtype (uniform across the block) runs lanes::scan_run<U, K>, in which each thread
// issues kUnroll 16-byte streaming loads (__ldcs) per tile and folds every
// lane into 32-bit counters and order keys (64-bit only for 8-byte
// elements). A tile that is not wholly inside the segment (its head and
// tail) reads the lanes it owns one element at a time, so no load leaves the
// segment's bytes; a segment whose elements are not aligned to their size
// (a safetensors tensor at an odd offset) reads bytes. When the block leaves
// a segment, cub::BlockReduce folds the threads' counters into 64 bits and
// thread 0 merges them into the tensor's Accumulator with atomics, which are
// exact and order-independent, so results never depend on the grid.
//
// The per-thread work (the fold of each lane, the head/tail and misaligned
// paths, the widening to 64 bits) is cuda_scan_lanes.h, shared with a host
// test that runs it for every thread of a block on machines without a GPU.
//
// The budget. To scan at HBM3's 3.35 TB/s (H100 SXM) the SMs must take 209 G
// 16-byte vectors a second; they retire about 16.7 T integer instructions a
// second (132 SMs x 64 INT32 lanes x 1.98 GHz), so a vector may cost at most
// 80 instructions, load and loop included. Counting every lane of every
// vector (order keys, nan, inf, zero, subnormal, three thresholds) cost about
// 74 PTX instructions per vector of fp16 and 146 of fp8, and measured 0.37 of
// the memory's rate on an H100. Floats now take a fast path (lanes::
// fast_fold): min and max per vector, two 16-bit lanes per instruction
// (min.u16x2/max.u16x2), and one test of the vector's least and greatest key
// that sends it to the lane-by-lane count only when it holds a zero, a
// subnormal, or a value at or above the lowest threshold (inf and nan
// included). Trained values rarely do. PTX per vector, as
// tests/integration/test_scan_kernel_ptx.py counts it (budget 40): fp16/bf16
// 24, fp8 40, fp32 18, fp64 18.
#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>
#include <type_traits>

#include "numerics/scan/cuda_scan_kernel.h"
#include "numerics/scan/cuda_scan_lanes.h"

namespace gpudiag::numerics::cuda_scan {

namespace {

using namespace lanes;

using BlockReduce = cub::BlockReduce<Flush, kThreads>;

// 3 blocks of 256 threads per SM: ptxas (CUDA 13, sm_90) gives 80 registers
// and no spills; asking for 4 caps it at 64 and spills on the 8-byte paths.
// 768 threads with four 16-byte loads each in flight is 48 KiB per SM, more
// than HBM's bandwidth-latency product per SM needs.
__global__ void __launch_bounds__(kThreads, 3)
    scan_segments(const Segment* segments, std::uint32_t n_segments, std::uint64_t total_tiles,
                  const ParamTable params, Accumulator* results) {
  __shared__ typename BlockReduce::TempStorage temp;
  const std::uint64_t per = (total_tiles + gridDim.x - 1) / gridDim.x;
  std::uint64_t t = blockIdx.x * per;
  const std::uint64_t t_end = min(total_tiles, t + per);
  if (t >= t_end) return;
  // The last segment starting at or before t (the sentinel is at n_segments).
  std::uint32_t s = 0, hi = n_segments;
  while (hi - s > 1) {
    const std::uint32_t mid = s + (hi - s) / 2;
    if (segments[mid].first_tile <= t) s = mid; else hi = mid;
  }
  while (t < t_end) {
    const Segment seg = segments[s];
    const std::uint64_t next = segments[s + 1].first_tile;
    const std::uint64_t run_end = min(min(t_end, next), t + kMaxTilesPerFlush);
    const Flush f = scan_dtype(seg, t - seg.first_tile, run_end - seg.first_tile, params.p[seg.dtype],
                              threadIdx.x);
    const Flush r = BlockReduce(temp).Reduce(f, MergeFlush());
    if (threadIdx.x == 0) {
      Accumulator* out = results + seg.tensor;
      atomicMax(reinterpret_cast<unsigned long long*>(&out->inv_lo), ~r.lo);
      atomicMax(reinterpret_cast<unsigned long long*>(&out->hi), r.hi);
      unsigned long long* counts = reinterpret_cast<unsigned long long*>(&out->nan);
#pragma unroll
      for (int k = 0; k < 8; ++k)
        if (r.c[k]) atomicAdd(counts + k, r.c[k]);
    }
    __syncthreads();  // temp is reused by the next reduction
    t = run_end;
    while (s + 1 < n_segments && segments[s + 1].first_tile <= t) ++s;
  }
}

const ParamTable& param_table() {
  static const ParamTable table = [] {
    ParamTable t{};
    for (DType d : kAllDTypes) t.p[static_cast<int>(d)] = params_for(d);
    return t;
  }();
  return table;
}

}  // namespace

int blocks_per_sm(std::string* error) {
  int n = 0;
  const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, scan_segments, kThreads, 0);
  if (e != cudaSuccess) {
    if (error) *error = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();
    return 0;
  }
  return n;
}

int launch(const Segment* segments, std::uint32_t n_segments, std::uint64_t total_tiles,
           Accumulator* results, int grid, void* stream) {
  if (total_tiles == 0 || n_segments == 0) return 0;
  scan_segments<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      segments, n_segments, total_tiles, param_table(), results);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace gpudiag::numerics::cuda_scan
