// The compute check's GEMMs on the GPU behind a plain C++ header
// (compute_gemm.cu): gpudiag's own kernels, not cuBLAS, whose results change
// with its version and heuristics; a fixed kernel is what makes a checksum
// comparable between GPUs. bf16 and fp16 run on tensor cores (WMMA, fp32
// accumulation), fp32 on the CUDA cores with one fused multiply-add per k in
// order, which is the CPU's arithmetic bit for bit (compute/math.h).
#pragma once

#include <cstdint>
#include <memory>

#include "compute/math.h"
#include "util/deadline.h"

namespace gpudiag {

/// One precision's GEMM and checksum on the current GPU, its buffers and
/// inputs made once.
class GpuGemm {
 public:
  virtual ~GpuGemm() = default;
  /// Runs the GEMM (and, with `flip`, flips the test hook's bit of C) and
  /// reduces C to its checksum; returns the GEMM's seconds between CUDA
  /// events. Throws Error on a CUDA error, TimeoutError past `deadline`.
  virtual double run(std::uint64_t& checksum, bool flip, Deadline deadline) = 0;
};

/// n x n inputs (n a multiple of 16). Throws Error (no CUDA, no memory).
std::unique_ptr<GpuGemm> make_gpu_gemm(compute::Precision p, int n);

}  // namespace gpudiag
