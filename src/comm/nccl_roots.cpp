// The bootstrap roots' plan and NCCL's split of ranks between them (see
// nccl_roots.h). The arithmetic is NCCL's own (src/bootstrap.cc of v2.28.9-1,
// unchanged since v2.23.4-1), restated so every rank computes the same.
#include "comm/nccl_roots.h"

#include <algorithm>

#include "comm/nccl_api.h"
#include "util/error.h"

namespace gpudiag {

int nccl_roots_setting(const Env& env) {
  const std::string v = env.get_or("GPUDIAG_NCCL_ROOTS", "auto");
  if (v == "auto" || v.empty()) return 0;
  int n = 0;
  bool digits = v.size() <= 3;
  for (char c : v) digits = digits && c >= '0' && c <= '9';
  if (digits) n = std::stoi(v);
  if (!digits || n < 1 || n > kMaxNcclRoots) {
    std::string shown = v.substr(0, 32);
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    throw UsageError("GPUDIAG_NCCL_ROOTS='" + shown + "' is not auto or a number of roots from 1 to " +
                         std::to_string(kMaxNcclRoots),
                     "unset it (auto: one root per " + std::to_string(kNcclRanksPerRoot) +
                         " ranks), or give the NCCL bootstrap roots to use");
  }
  return n;
}

std::string describe_nccl_init(int roots) {
  return roots > 1 ? "ncclCommInitRankScalable with " + std::to_string(roots) + " roots"
                   : "ncclCommInitRankConfig with one root";
}

std::string NcclRootPlan::describe() const { return describe_nccl_init(roots); }

NcclRootPlan plan_nccl_roots(int nranks, int setting, int nccl_version, bool has_scalable,
                             bool comm_id_set) {
  NcclRootPlan p;
  nranks = std::max(nranks, 1);
  // ncclCommInitRankDev refuses nId > nranks ("improper usage").
  p.wanted = setting > 0 ? std::min(setting, nranks)
                         : std::min(kMaxNcclRoots, (nranks + kNcclRanksPerRoot - 1) / kNcclRanksPerRoot);
  p.roots = p.wanted;
  if (p.wanted <= 1) return p;
  if (!has_scalable) {
    p.why = "NCCL " + nccl_version_string(nccl_version) +
            " has no ncclCommInitRankScalable (NCCL 2.23 and later)";
    p.roots = 1;
  } else if (comm_id_set) {
    p.why = "NCCL_COMM_ID is set: NCCL gives every id that one address and rank 0 uses only the "
            "first";
    p.roots = 1;
  }
  return p;
}

int nccl_root_first_rank(int root, int nranks, int nroots) {
  return root * (nranks / nroots) + std::min(root, nranks % nroots);
}

int nccl_root_of_rank(int rank, int nranks, int nroots) {
  const int rmr = nranks % nroots, rpr = nranks / nroots;
  const int d = rmr * (rpr + 1);
  return rank < d ? rank / (rpr + 1) : (rank - d) / rpr + rmr;
}

int nccl_root_ranks(int root, int nranks, int nroots) {
  return nranks / nroots + (root < nranks % nroots ? 1 : 0);
}

int nccl_root_made_by(int rank, int nranks, int nroots) {
  if (nroots < 1 || nroots > nranks || rank < 0 || rank >= nranks) return -1;
  const int root = nccl_root_of_rank(rank, nranks, nroots);
  return nccl_root_first_rank(root, nranks, nroots) == rank ? root : -1;
}

}  // namespace gpudiag
