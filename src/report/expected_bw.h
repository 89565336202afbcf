// What the hardware should reach, and the verdict on what it did.
//
// The table is one small JSON file per GPU family under data/expected-bw/
// (its README describes the fields), compiled into the binary. A lookup goes
// from the GPU name CUDA reports ("NVIDIA H100 80GB HBM3") to the family whose
// `match` substrings it contains (and none of its `exclude` ones), then to a
// figure: within one node the family's intra-node figure; across nodes the
// per-NIC figure of the host's InfiniBand/RoCE port rate times the ports the
// job's GPUs can use (the compute-fabric ports, counted at the rate the
// ACTIVE ones share, a port DOWN included and named; at most one per GPU the
// job has on a node), capped by the intra-node figure (a ring
// crosses both), judged from kInterNodeJudgedFrom (two nodes approach their
// figure only at GiB sizes) unless the NIC's row says otherwise; across nodes of one multi-node NVLink domain (GB200/GB300 NVL72),
// the family's NVLink-domain figure. A measured bandwidth is then PASS, WARN below kWarnFraction of the
// figure or FAIL below kFailFraction. `--expect-busbw` replaces the table's
// figure. Without a GPU (the host backends) nothing here applies: the verdict
// says so and is never PASS. Below the family's `judged_from_bytes` the table
// gives no verdict (bandwidth is still rising with the size there).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

inline constexpr double kWarnFraction = 0.8;
inline constexpr double kFailFraction = 0.5;
/// Across nodes an all-reduce is judged from 1 GiB unless a NIC row says
/// otherwise: at 256 MiB two nodes are still well below their figure.
inline constexpr std::uint64_t kInterNodeJudgedFrom = std::uint64_t(1) << 30;

struct NicExpectation {
  int rate_gbps = 0;                   ///< port rate as sysfs reports it (Gb/s)
  double allreduce_busbw_per_nic = 0;  ///< GB/s
  double link_pair = 0;                ///< GB/s each way
  std::string source;
  /// The all-reduce size from which the figure holds (optional field).
  std::uint64_t judged_from_bytes = kInterNodeJudgedFrom;
};

/// `intra_node_mesh[]`: one node whose GPUs are joined pair by pair, with no
/// NVSwitch between (4-GPU HGX boards), by the NVLinks of each pair.
struct MeshExpectation {
  int links_per_pair = 0;
  std::string fabric;
  double allreduce_busbw = 0;  ///< 0: no figure for an all-reduce
  double link_pair = 0;        ///< GB/s each way
  std::string source;
};

/// One data/expected-bw/*.json file.
struct GpuFamily {
  std::string file;    ///< "h100-sxm.json"
  std::string family;  ///< "H100 SXM"
  std::vector<std::string> match, exclude;
  std::uint64_t judged_from_bytes = 0;
  std::string intra_fabric;
  double intra_allreduce_busbw = 0, intra_link_pair = 0;  ///< GB/s
  std::string intra_source;
  std::vector<NicExpectation> inter;  ///< by rate, ascending
  /// The file has `intra_node_mesh` (maybe empty): its intra_node figure is
  /// for GPUs behind NVSwitches, and a node NVML shows without them is
  /// judged by these rows, or has no figure.
  bool intra_needs_switch = false;
  std::vector<MeshExpectation> intra_mesh;
  /// `nvlink_domain`: ranks on several nodes of one multi-node NVLink domain
  /// (GB200/GB300 NVL72), optional.
  bool has_domain = false;
  std::string domain_fabric;
  double domain_allreduce_busbw = 0, domain_link_pair = 0;  ///< GB/s
  std::uint64_t domain_judged_from_bytes = 0;
  std::string domain_source;
};

/// Parses one file; throws gpudiag::Error naming the file and the field.
GpuFamily parse_gpu_family(const std::string& file, std::string_view json);

/// The compiled-in table, parsed once (a malformed file is a build-time bug:
/// the unit tests parse every file).
const std::vector<GpuFamily>& expected_bw_table();

/// The family of a GPU name (case-insensitive), or nullptr.
const GpuFamily* find_family(const std::vector<GpuFamily>& table, const std::string& gpu_name);

/// What was measured, and what the job looks like.
struct BwMeasurement {
  enum class Kind { allreduce, link_pair };
  Kind kind = Kind::allreduce;
  std::string gpu_name;  ///< as CUDA reports it ("" without a GPU)
  std::string backend;   ///< "nccl", "host/tcp", "host/mpi"
  /// allreduce: the job spans several nodes; link_pair: the pair does.
  bool across_nodes = false;
  /// Across nodes, every GPU of the job (allreduce) or pair is in one
  /// multi-node NVLink domain (NVML's fabric cluster and clique, as NCCL
  /// decides it): the family's nvlink_domain figures apply, not the NICs'.
  bool one_nvlink_domain = false;
  int rdma_rate_gbps = 0;  ///< the host's InfiniBand/RoCE port rate (0 unknown)
  int rdma_ports = 0;      ///< ports at that rate, the ones down included
  int rdma_ports_down = 0; ///< ... of which not ACTIVE: named in the basis
  /// The fewest GPUs any host gives the job (0 unknown): across nodes a
  /// node's ranks drive at most that many of its NICs.
  int gpus_per_node = 0;
  /// Rank 0's node as NVML shows it (world/nvlink_topology.h): known, all
  /// its job's GPUs behind NVSwitches, else the fewest NVLinks of a pair.
  bool nvlink_known = false, nvlink_switched = false;
  int nvlink_links_per_pair = 0;
  double bytes = 0;        ///< the size measured
  double gbps = 0;         ///< busbw (allreduce) or GB/s each way (link_pair)
  std::string what;        ///< link_pair: "rank 3 <-> rank 9", shown after the figure
  std::optional<double> expect_override;  ///< --expect-busbw, GB/s
  /// "ranks 0-3 share GPU 0000:1b:00.0 on node1" when ranks share a GPU
  /// (the table's figures are for one GPU per rank: no verdict then).
  std::string shared_gpu;
};

struct BwVerdict {
  /// PASS, WARN, FAIL; "none" (no figure for this hardware), "not applicable"
  /// (no GPU), "no verdict" (too small a size for the table's figure).
  std::string verdict;
  double expected_gbps = 0;  ///< 0 when there is none
  double measured_gbps = 0;
  int percent = 0;     ///< measured / expected, rounded
  std::string basis;   ///< "H100 SXM, NVLink 4 through NVSwitch, one node" or "--expect-busbw"
  std::string source;  ///< the figure's source, or why there is none
  std::string file;    ///< "data/expected-bw/h100-sxm.json" ("" none)
  std::string text;    ///< the one-line verdict (without a prefix)
  bool failed() const { return verdict == "FAIL"; }
};

/// The verdict on one measurement against `table`.
BwVerdict judge_bandwidth(const BwMeasurement& m, const std::vector<GpuFamily>& table);

/// "Expected bus bandwidth : 360 GB/s (...) measured 312.4: PASS (87%)" after
/// `prefix` ("# " in the bench's tables), with a newline.
std::string verdict_line(const BwVerdict& v, std::string_view prefix);

nlohmann::json verdict_json(const BwVerdict& v);

}  // namespace gpudiag
