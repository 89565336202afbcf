// A stream gate (stream_gate.h): hold() resets two words of mapped, pinned
// host memory and launches one thread that polls the first with volatile
// loads (each one reaches host memory over the bus) and a short nanosleep
// between polls, so it costs the GPU one warp slot and little bandwidth.
// open() stores 1 there; the kernel sees it within a poll and exits, and the
// work queued behind it starts. The kernel also reads %globaltimer and gives
// up after cap_us, writing 1 into the second word, so a host that never
// opens the gate (it died, or the work it queued waits on the device, e.g. a
// full NCCL work FIFO) cannot hold the stream for ever.
#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/stream_gate.h"

namespace gpudiag::stream_gate {

namespace {

struct Gate {
  unsigned* host = nullptr;  ///< [0] opened, [1] expired by the cap
  unsigned* dev = nullptr;   ///< the same words as the device sees them
};

__device__ std::uint64_t now_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void gate_kernel(volatile unsigned* words, std::uint64_t cap_ns) {
  const std::uint64_t t0 = now_ns();
  while (words[0] == 0) {
    if (now_ns() - t0 > cap_ns) {
      words[1] = 1;
      __threadfence_system();
      return;
    }
    __nanosleep(500);
  }
}

}  // namespace

int create(void** out) {
  *out = nullptr;
  auto* g = new Gate;
  void* p = nullptr;
  cudaError_t e = cudaHostAlloc(&p, 2 * sizeof(unsigned), cudaHostAllocMapped | cudaHostAllocPortable);
  if (e == cudaSuccess) {
    g->host = static_cast<unsigned*>(p);
    g->host[0] = 1;  // open until held
    g->host[1] = 0;
    void* d = nullptr;
    e = cudaHostGetDevicePointer(&d, p, 0);
    g->dev = static_cast<unsigned*>(d);
  }
  if (e != cudaSuccess) {
    if (p) cudaFreeHost(p);
    delete g;
    return e;
  }
  *out = g;
  return cudaSuccess;
}

int destroy(void* gate) {
  auto* g = static_cast<Gate*>(gate);
  if (!g) return cudaSuccess;
  const cudaError_t e = cudaFreeHost(g->host);
  delete g;
  return e;
}

int hold(void* gate, void* stream, unsigned cap_us) {
  auto* g = static_cast<Gate*>(gate);
  // The previous hold's kernel has ended (the caller drained the stream, or
  // opened the gate: a kernel still polling sees 1 until this store).
  __atomic_store_n(&g->host[1], 0u, __ATOMIC_RELAXED);
  __atomic_store_n(&g->host[0], 0u, __ATOMIC_RELEASE);
  gate_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(g->dev,
                                                              std::uint64_t(cap_us) * 1000);
  return cudaGetLastError();
}

int open(void* gate) {
  auto* g = static_cast<Gate*>(gate);
  __atomic_store_n(&g->host[0], 1u, __ATOMIC_RELEASE);
  return cudaSuccess;
}

int expired(void* gate) {
  auto* g = static_cast<Gate*>(gate);
  return __atomic_load_n(&g->host[1], __ATOMIC_ACQUIRE) ? 1 : 0;
}

}  // namespace gpudiag::stream_gate
