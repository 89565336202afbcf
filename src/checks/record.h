// What one rank tells the others at each checkpoint: who it is, which GPU it
// uses, how far it got, how long each phase took, and why it failed if it did.
// Serialised as JSON; the same object forms the rows of the job report.
#pragma once

#include <array>
#include <map>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "compute/result.h"
#include "world/fingerprint.h"

namespace gpudiag {

/// The phases of a check, in order.
inline constexpr const char* kPhases[] = {"device", "compute", "exchange", "communicator", "all-reduce",
                                          "barrier"};

/// Bounds on a record's hardware fields (a peer's record is a stranger's bytes).
inline constexpr std::size_t kMaxHwFindingKeys = 32;
inline constexpr std::size_t kMaxHardwareText = 1024;

struct RankRecord {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string host;
  int host_cpus = 0;  ///< online CPUs of the host (to see oversubscription)
  int pid = 0;
  std::string launcher;
  std::string backend;  ///< "nccl", "host/mpi", "host/tcp"
  std::string backend_why;

  int gpu_ordinal = -1;
  std::string gpu_name, gpu_bus_id, gpu_uuid;

  std::string phase;  ///< last phase this rank entered
  std::map<std::string, double> seconds;  ///< phase -> wall seconds
  bool ok = true;
  std::string failed_phase;
  std::string reason;       ///< one line: what failed and what to try
  bool timed_out = false;   ///< the failure was a wait that ran out
  /// The node's hardware evidence that failed this rank (hw/evidence.h):
  /// "Xid 79 (GPU fallen off the bus) on 0000:3b:00 at 12:03:44: reboot the
  /// node"; "" when its hardware did not fail it.
  std::string hardware;
  /// The node's hardware findings by "class/action" ("node/reboot": 1), for
  /// the metrics' gauge per class; at most kMaxHwFindingKeys entries.
  std::map<std::string, int> hw_findings;

  std::string nccl_id;      ///< the NCCL unique id this rank made (hex): rank 0's, a root's
  /// The bootstrap roots this rank initialises NCCL with (comm/nccl_roots.h):
  /// 1 is ncclCommInitRankConfig, more ncclCommInitRankScalable; 0 off NCCL.
  int nccl_roots = 0;
  std::string endpoint;     ///< host:port this rank listens on (host/tcp ring)

  std::string cuda_runtime, cuda_driver, nccl_version, mpi_version;
  std::string nccl_path;    ///< the libnccl.so.2 this rank loaded ("" none)
  std::string nccl_hostid;  ///< NCCL_HOSTID: NCCL's own idea of which host this is
  /// The GPU's multi-node NVLink domain, "<cluster uuid>/<clique>" (NVML,
  /// world/nvml.h), "" when it is in none or it is not known.
  std::string nvlink_domain;
  /// The GPU's NVLinks (world/nvlink_topology.h): "switch:18",
  /// "0000:3b:00.0=6,...", "none", "" unknown.
  std::string nvlink_peers;
  double allreduce_bytes = 0;
  double allreduce_seconds = 0;  ///< mean of the timed iterations
  /// gpudiag bench --links: median seconds per exchange of link_bytes with
  /// each rank (0 for itself and for ranks not measured).
  std::vector<double> links;
  double link_bytes = 0;
  std::string link_schedule;  ///< "rounds" or "serial"
  /// The compute phase's GEMM checksums and rate, and the exchange's
  /// comparison of them (compute/result.h).
  ComputeRecord compute;
  /// Sent at the exchange only (world/fingerprint.h); empty in later records.
  Fingerprint fingerprint;

  void fail(const std::string& in_phase, const std::string& why, bool timeout = false) {
    if (!ok) return;  // the first failure is the one that matters
    ok = false;
    failed_phase = in_phase;
    reason = why;
    timed_out = timeout;
  }
};

void to_json(nlohmann::json& j, const RankRecord& r);
void from_json(const nlohmann::json& j, RankRecord& r);

std::string encode(const RankRecord& r);
/// Throws gpudiag::Error if `s` is not a record (a foreign or corrupt peer).
RankRecord decode(const std::string& s);

}  // namespace gpudiag
