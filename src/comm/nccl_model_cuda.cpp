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

void M::to_stream(double us, bool coupled, double peers_ready, bool nccl) {
  ++kernels;
  if (gate_held && !gate_lapsed())
    held.push_back({us, host, nullptr, coupled, nccl});
  else
    tail = std::max({tail, host, coupled ? peers_ready : 0.0}) + us;
}
/// Each peer launches its copy on its own clock, one launch after another as
/// this rank does (src/group.cc groupLaunchNonBlocking: a thread a launch).
double M::peers_launch() {
  const std::size_t n = static_cast<std::size_t>(std::max(o.nranks - 1, 0));
  if (o.peer_launch_us.empty() || n == 0) return 0;
  peer_clock.resize(n, 0.0);
  double last = 0;
  for (std::size_t p = 0; p < n; ++p) {
    const double own = p < o.peer_launch_us.size() ? o.peer_launch_us[p] : o.launch_us;
    peer_clock[p] += own;
    last = std::max(last, peer_clock[p]);
  }
  return last;
}
/// A peer opens its own gate once its launches of the batch are done: its
/// clock, or `now` if that is later (it started no earlier than this rank).
double M::peers_open(double now) const {
  double last = now;
  for (double t : peer_clock) last = std::max(last, t);
  return last;
}
void M::peers_drained() {
  for (double& t : peer_clock) t = std::max(t, host);
}
/// The gate's kernel gave up by now (device time past its cap): what was
/// queued behind it runs from then on, each item no earlier than queued.
bool M::gate_lapsed() {
  if (!gate_held || host <= gate_start + gate_cap) return false;
  release(gate_start + gate_cap, true);
  return true;
}
/// The gate ends at `at`: what waited behind it runs, a collective's kernel
/// no earlier than its peers' gates opened (their copies are behind them; a
/// cap ends every gate at once).
void M::release(double at, bool expired) {
  gate_held = false;
  gate_expired = expired;
  tail = std::max(tail, at);
  const double peers = expired ? at : peers_open(at);
  for (Held& h : held) {
    tail = std::max({tail, h.enq, h.coupled ? peers : 0.0}) + h.us;
    if (h.ev) h.ev->t = tail;
  }
  held.clear();
}
/// NCCL's teardown waits for this communicator's work on the stream
/// (src/init.cc commReclaim -> commDestroySync: ncclStrongStreamSynchronize
/// of its deviceStream, which src/enqueue.cc ncclLaunchFinish advanced to
/// the user stream's finishedEvent after each launch): NCCL kernels queued
/// behind a held gate keep it there until the gate's cap has passed.
void M::wait_for_held_work() {
  if (!gate_held || gate_lapsed()) return;
  bool nccl = false;
  for (const Held& h : held) nccl = nccl || (h.us > 0 && h.nccl);
  if (!nccl) return;
  host = std::max(host, gate_start + gate_cap) + 1;
  gate_lapsed();
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
  if (m.tail > m.host) m.host += std::max(1.0, (m.tail - m.host) / 4);
  if (m.tail > m.host) return CudaOps::kNotReady;
  m.peers_drained();
  return CudaOps::kSuccess;
}
int memcpy_async(void* dst, const void* src, std::size_t bytes, int, void*) {
  LOCK;
  std::memmove(dst, src, bytes);  // host memory stands in for device memory
  cuda_model().to_stream(cuda_model().kernel_us(bytes), false, 0, false);
  return CudaOps::kSuccess;
}
int memset_async(void* dst, int value, std::size_t bytes, void*) {
  LOCK;
  std::memset(dst, value, bytes);
  cuda_model().to_stream(cuda_model().kernel_us(bytes), false, 0, false);
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
