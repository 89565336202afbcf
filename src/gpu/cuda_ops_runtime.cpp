// cuda_ops.h over the CUDA runtime (linked statically). Under
// CUDA_LAUNCH_BLOCKING=1 (read once, as the runtime reads it) the table has
// no stream gate: every launch then returns only when its kernel has ended,
// so the gate's own launch would hold the host until the gate's cap.
#include <cuda_runtime.h>

#include "gpu/cuda_ops.h"
#include "gpu/stream_gate.h"
#include "util/env.h"

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
int ev_create(void** ev) {
  cudaEvent_t e = nullptr;
  const int rc = cudaEventCreate(&e);
  *ev = e;
  return rc;
}
int ev_destroy(void* ev) { return cudaEventDestroy(static_cast<cudaEvent_t>(ev)); }
int ev_record(void* ev, void* s) {
  return cudaEventRecord(static_cast<cudaEvent_t>(ev), static_cast<cudaStream_t>(s));
}
int ev_elapsed(float* ms, void* a, void* b) {
  return cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(a), static_cast<cudaEvent_t>(b));
}
const char* name(int e) { return cudaGetErrorName(static_cast<cudaError_t>(e)); }
const char* text(int e) { return cudaGetErrorString(static_cast<cudaError_t>(e)); }
static_assert(cudaErrorNotReady == CudaOps::kNotReady && cudaMemcpyHostToDevice == 1 &&
              cudaMemcpyDeviceToHost == 2);

CudaOps runtime_table() {
  CudaOps ops{query,      copy,         set,          name,
              text,       ev_create,    ev_destroy,   ev_record,
              ev_elapsed, stream_gate::create, stream_gate::destroy,
              stream_gate::hold,   stream_gate::open,    stream_gate::expired};
  if (Env::from_process().get("CUDA_LAUNCH_BLOCKING").value_or("0") == "1") {
    ops.gate_create = nullptr;
    ops.gate_absent_why = "no stream gate under CUDA_LAUNCH_BLOCKING=1";
  }
  return ops;
}

}  // namespace

const CudaOps& cuda_ops() {
  static const CudaOps ops = runtime_table();
  return ops;
}

}  // namespace gpudiag
