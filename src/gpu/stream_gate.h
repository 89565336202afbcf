// The real stream gate behind CudaOps::gate_* (cuda_ops.h): a one-thread
// kernel that spins on a word of mapped host memory, so the host can queue
// work behind it and release it all at once. Defined in stream_gate.cu.
#pragma once

namespace gpudiag::stream_gate {

int create(void** gate);
int destroy(void* gate);
int hold(void* gate, void* stream, unsigned cap_us);
int open(void* gate);
int expired(void* gate);

}  // namespace gpudiag::stream_gate
