// The CUDA calls the NCCL communicator and the device workspace make, as a
// table of entry points, so unit tests can drive their control flow (a stream
// that never drains, a CUDA error mid-collective) without a GPU.
//
// Codes are cudaError_t values as int: 0 is success and 600
// (cudaErrorNotReady) means queued work is still running. cuda_ops() returns
// the real table in a CUDA build (over the statically linked runtime) and one
// whose every call fails with "built without CUDA" otherwise.
#pragma once

#include <cstddef>
#include <string>

#include "util/deadline.h"

namespace gpudiag {

struct CudaOps {
  static constexpr int kSuccess = 0;
  static constexpr int kNotReady = 600;
  static constexpr int kHostToDevice = 1;  ///< cudaMemcpyHostToDevice
  static constexpr int kDeviceToHost = 2;  ///< cudaMemcpyDeviceToHost
  int (*stream_query)(void* stream) = nullptr;
  int (*memcpy_async)(void* dst, const void* src, std::size_t bytes, int kind,
                      void* stream) = nullptr;
  int (*memset_async)(void* dst, int value, std::size_t bytes, void* stream) = nullptr;
  const char* (*error_name)(int code) = nullptr;
  const char* (*error_string)(int code) = nullptr;
  /// CUDA events, for timing work on a stream the way nccl-tests does.
  int (*event_create)(void** event) = nullptr;
  int (*event_destroy)(void* event) = nullptr;
  int (*event_record)(void* event, void* stream) = nullptr;
  int (*event_elapsed_ms)(float* ms, void* start, void* end) = nullptr;
  /// A stream gate (gpu/stream_gate.cu), so calls whose launch is slow
  /// (NCCL's launch thread) still run back to back on the device and events
  /// time only their kernels: gate_hold puts a kernel on `stream` that waits
  /// until gate_open, or until `cap_us` of device time passed (then
  /// gate_expired answers 1 once the stream drained: the figures include
  /// launch gaps). Null in a table without gates: callers then time ungated.
  int (*gate_create)(void** gate) = nullptr;
  int (*gate_destroy)(void* gate) = nullptr;
  int (*gate_hold)(void* gate, void* stream, unsigned cap_us) = nullptr;
  int (*gate_open)(void* gate) = nullptr;
  int (*gate_expired)(void* gate) = nullptr;
  /// Why the gate_* entries are null, where they are for a reason.
  const char* gate_absent_why = nullptr;
};

/// The runtime's table (or the no-CUDA one).
const CudaOps& cuda_ops();

/// "cudaErrorIllegalAddress (an illegal memory access was encountered)".
std::string cuda_error_text(const CudaOps& ops, int code);

/// Polls the stream until its work is done. Throws Error (ExitCode::broken)
/// on a CUDA error and TimeoutError when `deadline` passes; `what` names the
/// work in the message.
void wait_stream(const CudaOps& ops, void* stream, const std::string& what, Deadline deadline);

}  // namespace gpudiag
