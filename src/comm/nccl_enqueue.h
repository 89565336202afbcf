// The parts of the NCCL communicator (nccl_comm.cpp) that need none of its
// state: handing one call to NCCL, and the CUDA events and stream gate its
// timed runs hold. nccl_enqueue() makes the one NCCL call (or group of sends
// and receives) a CollCall stands for and returns NCCL's answer as it is,
// ncclSuccess, ncclInProgress or an error: the polling, the failure text and
// the abort are the communicator's. Events and GateHold are owners that
// release on every way out, an exception included.
#pragma once

#include <string>
#include <vector>

#include "comm/collective.h"
#include "comm/nccl_api.h"
#include "gpu/cuda_ops.h"

namespace gpudiag {

/// Where a call goes: the communicator, its stream, this rank and the size.
struct NcclTarget {
  nccl_abi::CommHandle comm;
  void* stream;
  int rank, size;
};

/// One call with collective.h's buffer conventions. alltoall is
/// ncclAlltoAll where NCCL has it (2.28+), as nccl-tests' alltoall_perf,
/// else a group of sends and receives (block p to and from rank p);
/// sendrecv sends to the next rank and receives from the previous (or both
/// with c.peer). A group is always closed, even after a refused call, so
/// NCCL's thread-local group depth stays balanced.
nccl_abi::Result nccl_enqueue(const NcclApi& api, const CollCall& c, const NcclTarget& to);

/// Whether NCCL (`version`, 0 when unknown) puts `c`'s work on the stream
/// before the call returns at `size` ranks, decided from what is called,
/// never from NCCL's answer: a threaded launch may also have finished by
/// the call's trailing ncclCommGetAsyncError (a descheduled caller).
bool nccl_launches_inline(const NcclApi& api, int version, const CollCall& c, int size);

/// How many calls like `c` a gated batch may hold (at most `most`) without
/// filling NCCL's work FIFO, whose launches then wait on the device.
int nccl_gate_batch(const CollCall& c, int size, int most);

/// CUDA events for a timed batch, destroyed with the object.
class Events {
 public:
  Events(const CudaOps& cuda, int n) : cuda_(cuda), ev_(n, nullptr) {}
  ~Events() {
    for (void* e : ev_)
      if (e) cuda_.event_destroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  int create() {
    for (void*& e : ev_)
      if (int r = cuda_.event_create(&e); r != CudaOps::kSuccess) return r;
    return CudaOps::kSuccess;
  }
  int record(int i, void* stream) { return cuda_.event_record(ev_[i], stream); }
  int elapsed(float* ms, int i) { return cuda_.event_elapsed_ms(ms, ev_[i], ev_[i + 1]); }
  int size() const { return static_cast<int>(ev_.size()); }

 private:
  const CudaOps& cuda_;
  std::vector<void*> ev_;
};

/// Holds the stream behind a gate (gpu/stream_gate.cu) while a batch is
/// queued; opens on every way out.
class GateHold {
 public:
  GateHold(const CudaOps& cuda, void* gate) : cuda_(cuda), gate_(gate) {}
  ~GateHold() { open(); }
  GateHold(const GateHold&) = delete;
  GateHold& operator=(const GateHold&) = delete;
  void open() {
    if (gate_) cuda_.gate_open(gate_);
    gate_ = nullptr;
  }
  bool held() const { return gate_ != nullptr; }

 private:
  const CudaOps& cuda_;
  void* gate_;
};

}  // namespace gpudiag
