// The expected-bandwidth verdicts (expected_bw.h) on a finished job: what
// `gpudiag check`, `gpudiag bench` and `gpudiag bench --links` measured, with
// the GPU name, the number of hosts and the backend taken from the ranks'
// records, and the InfiniBand/RoCE port rate from rank 0's own sysfs (the
// fingerprint's reader, world/fingerprint.h): rank 0 is where the report is
// written, and a job's nodes are alike or the fingerprint says they differ.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checks/check.h"
#include "checks/links.h"
#include "report/expected_bw.h"

namespace gpudiag {

/// The compute fabric's ports, from read_ib_ports' values ("ACTIVE, 400
/// Gb/sec (4X NDR), InfiniBand"): only the ports NCCL may use (`ib_hca`, the
/// job's NCCL_IB_HCA, in NCCL's syntax: `^` excludes, `=` names exactly,
/// else device-name prefixes, each with an optional `:port`); InfiniBand
/// ports only where the host has any (an Ethernet port beside them serves
/// storage or the front end), else the RoCE ports; then the rate held by
/// most ACTIVE ports (ties: the higher) and how many hold it. A port of that
/// fabric that is not ACTIVE (sysfs then reports its lowest rate, not its
/// rated one) counts at that rate all the same and is named in `down`: a
/// port down is a finding the figure must show, not a lower bar.
struct RdmaPorts {
  int rate_gbps = 0;
  int ports = 0;  ///< ACTIVE at rate_gbps, plus `down`
  int down = 0;
};
RdmaPorts summarize_rdma(const std::map<std::string, std::string>& ib_ports,
                         const std::string& ib_hca = "");

/// Whether NCCL_IB_HCA's list (`spec`) lets NCCL use port `port` of device
/// `dev` (NCCL 2.28 src/transport/net_ib.cc ncclIbInitDevices with
/// src/misc/utils.cc parseStringList and matchIfList).
bool nccl_hca_allows(const std::string& spec, const std::string& dev, int port);

/// What every verdict of a job shares: GPU name (the most common among the
/// ranks), backend, hosts, RDMA ports (read under `sys_root` when the job
/// spans hosts, filtered by `ib_hca`: unset, NCCL_IB_HCA as rank 0 has it), the
/// fewest GPUs any host gives the job, and the --expect-busbw override.
BwMeasurement job_measurement(const CheckResult& result, std::optional<double> expect_override,
                              const std::string& sys_root = "/sys",
                              std::optional<std::string> ib_hca = std::nullopt);

/// check: the timed all-reduce (allreduce_bytes, the slowest rank's mean time).
BwVerdict check_busbw_verdict(const CheckResult& result, std::optional<double> expect_override,
                              const std::string& sys_root = "/sys",
                              std::optional<std::string> ib_hca = std::nullopt);

/// bench: the busbw measured at the largest swept size (`bytes`).
BwVerdict sweep_busbw_verdict(const CheckResult& result, double bytes, double busbw_gbps,
                              std::optional<double> expect_override,
                              const std::string& sys_root = "/sys",
                              std::optional<std::string> ib_hca = std::nullopt);

/// bench --links: the slowest link of each class (same host, across hosts)
/// against the link-pair figure of its class.
std::vector<BwVerdict> link_bw_verdicts(const CheckResult& result, const LinkVerdict& links,
                                        std::optional<double> expect_override,
                                        const std::string& sys_root = "/sys",
                                        std::optional<std::string> ib_hca = std::nullopt);

/// For the bench sweep's printer: the verdict on `busbw_gbps` measured at
/// `bytes` by `nodes` hosts of `gpu_name` GPUs, as one line after `prefix`:
/// "# Expected bus bandwidth : 360 GB/s (H100 SXM, ...) measured 312.4: PASS (87%)".
std::string expected_busbw_line(const std::string& gpu_name, int nodes, double busbw_gbps,
                                double bytes, const std::string& backend = "nccl",
                                std::optional<double> expect_override = std::nullopt,
                                std::string_view prefix = "# ");

}  // namespace gpudiag
