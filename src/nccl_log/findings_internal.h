// Shared helpers and the rule functions behind find_problems (findings.cpp, job_rules.cpp).
#pragma once

#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "nccl_log/findings.h"

namespace gpudiag::nccl_log::detail {

inline bool contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

/// Collects findings of one kind across processes: who, a few evidence lines, a first example.
struct Collector {
  std::vector<std::string> who;             ///< in the order first added
  std::unordered_set<std::string> who_set;  ///< the same, for a constant-time "already named"
  std::vector<Evidence> evidence;
  std::string first;  ///< rule-specific detail of the first occurrence (peer, size, status)

  void add(const ProcessSummary& p, const Evidence& e, std::string detail = {});
  bool empty() const { return who.empty(); }
  /// Appends a finding if anything was collected.
  void emit(std::vector<Finding>& out, std::string id, Severity severity, std::string title,
            std::string remedy) const;
};

/// "10.0.0.2<45763>" in a message -> "10.0.0.2:45763"; empty when none.
std::string peer_address(std::string_view message);

// Rules over single processes' lines (findings.cpp).
void rule_loopback(const Job& job, std::vector<Finding>& out);
void rule_container_interface(const Job& job, std::vector<Finding>& out);
void rule_verbs_missing(const Job& job, std::vector<Finding>& out);
void rule_connection(const Job& job, std::vector<Finding>& out);
void rule_shm(const Job& job, std::vector<Finding>& out);
void rule_ib_completion(const Job& job, std::vector<Finding>& out);
void rule_ib_qp(const Job& job, std::vector<Finding>& out);
void rule_p2p(const Job& job, std::vector<Finding>& out);

// Rules across ranks (job_rules.cpp).
void rule_version(const Job& job, std::vector<Finding>& out);
void rule_disagree(const Job& job, std::vector<Finding>& out);
void rule_init_incomplete(const Job& job, std::vector<Finding>& out);
void rule_first_warn(const Job& job, std::vector<Finding>& out);

// PyTorch's watchdog and NCCL's diagnostics (watchdog_rules.cpp).
void rule_torch_watchdog(const Job& job, std::vector<Finding>& out);
void rule_nccl_diag(const Job& job, std::vector<Finding>& out);

}  // namespace gpudiag::nccl_log::detail
