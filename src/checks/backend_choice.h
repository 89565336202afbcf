// Which backend a rank runs the check on, from --backend and what is usable
// here: CUDA (a GPU and a driver) and NCCL (the library the loader finds).
// --backend auto falls back to the host transport and says why on every
// node it happens on; --backend nccl keeps NCCL and records what is missing,
// for the device phase to fail with.
#pragma once

#include <string>

#include "checks/check.h"
#include "checks/record.h"

namespace gpudiag {

/// Fills `me`'s CUDA and NCCL versions, NCCL path and host id, `backend`
/// ("nccl" or `host_transport`'s name) and `backend_why`.
void choose_backend(const CheckOptions& opt, const Env& env, const std::string& host_transport,
                    RankRecord& me);

}  // namespace gpudiag
