// Rank 0's job report. Every rank's verdict comes from rank_statuses (one
// place), so the summary's count, the table's status column and the JSON's
// "ok"/"status" fields always agree.
#include "report/job_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "checks/verify.h"
#include "comm/nccl_roots.h"
#include "report/compute_report.h"
#include "report/rank_status.h"
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

/// The table's status column: "OK", "TIMEOUT in all-reduce", "STOPPED by
/// rank 2 (in all-reduce)", "DEAD (killed by SIGKILL; last phase: ...)".
std::string status_cell(const RankStatus& s) {
  using Kind = RankStatus::Kind;
  switch (s.kind) {
    case Kind::ok: return "OK";
    case Kind::broken: return "BROKEN in " + s.failed_phase;
    case Kind::timeout: return "TIMEOUT in " + s.failed_phase;
    case Kind::stopped:
      return "STOPPED by rank " + std::to_string(*s.stopped_by) + " (in " + s.failed_phase + ")";
    case Kind::dead:
      return "DEAD (" + (s.death.empty() ? std::string() : s.death + "; ") + whereabouts(s) + ")";
    case Kind::gone: return "GONE (" + whereabouts(s) + ")";
    case Kind::missing: return "MISSING (" + whereabouts(s) + ")";
  }
  return "";
}

}  // namespace

bool job_ok(const CheckResult& result) {
  auto statuses = rank_statuses(result);
  return count_ok(statuses) == static_cast<int>(statuses.size());
}

std::string versions_line(const CheckResult& result) {
  return "versions: " + versions_text(result.me, result.store_unauthenticated) + "\n";
}

std::string versions_text(const RankRecord& me, const std::string& store_unauthenticated) {
  std::string s = "backend=" + me.backend;
  if (me.backend == "nccl") {
    s += ", CUDA runtime " + me.cuda_runtime + ", driver " + me.cuda_driver + ", NCCL " +
         me.nccl_version + (me.nccl_path.empty() ? "" : " (" + me.nccl_path + ")");
    // How the communicator starts: one bootstrap root or several (comm/nccl_roots.h).
    if (me.nccl_roots > 0) s += ", init " + describe_nccl_init(me.nccl_roots);
  } else if (!me.backend_why.empty()) {
    s += " (" + me.backend_why + ")";
  }
  if (!me.mpi_version.empty()) s += ", MPI " + me.mpi_version;
  // Said where a reader of the verdict sees it: with no job secret, a local
  // user could have written to the store this job met through.
  if (!store_unauthenticated.empty())
    s += ", store unauthenticated (" + store_unauthenticated + ")";
  return s + ", gpudiag " GPUDIAG_VERSION;
}

