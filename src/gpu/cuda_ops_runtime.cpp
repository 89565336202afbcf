// cuda_ops.h over the CUDA runtime (linked statically).
#include <cuda_runtime.h>

#include "gpu/cuda_ops.h"

namespace gpudiag {

namespace {
int query(void* s) { return cudaStreamQuery(static_cast<cudaStream_t>(s)); }
int copy(void* dst, const void* src, std::size_t bytes, int kind, void* s) {
  return cudaMemcpyAsync(dst, src, bytes, static_cast<cudaMemcpyKind>(kind),
                         static_cast<cudaStream_t>(s));
}
int set(void* dst, int value, std::size_t bytes, void* s) {
  return cudaMemsetAsync(dst, value, bytes, static_cast<cudaStream_t>(s));
}
const char* name(int e) { return cudaGetErrorName(static_cast<cudaError_t>(e)); }
const char* text(int e) { return cudaGetErrorString(static_cast<cudaError_t>(e)); }
static_assert(cudaErrorNotReady == CudaOps::kNotReady && cudaMemcpyHostToDevice == 1 &&
              cudaMemcpyDeviceToHost == 2);
}  // namespace

const CudaOps& cuda_ops() {
  static const CudaOps ops{query, copy, set, name, text};
  return ops;
}

}  // namespace gpudiag
