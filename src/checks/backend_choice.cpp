// backend_choice.h: probes CUDA and loads NCCL once (both are cached by
// their modules), and decides.
#include "checks/backend_choice.h"

#include <spdlog/spdlog.h>

#include <vector>

#include "comm/nccl.h"
#include "gpu/cuda.h"
#include "util/strings.h"

namespace gpudiag {

void choose_backend(const CheckOptions& opt, const Env& env, const std::string& host,
                    RankRecord& me) {
  auto cuda = probe_cuda();
  const NcclLibrary& nccl = load_nccl(opt.nccl_lib);
  me.cuda_runtime = cuda_version_string(cuda.runtime_version);
  me.cuda_driver = cuda_version_string(cuda.driver_version);
  me.nccl_version = nccl_version_string(nccl.version);
  me.nccl_path = nccl.path;
  me.nccl_hostid = env.get("NCCL_HOSTID").value_or("");
  if (opt.backend == "nccl") {
    me.backend = "nccl";
    std::vector<std::string> missing;
    if (!cuda.usable) missing.push_back(cuda.error);
    if (!nccl.usable()) missing.push_back(nccl.error);
    me.backend_why = join(missing, "; and ");
  } else if (opt.backend == "host") {
    me.backend = host;
  } else if (cuda.usable && nccl.usable()) {
    me.backend = "nccl";
  } else {
    me.backend = host;
    me.backend_why = cuda.usable ? "GPU present but NCCL unusable: " + nccl.error
                                 : "no usable GPU: " + cuda.error;
    // Host memory and TCP are not what a GPU node is for: say so on every
    // node this happens on (its first local rank), not only on rank 0, so
    // an OK on host memory is never mistaken for a GPU that works.
    if (me.rank == 0 || me.local_rank == 0)
      spdlog::warn("--backend auto on {}: {}; using the {} backend on host memory (no GPU is "
                   "tested here)",
                   me.host, me.backend_why, host);
  }
}

}  // namespace gpudiag
