// The NCCL backend: communicator creation and collectives, behind a plain header.
//
// Creation is non-blocking (ncclCommInitRankConfig with blocking=0, or
// ncclCommInitRankScalable from several roots' ids) and polled
// with ncclCommGetAsyncError against the deadline; on timeout, error or an
// abort_check reason the communicator is aborted (ncclCommAbort) at once,
// never left spinning (nccl_init.cpp). Each collective is polled until NCCL
// has put it on the stream, then until it completed (nccl_comm.cpp).
// Every host<->device copy the check makes goes on the communicator's own
// stream, so NCCL reads what was uploaded and the host reads what NCCL wrote.
// NCCL and CUDA are reached through tables (nccl_api.h, gpu/cuda_ops.h), so
// unit tests drive this control flow with fakes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/nccl_api.h"
#include "gpu/cuda_ops.h"

namespace gpudiag {

/// What a communicator runs on. `owner` keeps the stream and scratch alive.
struct NcclContext {
  const NcclApi* nccl = nullptr;
  const CudaOps* cuda = nullptr;
  void* stream = nullptr;      ///< cudaStream_t shared with the device workspace
  float* scratch = nullptr;    ///< one float of device memory (the barrier's)
  std::shared_ptr<void> owner;
  double teardown_s = 10;      ///< how long ncclCommFinalize may take before an abort
};

/// A unique id (rank 0's, or a bootstrap root's: comm/nccl_roots.h); it
/// travels to the others as a hex string.
std::string nccl_make_unique_id(const NcclApi& nccl);

/// Joins the communicator of `size` ranks identified by `unique_id_hex`, on the
/// current CUDA device. Throws TimeoutError or Error (after aborting).
std::unique_ptr<Communicator> make_nccl_communicator(const NcclContext& ctx,
                                                     const std::string& unique_id_hex, int rank,
                                                     int size, Deadline deadline,
                                                     const AbortCheck& abort_check);
/// The same from the ids of several bootstrap roots, in root order, the same
/// on every rank: one id is ncclCommInitRankConfig, more are
/// ncclCommInitRankScalable (NCCL 2.23; an Error, before any call, where the
/// library lacks it).
std::unique_ptr<Communicator> make_nccl_communicator(const NcclContext& ctx,
                                                     const std::vector<std::string>& root_ids_hex,
                                                     int rank, int size, Deadline deadline,
                                                     const AbortCheck& abort_check);

/// The communicator around `comm`, a communicator NCCL finished creating
/// (nccl_comm.cpp); make_nccl_communicator() calls it.
std::unique_ptr<Communicator> wrap_nccl_communicator(const NcclContext& ctx,
                                                     nccl_abi::CommHandle comm, int rank,
                                                     int size);

/// A device workspace whose copies go on `stream` and are waited for there.
std::unique_ptr<Workspace> make_device_workspace(const CudaOps& cuda, void* stream,
                                                 std::shared_ptr<void> owner);

/// What to try after NCCL returned `result`, from its last error text and
/// this host's /dev/shm size (0 = unknown): the likely causes, in order.
std::string nccl_remedy(int result, const std::string& last_error,
                        std::uint64_t dev_shm_bytes);

/// NCCL's last error as a failure may quote it. ncclGetLastError is one text
/// for the whole process (src/debug.cc ncclLastError: every WARN of any
/// thread or communicator writes it and nothing clears it; src/init.cc
/// ncclGetLastError ignores its argument), so it may be an older failure's.
/// A failure reads it right after the failing call and compares it with the
/// text read just before the call (nccl_last_error_now).
struct NcclLastError {
  std::string text;
  bool fresh = false;  ///< changed since just before the call: likely this failure's
};
std::string nccl_last_error_now(const NcclApi& nccl);
NcclLastError nccl_last_error(const NcclApi& nccl, const std::string& before);
/// "<NCCL's text for the result>: <last error>" when fresh; else NCCL's text
/// and, named as such, "NCCL's last error (process-wide)", which may be stale.
std::string nccl_failure_text(const NcclApi& nccl, int result, const NcclLastError& last);
/// nccl_remedy from a fresh last error only: a stale one would send the user
/// after another failure's cause.
std::string nccl_failure_remedy(int result, const NcclLastError& last);

/// The size of /dev/shm here (0 when it cannot be read).
std::uint64_t dev_shm_bytes();

}  // namespace gpudiag
