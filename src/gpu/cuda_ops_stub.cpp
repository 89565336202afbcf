// cuda_ops.h for a build without CUDA: every call fails and says why.
#include "gpu/cuda_ops.h"

namespace gpudiag {

namespace {
constexpr int kNoCuda = 35;  // cudaErrorInsufficientDriver
int query(void*) { return kNoCuda; }
int copy(void*, const void*, std::size_t, int, void*) { return kNoCuda; }
int set(void*, int, std::size_t, void*) { return kNoCuda; }
int ev_create(void** ev) {
  *ev = nullptr;
  return kNoCuda;
}
int ev_destroy(void*) { return kNoCuda; }
int ev_record(void*, void*) { return kNoCuda; }
int ev_elapsed(float*, void*, void*) { return kNoCuda; }
const char* name(int) { return "no CUDA"; }
const char* text(int) { return "this gpudiag was built without CUDA"; }
}  // namespace

const CudaOps& cuda_ops() {
  static const CudaOps ops{query,     copy,       set,       name,
                           text,      ev_create,  ev_destroy, ev_record,
                           ev_elapsed};
  return ops;
}

}  // namespace gpudiag