std::string summary_table(const CheckResult& result, int max_rows, const std::string& full_at) {
  const int n = static_cast<int>(result.table.size());
  const auto statuses = rank_statuses(result);
  std::set<std::string> hosts;
  double slowest = 0;
  int slowest_rank = -1;
  for (const auto& r : result.table) {
    if (!r) continue;
    hosts.insert(r->host);
    if (r->allreduce_seconds > slowest) slowest = r->allreduce_seconds, slowest_rank = r->rank;
  }
  std::string out = "summary: " + std::to_string(count_ok(statuses)) + "/" + std::to_string(n) +
                    " ranks OK on " + std::to_string(hosts.size()) +
                    (hosts.size() == 1 ? " host" : " hosts") + ", backend " + result.me.backend;
  if (slowest_rank >= 0) {
    const auto& r = *result.table[slowest_rank];
    char bw[64];
    std::snprintf(bw, sizeof bw, "%.2f GB/s",
                  allreduce_busbw_gbps(r.allreduce_bytes, r.allreduce_seconds, n));
    out += ", all-reduce " + human_bytes(static_cast<std::uint64_t>(r.allreduce_bytes)) +
           " busbw " + bw +
           (hosts.size() > 1 ? " (the job's: an all-reduce runs at its slowest link's pace and "
                               "cannot say which link; gpudiag bench --links names it)"
                             : "");
  }
  if (auto others = not_ok_phrase(statuses); !others.empty()) out += "; " + others;
  out += "\n";
  const std::size_t w[] = {6, 14, 7, 14, 10, 10, 10, 14, 12, 10};
  const char* head[] = {"rank", "host",     "local",        "gpu",        "device",
                        "compute", "exchange", "communicator", "all-reduce", "barrier"};
  // At scale: counts per state, then the rows that are not OK only.
  const bool short_form = max_rows > 0 && n > max_rows;
  if (short_form) {
    std::map<std::string, int> counts;
    for (const auto& s : statuses) ++counts[status_name(s.kind)];
    out += "ranks by state:";
    for (const auto& [name, count] : counts) out += " " + name + " " + std::to_string(count) + ",";
    out.back() = '\n';
  }
  for (std::size_t i = 0; i < std::size(head); ++i) out += pad(head[i], w[i]);
  out += "status\n";
  // Every row; at scale the causes first (dead, broken, missing ...), then
  // the ranks they stopped, kMaxProblemRows at most.
  std::vector<int> order;
  if (!short_form) {
    for (int rank = 0; rank < n; ++rank) order.push_back(rank);
  } else {
    for (int pass = 0; pass < 2; ++pass)
      for (int rank = 0; rank < n && static_cast<int>(order.size()) < kMaxProblemRows; ++rank)
        if (!statuses[rank].ok() && (statuses[rank].kind == RankStatus::Kind::stopped) == (pass == 1))
          order.push_back(rank);
  }
  for (int rank : order) {
    const auto& r = result.table[rank];
    if (!r) {
      out += pad(std::to_string(rank), w[0]) + status_cell(statuses[rank]) + "\n";
      continue;
    }
    std::string gpu = !r->gpu_bus_id.empty() ? r->gpu_bus_id : r->backend == "nccl" ? "-" : "host";
    out += pad(std::to_string(rank), w[0]) + pad(r->host, w[1]) +
           pad(std::to_string(r->local_rank), w[2]) + pad(gpu, w[3]);
    for (std::size_t i = 4; i < std::size(head); ++i) out += pad(cell_seconds(*r, head[i]), w[i]);
    out += status_cell(statuses[rank]) + "\n";
  }
  if (short_form) {
    const int ok = count_ok(statuses);
    const int hidden_problems = n - ok - static_cast<int>(order.size());
    out += "(" + std::to_string(n - static_cast<int>(order.size())) + " more rows: " +
           (hidden_problems ? std::to_string(hidden_problems) + " not OK, " : std::string()) +
           std::to_string(ok) + " OK; every rank's row " +
           (full_at.empty() ? std::string("with --table-file PATH or --json") : "in " + full_at) +
           ")\n";
  }
  for (const auto& w : result.warnings) out += "warning: " + w + "\n";
  return out;
}

nlohmann::json job_json(const CheckResult& result) {
  const auto statuses = rank_statuses(result);
  const int ok = count_ok(statuses);
  nlohmann::json j;
  j["gpudiag"] = GPUDIAG_VERSION;
  j["ok"] = ok == static_cast<int>(statuses.size());
  j["ranks_ok"] = ok;
  j["world_size"] = result.table.size();
  j["not_ok"] = not_ok_phrase(statuses);
  j["backend"] = result.me.backend;
  j["launcher"] = result.me.launcher;
  j["warnings"] = result.warnings;
  if (result.fingerprint.is_object()) j["fingerprint"] = result.fingerprint;
  j["store_authenticated"] = result.store_unauthenticated.empty();
  if (!result.store_unauthenticated.empty())
    j["store_unauthenticated_why"] = result.store_unauthenticated;
  const auto compute = compute_report(result);
  if (!compute.line.empty())
    j["compute"] = {{"line", compute.line.substr(0, compute.line.size() - 1)},
                    {"rates_judged", compute.rates_judged},
                    {"slow", compute.slow.size()}};
  auto& ranks = j["ranks"] = nlohmann::json::array();
  for (std::size_t r = 0; r < result.table.size(); ++r) {
    const auto& rec = result.table[r];
    const auto& s = statuses[r];
    nlohmann::json row = rec ? nlohmann::json(*rec) : nlohmann::json{{"rank", r}};
    // The verdict, not the rank's last record: a rank that said OK and then
    // died is not OK.
    row["ok"] = s.ok();
    row["status"] = status_name(s.kind);
    row["last_seen"] = result.last_seen[r];
    if (s.stopped_by) row["stopped_by"] = *s.stopped_by;
    if (s.vanished()) {
      row["phase"] = s.last_phase;  // what the others report as its last phase
      row["last_phase"] = s.last_phase;
      row["missed_checkpoint"] = s.missed_at;
      if (!s.death.empty()) row["death"] = s.death;
      if (row.value("reason", std::string()).empty())
        row["reason"] = (s.death.empty() ? "" : s.death + ", ") + whereabouts(s);
    }
    if (rec && rec->allreduce_seconds > 0)
      row["allreduce_busbw_gbps"] = allreduce_busbw_gbps(
          rec->allreduce_bytes, rec->allreduce_seconds, static_cast<int>(result.table.size()));
    if (rec) row["compute"] = compute_json(*rec, compute);
    row.erase("nccl_id");
    row.erase("fingerprint");  // compared at the exchange: the job-level "fingerprint"
    ranks.push_back(row);
  }
  return j;
}

}  // namespace gpudiag
