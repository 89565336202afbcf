// The NCCL model's CUDA side (nccl_model.h): one virtual stream whose kernels
// run back to back, events that take the time at which the stream reaches
// them (cudaStreamQuery, cudaEventRecord, cudaEventElapsedTime:
// cudaErrorNotReady until both events completed), and the stream gate of
// gpu/stream_gate.cu, a kernel that holds the stream until opened or until
// its cap of device time has passed. A kernel waiting on the device for
// peers that never come (Impl::stuck) holds the stream until its
// communicator is aborted.
#include <algorithm>
#include <cstring>

#include "comm/nccl_model_impl.h"

namespace gpudiag {

using M = NcclModel::Impl;

void M::to_stream(double us) {
  ++kernels;
  if (gate_held && !gate_lapsed())
    held.push_back({us, host, nullptr});
  else
    tail = std::max(tail, host) + us;
}
/// The gate's kernel gave up by now (device time past its cap): what was
/// queued behind it runs from then on, each item no earlier than queued.
bool M::gate_lapsed() {
  if (!gate_held || host <= gate_start + gate_cap) return false;
  release(gate_start + gate_cap, true);
  return true;
}
void M::release(double at, bool expired) {
  gate_held = false;
  gate_expired = expired;
  tail = std::max(tail, at);
  for (Held& h : held) {
    tail = std::max(tail, h.enq) + h.us;
    if (h.ev) h.ev->t = tail;
  }
  held.clear();
}
/// The abort flag reaches the device (abortFlagDev): a kernel waiting there
/// for `c`'s peers ends, and what waited behind it runs.
void M::unstick(Comm& c) {
  if (stuck != &c) return;
  stuck = nullptr;
  tail = std::max(tail, host);
  for (Event* e : stuck_events) e->t = tail;
  stuck_events.clear();
}

namespace {

M& cuda_model() { return *M::current; }
#define LOCK std::lock_guard<std::recursive_mutex> lock(cuda_model().m)

int stream_query(void*) {
  LOCK;
  M& m = cuda_model();
  if (m.stuck || (m.gate_held && !m.gate_lapsed())) {
    m.host += 1;  // a kernel (the gate's, or one waiting for peers) holds the stream
    return CudaOps::kNotReady;
  }
  if (m.tail <= m.host) return CudaOps::kSuccess;
  m.host += std::max(1.0, (m.tail - m.host) / 4);
  return m.tail <= m.host ? CudaOps::kSuccess : CudaOps::kNotReady;
}
int memcpy_async(void* dst, const void* src, std::size_t bytes, int, void*) {
  LOCK;
  std::memmove(dst, src, bytes);  // host memory stands in for device memory
  cuda_model().to_stream(cuda_model().kernel_us(bytes));
  return CudaOps::kSuccess;
}
int memset_async(void* dst, int value, std::size_t bytes, void*) {
  LOCK;
  std::memset(dst, value, bytes);
  cuda_model().to_stream(cuda_model().kernel_us(bytes));
  return CudaOps::kSuccess;
}
const char* cuda_name(int e) {
  return e == CudaOps::kNotReady ? "cudaErrorNotReady" : "cudaErrorInvalidResourceHandle";
}
const char* cuda_text(int e) {
  return e == CudaOps::kNotReady ? "device not ready" : "invalid resource handle";
}
int ev_create(void** ev) {
  LOCK;
  cuda_model().events.emplace_back();
  *ev = &cuda_model().events.back();
  return CudaOps::kSuccess;
}
int ev_destroy(void*) { return CudaOps::kSuccess; }
int ev_record(void* ev, void*) {
  LOCK;
  M& m = cuda_model();
  auto* e = static_cast<M::Event*>(ev);
  m.host += 1;
  e->recorded = true;
  if (m.gate_held && !m.gate_lapsed()) {
    e->t = 1e300;  // not reached until the gate ends
    m.held.push_back({0, m.host, e});
    return CudaOps::kSuccess;
  }
  if (m.stuck) {
    e->t = 1e300;  // not reached until the stuck kernel ends
    m.stuck_events.push_back(e);
    return CudaOps::kSuccess;
  }
  e->t = std::max(m.host, m.tail);  // the stream reaches it after the work before it
  return CudaOps::kSuccess;
}
int gate_create(void** g) {
  *g = &cuda_model();
  return CudaOps::kSuccess;
}
int gate_destroy(void*) { return CudaOps::kSuccess; }
int gate_hold(void*, void*, unsigned cap_us) {
  LOCK;
  M& m = cuda_model();
  m.host += 1;
  m.gate_lapsed();
  if (m.gate_held) return 400;  // one gate, one hold at a time: a bug in the caller
  m.gate_held = true;
  m.gate_expired = false;
  m.gate_start = std::max(m.host, m.tail);  // it runs once the work before it is done
  m.gate_cap = cap_us;
  return CudaOps::kSuccess;
}
int gate_open(void*) {
  LOCK;
  M& m = cuda_model();
  m.host += 1;
  if (m.gate_held && !m.gate_lapsed()) m.release(std::max(m.gate_start, m.host), false);
  return CudaOps::kSuccess;
}
int gate_expired(void*) {
  LOCK;
  cuda_model().gate_lapsed();
  return cuda_model().gate_expired ? 1 : 0;
}
int ev_elapsed(float* ms, void* a, void* b) {
  LOCK;
  auto *x = static_cast<M::Event*>(a), *y = static_cast<M::Event*>(b);
  if (!x->recorded || !y->recorded) return 400;  // cudaErrorInvalidResourceHandle
  if (x->t > cuda_model().host || y->t > cuda_model().host) return CudaOps::kNotReady;
  *ms = static_cast<float>((y->t - x->t) / 1e3);
  return CudaOps::kSuccess;
}
#undef LOCK

}  // namespace

CudaOps model_cuda_table() {
  return CudaOps{stream_query, memcpy_async, memset_async, cuda_name,   cuda_text,
                 ev_create,    ev_destroy,   ev_record,    ev_elapsed,  gate_create,
                 gate_destroy, gate_hold,    gate_open,    gate_expired};
}

}  // namespace gpudiag
