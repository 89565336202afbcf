// comm/nccl.h for a build without NCCL.
#include "comm/nccl.h"
#include "util/error.h"

namespace gpudiag {

NcclVersions nccl_versions() { return {}; }

std::string nccl_make_unique_id() {
  throw Error(ExitCode::broken, "this gpudiag was built without NCCL",
              "rebuild with NCCL found (set NCCL_HOME), or use --backend host");
}

std::unique_ptr<Communicator> make_nccl_communicator(const std::string&, int, int, Deadline,
                                                     const AbortCheck&) {
  nccl_make_unique_id();
  return nullptr;
}

}  // namespace gpudiag
