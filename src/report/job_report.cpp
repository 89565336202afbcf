#include "report/job_report.h"

#include <cstdio>
#include <set>

#include "checks/verify.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

std::string cell_seconds(const RankRecord& r, const char* phase) {
  auto it = r.seconds.find(phase);
  if (it == r.seconds.end()) return "-";
  if (!r.ok && r.failed_phase == phase) return "FAILED";
  return human_seconds(it->second);
}

std::string pad(const std::string& s, std::size_t w) {
  return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' ');
}

std::string status_cell(const RankRecord& r) {
  if (r.ok) return "OK";
  return std::string(r.timed_out ? "TIMEOUT" : "BROKEN") + " in " + r.failed_phase;
}

}  // namespace

bool job_ok(const CheckResult& result) {
  for (const auto& r : result.table)
    if (!r || !r->ok) return false;
  return true;
}

std::string versions_line(const CheckResult& result) {
  const auto& me = result.me;
  std::string s = "versions: backend=" + me.backend;
  if (me.backend == "nccl") {
    s += ", CUDA runtime " + me.cuda_runtime + ", driver " + me.cuda_driver + ", NCCL " +
         me.nccl_version + (me.nccl_path.empty() ? "" : " (" + me.nccl_path + ")");
  } else if (!me.backend_why.empty()) {
    s += " (" + me.backend_why + ")";
  }
  if (!me.mpi_version.empty()) s += ", MPI " + me.mpi_version;
  s += ", gpudiag " GPUDIAG_VERSION;
  return s + "\n";
}

std::string summary_table(const CheckResult& result) {
  const int n = static_cast<int>(result.table.size());
  int ok = 0;
  std::set<std::string> hosts;
  double slowest = 0;
  int slowest_rank = -1;
  for (const auto& r : result.table) {
    if (!r) continue;
    hosts.insert(r->host);
    if (r->ok) ++ok;
    if (r->allreduce_seconds > slowest) slowest = r->allreduce_seconds, slowest_rank = r->rank;
  }
  std::string out = "summary: " + std::to_string(ok) + "/" + std::to_string(n) + " ranks OK on " +
                    std::to_string(hosts.size()) + (hosts.size() == 1 ? " host" : " hosts") +
                    ", backend " + result.me.backend;
  if (slowest_rank >= 0) {
    const auto& r = *result.table[slowest_rank];
    char bw[64];
    std::snprintf(bw, sizeof bw, "%.2f GB/s",
                  allreduce_busbw_gbps(r.allreduce_bytes, r.allreduce_seconds, n));
    out += ", all-reduce " + human_bytes(static_cast<std::uint64_t>(r.allreduce_bytes)) +
           " busbw " + bw + " (slowest: rank " + std::to_string(slowest_rank) + ")";
  }
  out += "\n";
  const std::size_t w[] = {6, 14, 7, 14, 10, 10, 14, 12, 10};
  const char* head[] = {"rank", "host", "local", "gpu", "device", "exchange", "communicator",
                        "all-reduce", "barrier"};
  for (std::size_t i = 0; i < std::size(head); ++i) out += pad(head[i], w[i]);
  out += "status\n";
  for (int rank = 0; rank < n; ++rank) {
    const auto& r = result.table[rank];
    if (!r) {
      out += pad(std::to_string(rank), w[0]) + "(never reported: not started, or unreachable)\n";
      continue;
    }
    std::string gpu = !r->gpu_bus_id.empty() ? r->gpu_bus_id : r->backend == "nccl" ? "-" : "host";
    out += pad(std::to_string(rank), w[0]) + pad(r->host, w[1]) +
           pad(std::to_string(r->local_rank), w[2]) + pad(gpu, w[3]);
    for (std::size_t i = 4; i < std::size(head); ++i) out += pad(cell_seconds(*r, head[i]), w[i]);
    // A rank whose last record was fine but that vanished is not OK.
    std::string status = r->ok && result.last_seen[rank] != "barrier" ? "GONE" : status_cell(*r);
    if (result.last_seen[rank] != "barrier")
      status += " (last seen at " + (result.last_seen[rank].empty() ? std::string("start")
                                                                    : result.last_seen[rank]) + ")";
    out += status + "\n";
  }
  for (const auto& w : result.warnings) out += "warning: " + w + "\n";
  return out;
}

nlohmann::json job_json(const CheckResult& result) {
  nlohmann::json j;
  j["gpudiag"] = GPUDIAG_VERSION;
  j["ok"] = job_ok(result);
  j["world_size"] = result.table.size();
  j["backend"] = result.me.backend;
  j["launcher"] = result.me.launcher;
  j["warnings"] = result.warnings;
  auto& ranks = j["ranks"] = nlohmann::json::array();
  for (std::size_t r = 0; r < result.table.size(); ++r) {
    nlohmann::json row = result.table[r] ? nlohmann::json(*result.table[r]) : nlohmann::json{{"rank", r}, {"ok", false}, {"reason", "never reported"}};
    row["last_seen"] = result.last_seen[r];
    if (result.table[r] && result.table[r]->allreduce_seconds > 0)
      row["allreduce_busbw_gbps"] = allreduce_busbw_gbps(
          result.table[r]->allreduce_bytes, result.table[r]->allreduce_seconds,
          static_cast<int>(result.table.size()));
    row.erase("nccl_id");
    ranks.push_back(row);
  }
  return j;
}

}  // namespace gpudiag
