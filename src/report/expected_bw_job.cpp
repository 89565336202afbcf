// Expected-bandwidth verdicts on a finished job (expected_bw_job.h). The
// measured figures are computed as the job's own reports compute them: the
// slowest rank's time sets a collective's bandwidth (checks/verify.h).
#include "report/expected_bw_job.h"

#include <algorithm>
#include <set>

#include "checks/verify.h"
#include "util/strings.h"
#include "world/fingerprint.h"
#include "world/fingerprint_compare.h"

namespace gpudiag {

RdmaPorts summarize_rdma(const std::map<std::string, std::string>& ib_ports) {
  std::map<int, int> by_rate;
  for (const auto& [port, value] : ib_ports) {
    if (!value.starts_with("ACTIVE, ")) continue;
    if (auto rate = parse_int(value.substr(8, value.find(' ', 8) - 8));
        rate && *rate > 0 && *rate < 100000)
      ++by_rate[static_cast<int>(*rate)];
  }
  RdmaPorts out;
  for (const auto& [rate, n] : by_rate)  // ascending: ties go to the higher rate
    if (n >= out.ports) out = {rate, n};
  return out;
}

BwMeasurement job_measurement(const CheckResult& result, std::optional<double> expect_override,
                              const std::string& sys_root) {
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
  // As NCCL decides it (ncclTopoCheckMNNVL): the same cluster and clique.
  m.one_nvlink_domain = m.across_nodes && every_rank_in_a_domain && domains.size() == 1;
  if (m.across_nodes) {
    const auto rdma = summarize_rdma(read_ib_ports(sys_root));
    m.rdma_rate_gbps = rdma.rate_gbps;
    m.rdma_ports = rdma.ports;
  }
  return m;
}

BwVerdict check_busbw_verdict(const CheckResult& result, std::optional<double> expect_override,
                              const std::string& sys_root) {
  BwMeasurement m = job_measurement(result, expect_override, sys_root);
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
                              std::optional<double> expect_override, const std::string& sys_root) {
  BwMeasurement m = job_measurement(result, expect_override, sys_root);
  m.bytes = bytes;
  m.gbps = busbw_gbps;
  return judge_bandwidth(m, expected_bw_table());
}

std::vector<BwVerdict> link_bw_verdicts(const CheckResult& result, const LinkVerdict& links,
                                        std::optional<double> expect_override,
                                        const std::string& sys_root) {
  BwMeasurement base = job_measurement(result, expect_override, sys_root);
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
    const auto rdma = summarize_rdma(read_ib_ports("/sys"));
    m.rdma_rate_gbps = rdma.rate_gbps;
    m.rdma_ports = rdma.ports;
  }
  return verdict_line(judge_bandwidth(m, expected_bw_table()), prefix);
}

}  // namespace gpudiag
