// Expected-bandwidth verdicts on a finished job (expected_bw_job.h). The
// measured figures are computed as the job's own reports compute them: the
// slowest rank's time sets a collective's bandwidth (checks/verify.h).
#include "report/expected_bw_job.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "checks/verify.h"
#include "util/strings.h"
#include "world/fingerprint.h"
#include "world/fingerprint_compare.h"
#include "world/nvlink_topology.h"

namespace gpudiag {

bool nccl_hca_allows(const std::string& spec_in, const std::string& dev, int port) {
  std::string_view spec = spec_in;
  const bool exclude = spec.starts_with('^');
  if (exclude) spec.remove_prefix(1);
  const bool exact = spec.starts_with('=');
  if (exact) spec.remove_prefix(1);
  bool listed = false, any = false;
  for (const auto& item : split(std::string(spec), ',')) {
    if (item.empty()) continue;
    any = true;
    const auto colon = item.find(':');
    const std::string name = item.substr(0, colon);
    int want_port = -1;  // no port named: any port
    if (colon != std::string::npos)
      if (auto p = parse_int(item.substr(colon + 1)); p && *p >= 0 && *p < 65536)
        want_port = static_cast<int>(*p);
    const bool name_ok = exact ? dev == name : dev.starts_with(name);
    if (name_ok && (want_port == -1 || want_port == port)) listed = true;
  }
  if (!any) return true;  // "an exception for the case where no user list is defined"
  return listed != exclude;
}

RdmaPorts summarize_rdma(const std::map<std::string, std::string>& ib_ports,
                         const std::string& ib_hca) {
  struct Port {
    int rate;
    bool infiniband;
  };
  std::vector<Port> usable;
  std::vector<bool> down;  ///< not ACTIVE: InfiniBand or not
  for (const auto& [key, value] : ib_ports) {
    const bool active = value.starts_with("ACTIVE, ");
    // key "ib.mlx5_0/1": device and port as NCCL_IB_HCA names them.
    const auto slash = key.rfind('/');
    const std::string dev = key.substr(3, slash == std::string::npos ? std::string::npos : slash - 3);
    const auto port = slash == std::string::npos ? std::nullopt : parse_int(key.substr(slash + 1));
    if (!ib_hca.empty() && !nccl_hca_allows(ib_hca, dev, port ? static_cast<int>(*port) : -1))
      continue;
    if (!active) {
      down.push_back(value.ends_with(", InfiniBand"));
      continue;
    }
    if (auto rate = parse_int(value.substr(8, value.find(' ', 8) - 8));
        rate && *rate > 0 && *rate < 100000)
      usable.push_back({static_cast<int>(*rate), value.ends_with(", InfiniBand")});
  }
  const bool any_ib = std::any_of(usable.begin(), usable.end(), [](auto& p) { return p.infiniband; });
  std::map<int, int> by_rate;
  for (const auto& p : usable)
    if (p.infiniband || !any_ib) ++by_rate[p.rate];
  RdmaPorts out;
  for (const auto& [rate, n] : by_rate)  // ascending: ties go to the higher rate
    if (n >= out.ports) out = {rate, n};
  if (out.rate_gbps > 0)
    for (bool ib : down)
      if (ib || !any_ib) ++out.down;
  out.ports += out.down;
  return out;
}

BwMeasurement job_measurement(const CheckResult& result, std::optional<double> expect_override,
                              const std::string& sys_root, std::optional<std::string> ib_hca) {
  BwMeasurement m;
  m.backend = result.me.backend;
  m.expect_override = expect_override;
  std::map<std::string, int> names;
  std::set<std::string> hosts, domains;
  bool every_rank_in_a_domain = true;
  std::map<std::pair<std::string, std::string>, std::vector<int>> by_gpu;  // (host, GPU) -> ranks
  for (const auto& r : result.table) {
    if (!r) continue;
    hosts.insert(r->host);
    domains.insert(r->nvlink_domain);
    every_rank_in_a_domain = every_rank_in_a_domain && !r->nvlink_domain.empty();
    if (!r->gpu_name.empty()) ++names[r->gpu_name];
    const std::string gpu = !r->gpu_uuid.empty() ? r->gpu_uuid : r->gpu_bus_id;
    if (!gpu.empty()) by_gpu[{r->host, gpu}].push_back(r->rank);
  }
  for (const auto& [where, ranks] : by_gpu) {
    if (ranks.size() < 2) continue;
    const auto& r = *result.table[ranks.front()];
    m.shared_gpu = "ranks " + compress_ranks(ranks) + " share GPU " +
                   (r.gpu_bus_id.empty() ? where.second : r.gpu_bus_id) + " on " + where.first;
    break;
  }
  int best = 0;
  for (const auto& [name, n] : names)
    if (n > best) m.gpu_name = name, best = n;
  m.across_nodes = hosts.size() > 1;
  // The fewest GPUs a host gives the job: each NIC NCCL uses across nodes
  // serves the GPUs near it, so a node's ranks use at most that many NICs.
  std::map<std::string, int> gpus_on;
  for (const auto& [where, ranks] : by_gpu) ++gpus_on[where.first];
  for (const auto& r : result.table)
    if (r && r->gpu_uuid.empty() && r->gpu_bus_id.empty()) ++gpus_on[r->host];  // unnamed: one each
  for (const auto& [host, n] : gpus_on)
    m.gpus_per_node = m.gpus_per_node == 0 ? n : std::min(m.gpus_per_node, n);
  // Rank 0's node's NVLinks, between the GPUs the job has there.
  std::map<std::string, std::string> peers;
  for (const auto& r : result.table)
    if (r && result.table[0] && r->host == result.table[0]->host && !r->gpu_bus_id.empty())
      peers[r->gpu_bus_id] = r->nvlink_peers;
  const NvlinkPairs topo = nvlink_pairs(peers);
  m.nvlink_known = topo.known;
  m.nvlink_switched = topo.switched;
  m.nvlink_links_per_pair = topo.links_per_pair;
  // As NCCL decides it (ncclTopoCheckMNNVL): the same cluster and clique.
  m.one_nvlink_domain = m.across_nodes && every_rank_in_a_domain && domains.size() == 1;
  if (m.across_nodes) {
    if (!ib_hca) {
      const char* env = std::getenv("NCCL_IB_HCA");
      ib_hca = env ? std::string(env).substr(0, 4096) : std::string();
    }
    const auto rdma = summarize_rdma(read_ib_ports(sys_root), *ib_hca);
    m.rdma_rate_gbps = rdma.rate_gbps;
    m.rdma_ports = rdma.ports;
    m.rdma_ports_down = rdma.down;
  }
  return m;
}

BwVerdict check_busbw_verdict(const CheckResult& result, std::optional<double> expect_override,
                              const std::string& sys_root, std::optional<std::string> ib_hca) {
  BwMeasurement m = job_measurement(result, expect_override, sys_root, std::move(ib_hca));
  const std::optional<RankRecord>* slowest = nullptr;
  for (const auto& r : result.table)
    if (r && r->allreduce_seconds > 0 &&
        (!slowest || r->allreduce_seconds > (*slowest)->allreduce_seconds))
      slowest = &r;
  if (slowest) {
    m.bytes = (*slowest)->allreduce_bytes;
    m.gbps = allreduce_busbw_gbps(m.bytes, (*slowest)->allreduce_seconds,
                                  static_cast<int>(result.table.size()));
  }
  return judge_bandwidth(m, expected_bw_table());
}

BwVerdict sweep_busbw_verdict(const CheckResult& result, double bytes, double busbw_gbps,
                              std::optional<double> expect_override, const std::string& sys_root,
                              std::optional<std::string> ib_hca) {
  BwMeasurement m = job_measurement(result, expect_override, sys_root, std::move(ib_hca));
  m.bytes = bytes;
  m.gbps = busbw_gbps;
  return judge_bandwidth(m, expected_bw_table());
}

std::vector<BwVerdict> link_bw_verdicts(const CheckResult& result, const LinkVerdict& links,
                                        std::optional<double> expect_override,
                                        const std::string& sys_root,
                                        std::optional<std::string> ib_hca) {
  BwMeasurement base = job_measurement(result, expect_override, sys_root, std::move(ib_hca));
  base.kind = BwMeasurement::Kind::link_pair;
  for (const auto& r : result.table)
    if (r && r->link_bytes > 0) base.bytes = r->link_bytes;
  std::vector<BwVerdict> out;
  for (const bool same_host : {true, false}) {
    const LinkSpeed* slowest = nullptr;
    for (const auto& l : links.links)
      if (l.same_host == same_host && (!slowest || l.gbps < slowest->gbps)) slowest = &l;
    if (!slowest) continue;
    BwMeasurement m = base;
    m.across_nodes = !same_host;
    m.gbps = slowest->gbps;
    m.what = std::string(same_host ? "slowest pair on one host" : "slowest pair across hosts") +
             ": rank " + std::to_string(slowest->a) + " <-> rank " + std::to_string(slowest->b);
    out.push_back(judge_bandwidth(m, expected_bw_table()));
  }
  return out;
}

std::string expected_busbw_line(const std::string& gpu_name, int nodes, double busbw_gbps,
                                double bytes, const std::string& backend,
                                std::optional<double> expect_override, std::string_view prefix) {
  BwMeasurement m;
  m.gpu_name = gpu_name;
  m.backend = backend;
  m.across_nodes = nodes > 1;
  m.bytes = bytes;
  m.gbps = busbw_gbps;
  m.expect_override = expect_override;
  if (m.across_nodes) {
    const char* hca = std::getenv("NCCL_IB_HCA");
    const auto rdma = summarize_rdma(read_ib_ports("/sys"), hca ? std::string(hca).substr(0, 4096) : "");
    m.rdma_rate_gbps = rdma.rate_gbps;
    m.rdma_ports = rdma.ports;
  }
  return verdict_line(judge_bandwidth(m, expected_bw_table()), prefix);
}

}  // namespace gpudiag
