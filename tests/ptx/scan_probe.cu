// Probe kernels for tests/integration/test_scan_kernel_ptx.py: the CUDA scan
// kernel's per-vector fast path (numerics/scan/cuda_scan_lanes.h, fast_fold) over
// N vectors, unrolled, for each element width. The test compiles this to PTX
// (nvcc -ptx, no GPU needed) and counts instructions: the difference between
// N = 9 and N = 1 is 8 vectors' worth, load and address arithmetic included.
#include "numerics/scan/cuda_scan_lanes.h"

using namespace gpudiag::numerics::cuda_scan::lanes;

template <class U, int N>
__device__ void probe(const uint4* in, Fast<Wide<U>>* out, unsigned* special, const Params p) {
  Fast<Wide<U>> f;
  bool sp = false;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const Vec16 v = load_vector(reinterpret_cast<std::uint64_t>(in + k * 256 + threadIdx.x));
    const std::uint32_t w[4] = {v.x, v.y, v.z, v.w};
    sp |= fast_fold<U>(f, w, false, p);
  }
  out[threadIdx.x] = f;
  special[threadIdx.x] = sp;
}

#define PROBE(name, U, N)                                                                    \
  extern "C" __global__ void name(const uint4* in, Fast<Wide<U>>* out, unsigned* special, \
                                  const Params p) {                                          \
    probe<U, N>(in, out, special, p);                                                         \
  }
PROBE(probe_2byte_1, std::uint16_t, 1)
PROBE(probe_2byte_9, std::uint16_t, 9)
PROBE(probe_1byte_1, std::uint8_t, 1)
PROBE(probe_1byte_9, std::uint8_t, 9)
PROBE(probe_4byte_1, std::uint32_t, 1)
PROBE(probe_4byte_9, std::uint32_t, 9)
PROBE(probe_8byte_1, std::uint64_t, 1)
PROBE(probe_8byte_9, std::uint64_t, 9)
