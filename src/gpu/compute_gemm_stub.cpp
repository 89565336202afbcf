// compute_gemm.h for a build without CUDA: the host backend never asks.
#include "gpu/compute_gemm.h"
#include "util/error.h"

namespace gpudiag {

std::unique_ptr<GpuGemm> make_gpu_gemm(compute::Precision, int) {
  throw Error(ExitCode::broken, "the compute check's GPU kernels: this gpudiag was built without CUDA",
              "use --backend host, or a gpudiag built with CUDA");
}

}  // namespace gpudiag
