#include "checks/verdict.h"

#include "world/fingerprint_compare.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "comm/nccl_roots.h"
#include "util/strings.h"

namespace gpudiag {

std::string rank_label(const RankRecord& r) {
  return "rank " + std::to_string(r.rank) + " [" + r.host + "-" + std::to_string(r.local_rank) +
         "]";
}

std::string rank_label(int rank, const std::optional<RankRecord>& known) {
  return known ? rank_label(*known) : "rank " + std::to_string(rank);
}

namespace {

std::string ranks_list(const std::vector<int>& ranks) {
  std::vector<std::string> s;
  for (int r : ranks) s.push_back(std::to_string(r));
  return (ranks.size() == 1 ? "rank " : "ranks ") + join(s, ",");
}

/// Groups ranks by `key`; returns a description when there is more than one group.
template <class Key>
std::optional<std::string> disagreement(const std::vector<std::optional<RankRecord>>& table,
                                        const char* what, Key key) {
  std::map<std::string, std::vector<int>> groups;
  for (const auto& r : table)
    if (r) groups[key(*r)].push_back(r->rank);
  if (groups.size() < 2) return std::nullopt;
  std::vector<std::string> parts;
  for (const auto& [value, ranks] : groups) parts.push_back(ranks_list(ranks) + " " + value);
  return std::string(what) + " differ between ranks: " + join(parts, "; ");
}

}  // namespace

std::vector<std::string> exchange_conflicts(const std::vector<std::optional<RankRecord>>& table) {
  std::vector<std::string> out;
  if (auto d = disagreement(table, "world sizes", [](const RankRecord& r) {
        return "say " + std::to_string(r.world_size);
      }))
    out.push_back(*d + "; every rank must be started with the same WORLD_SIZE");
  if (auto d = disagreement(table, "backends", [](const RankRecord& r) {
        return "use " + r.backend + (r.backend_why.empty() ? "" : " (" + r.backend_why + ")");
      }))
    out.push_back(*d + "; pass the same --backend to all, or fix the GPU-less ranks");
  // NCCL needs the same ids on every rank: ranks that plan other roots
  // (another NCCL, another GPUDIAG_NCCL_ROOTS) would hang in its bootstrap.
  std::vector<std::optional<RankRecord>> nccl;
  for (const auto& r : table)
    if (r && r->backend == "nccl" && r->nccl_roots > 0) nccl.push_back(r);
  if (auto d = disagreement(nccl, "NCCL bootstrap roots", [](const RankRecord& r) {
        return "plan " + describe_nccl_init(r.nccl_roots);
      }))
    out.push_back(*d + "; run one NCCL and one GPUDIAG_NCCL_ROOTS on every rank, or "
                       "GPUDIAG_NCCL_ROOTS=1 for one root");
  // Two ranks on one GPU is an error for NCCL, unless they give NCCL distinct
  // NCCL_HOSTIDs: then NCCL treats each as a host of its own and connects
  // them over its network transport (a way to test that path on one GPU).
  std::map<std::string, std::vector<int>> by_gpu;
  for (const auto& r : table)
    if (r && !r->gpu_uuid.empty())
      by_gpu[r->host + " " + r->gpu_uuid + " " + r->nccl_hostid].push_back(r->rank);
  for (const auto& [key, ranks] : by_gpu) {
    if (ranks.size() < 2) continue;
    const auto& first = *table[ranks[0]];
    out.push_back(ranks_list(ranks) + " share GPU " + first.gpu_bus_id + " on " + first.host +
                  (first.nccl_hostid.empty() ? "" : " with one NCCL_HOSTID") +
                  "; give each rank its own GPU (check LOCAL_RANK and CUDA_VISIBLE_DEVICES), or "
                  "to test NCCL's network path on one GPU give each rank its own NCCL_HOSTID");
  }
  return out;
}

std::vector<std::string> shared_gpu_notes(const std::vector<std::optional<RankRecord>>& table) {
  std::map<std::string, std::vector<int>> by_gpu;
  std::map<std::string, std::set<std::string>> hostids;
  for (const auto& r : table)
    if (r && !r->gpu_uuid.empty()) {
      by_gpu[r->host + " " + r->gpu_uuid].push_back(r->rank);
      hostids[r->host + " " + r->gpu_uuid].insert(r->nccl_hostid);
    }
  std::vector<std::string> out;
  for (const auto& [key, ranks] : by_gpu) {
    if (hostids[key].size() < 2) continue;
    const auto& first = *table[ranks[0]];
    out.push_back(ranks_list(ranks) + " share GPU " + first.gpu_bus_id + " on " + first.host +
                  " with distinct NCCL_HOSTIDs: NCCL treats each as its own host and connects "
                  "them over its network transport, so this tests that path, not NVLink or PCIe "
                  "between GPUs");
  }
  return out;
}

std::vector<std::string> version_differences(const std::vector<std::optional<RankRecord>>& table) {
  std::vector<std::string> out;
  auto add = [&](const char* what, auto key) {
    if (auto d = disagreement(table, what, key)) out.push_back(*d);
  };
  add("NCCL versions", [](const RankRecord& r) { return r.nccl_version; });
  add("NCCL libraries", [](const RankRecord& r) { return r.nccl_path; });
  add("CUDA driver versions", [](const RankRecord& r) { return r.cuda_driver; });
  add("MPI libraries", [](const RankRecord& r) { return r.mpi_version; });
  return out;
}

std::string one_line(const std::vector<std::string>& problems) {
  if (problems.empty()) return {};
  std::string s = problems.front();
  if (problems.size() > 1) s += " (+" + std::to_string(problems.size() - 1) + " more)";
  for (auto& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

namespace {

template <class Table>
std::vector<std::string> oversubscribed_in(const Table& table) {
  std::map<std::string, std::pair<int, int>> hosts;  // host -> ranks, CPUs
  for (const auto& r : table) {
    if (!r) continue;
    auto& [ranks, cpus] = hosts[r->host];
    ++ranks;
    cpus = std::max(cpus, r->host_cpus);
  }
  std::vector<std::string> out;
  for (const auto& [host, rc] : hosts)
    if (rc.second > 0 && rc.first > rc.second)
      out.push_back(host + ": " + std::to_string(rc.first) + " ranks on " +
                    std::to_string(rc.second) + " CPUs");
  return out;
}

}  // namespace

std::vector<std::string> oversubscribed_hosts(const std::vector<std::optional<RankRecord>>& table) {
  return oversubscribed_in(table);
}

std::vector<std::string> oversubscribed_hosts(const RankSlots<std::optional<RankRecord>>& table) {
  return oversubscribed_in(table);
}

CheckpointReview review_table(const std::vector<std::optional<RankRecord>>& now,
                              const std::vector<std::optional<RankRecord>>& before,
                              const std::vector<int>& missing, bool exchange) {
  return review_table(
      now,
      [&before](int r) -> const RankRecord* {
        return r >= 0 && r < static_cast<int>(before.size()) && before[r] ? &*before[r] : nullptr;
      },
      missing, exchange);
}

CheckpointReview review_table(const std::vector<std::optional<RankRecord>>& now,
                              const std::function<const RankRecord*(int)>& before,
                              const std::vector<int>& missing, bool exchange) {
  CheckpointReview out;
  for (const auto& r : now) {
    if (!r || r->ok) continue;
    if (out.failures.size() < kReviewNames)
      out.failures.emplace_back(r->rank,
                                rank_label(*r) + " failed in " + r->failed_phase + ": " + r->reason);
    ++out.failed;
  }
  for (std::size_t i = 0; i < missing.size() && i < kReviewNames; ++i) {
    const int r = missing[i];
    if (const RankRecord* b = before ? before(r) : nullptr) out.labels.emplace_back(r, rank_label(*b));
  }
  if (exchange) {
    out.conflicts = exchange_conflicts(now);
    out.warnings = version_differences(now);
    for (auto& w : shared_gpu_notes(now)) out.warnings.push_back(w);
    if (out.warnings.size() > kReviewNames) {
      const auto more = out.warnings.size() - kReviewNames;
      out.warnings.resize(kReviewNames);
      out.warnings.push_back("(" + std::to_string(more) + " more warnings in rank 0's log)");
    }
    out.oversubscribed = !oversubscribed_hosts(now).empty();
    std::vector<RankPrint> prints;
    for (const auto& r : now)
      if (r) prints.push_back({r->rank, r->host, &r->fingerprint});
    const auto compared = compare_fingerprints(prints);
    for (auto& line : gpudiag::broken_lines(compared)) out.conflicts.push_back(line);
    out.fingerprint = comparison_json(compared);
    out.nccl_ids = root_ids_in(now);
    for (const auto& r : now)
      if (r) tally_compute(out.compute, r->compute);
    bound_compute(out.compute);
  }
  return out;
}

std::string encode_review(const CheckpointReview& r) {
  nlohmann::json j;
  j["failures"] = r.failures;
  j["failed"] = r.failed;
  j["conflicts"] = r.conflicts;
  j["warnings"] = r.warnings;
  j["oversubscribed"] = r.oversubscribed;
  j["labels"] = r.labels;
  j["fingerprint"] = r.fingerprint;
  if (!r.fingerprint_summary.is_null()) j["fingerprint_summary"] = r.fingerprint_summary;
  if (!r.nccl_ids.empty()) {
    auto ids = nlohmann::json::array();
    for (const auto& e : r.nccl_ids) ids.push_back(nlohmann::json::array({e.rank, e.roots, e.id}));
    j["nccl_ids"] = std::move(ids);
  }
  if (!r.compute.empty()) j["compute"] = compute_tallies_json(r.compute);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

CheckpointReview decode_review(const std::string& text) {
  auto j = nlohmann::json::parse(text);
  CheckpointReview r;
  r.failures = j.at("failures").get<std::vector<std::pair<int, std::string>>>();
  r.failed = j.at("failed").get<int>();
  r.conflicts = j.at("conflicts").get<std::vector<std::string>>();
  r.warnings = j.at("warnings").get<std::vector<std::string>>();
  r.oversubscribed = j.at("oversubscribed").get<bool>();
  r.labels = j.at("labels").get<std::vector<std::pair<int, std::string>>>();
  // Rendered defensively (render_fingerprint); only its kind is checked here.
  if (auto it = j.find("fingerprint"); it != j.end() && it->is_object()) r.fingerprint = *it;
  // Validated where it is read (decode_summary, against its sender's ranks).
  if (auto it = j.find("fingerprint_summary"); it != j.end() && it->is_object())
    r.fingerprint_summary = *it;
  // The roots' ids, as untrusted as the rest: entries that are not [rank,
  // roots, "text"] with numbers in range are dropped, at most kMaxNcclRoots
  // kept, each text at most an id's 256 characters (checked when used).
  if (auto it = j.find("compute"); it != j.end()) r.compute = compute_tallies_from_json(*it);
  if (auto it = j.find("nccl_ids"); it != j.end() && it->is_array())
    for (const auto& e : *it) {
      if (r.nccl_ids.size() >= static_cast<std::size_t>(kMaxNcclRoots)) break;
      if (!e.is_array() || e.size() != 3 || !e[0].is_number_integer() ||
          !e[1].is_number_integer() || !e[2].is_string())
        continue;
      const auto rank = e[0].get<long long>(), roots = e[1].get<long long>();
      const auto& id = e[2].get_ref<const std::string&>();
      if (rank < 1 || rank > (1 << 30) || roots < 2 || roots > kMaxNcclRoots || id.size() > 256)
        continue;
      merge_root_ids(r.nccl_ids, {{static_cast<int>(rank), static_cast<int>(roots), id}});
    }
  return r;
}

}  // namespace gpudiag
