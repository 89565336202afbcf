#include "checks/record.h"

#include "util/error.h"

namespace gpudiag {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RankRecord, rank, world_size, local_rank, host, host_cpus, pid,
                                                launcher, backend, backend_why, gpu_ordinal,
                                                gpu_name, gpu_bus_id, gpu_uuid, phase, seconds, ok,
                                                failed_phase, reason, timed_out, nccl_id, endpoint,
                                                cuda_runtime, cuda_driver, nccl_version,
                                                mpi_version, nccl_path, nccl_hostid, allreduce_bytes,
                                                allreduce_seconds,
                                                links, link_bytes, link_schedule, fingerprint)

std::string encode(const RankRecord& r) { return nlohmann::json(r).dump(); }

RankRecord decode(const std::string& s) {
  try {
    return nlohmann::json::parse(s).get<RankRecord>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(ExitCode::broken, std::string("a peer sent a malformed record: ") + e.what(),
                "all ranks must run the same gpudiag version");
  }
}

}  // namespace gpudiag
