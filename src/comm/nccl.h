// The NCCL backend: communicator creation and versions, behind a plain header.
//
// Creation is non-blocking (ncclCommInitRankConfig with blocking=0) and polled
// with ncclCommGetAsyncError against the deadline; on timeout, error or an
// abort_check reason the communicator is aborted (ncclCommAbort), never left
// hanging. Collectives are polled the same way, plus cudaStreamQuery.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"

namespace gpudiag {

struct NcclVersions {
  bool built_with_nccl = false;
  int compiled = 0;  ///< NCCL_VERSION_CODE, e.g. 22809
  int loaded = 0;    ///< ncclGetVersion() of the library actually loaded
};
NcclVersions nccl_versions();
/// 22809 -> "2.28.9".
std::string nccl_version_string(int code);

/// rank 0 makes the id; it travels to the others as a hex string.
std::string nccl_make_unique_id();

/// Joins the communicator of `size` ranks identified by `unique_id_hex`, on the
/// current CUDA device. Throws TimeoutError or Error (after aborting).
std::unique_ptr<Communicator> make_nccl_communicator(const std::string& unique_id_hex, int rank,
                                                     int size, Deadline deadline,
                                                     const AbortCheck& abort_check);

}  // namespace gpudiag
