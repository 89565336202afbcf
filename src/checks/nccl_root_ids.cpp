// The bootstrap roots' ids between ranks (see nccl_root_ids.h).
#include "checks/nccl_root_ids.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "comm/nccl.h"
#include "comm/nccl_roots.h"
#include "util/error.h"

namespace gpudiag {

namespace {

/// Whether NCCL's rule has `rank` make the id of a root >= 1 under `roots`.
bool placed(int rank, int world, int roots) {
  return roots >= 2 && roots <= kMaxNcclRoots && nccl_root_made_by(rank, world, roots) >= 1;
}

}  // namespace

bool is_unique_id_hex(const std::string& hex) {
  return hex.size() == 256 && std::all_of(hex.begin(), hex.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
         });
}

std::vector<NcclRootId> root_ids_in(const std::vector<std::optional<RankRecord>>& records) {
  std::vector<NcclRootId> out;
  for (const auto& r : records) {
    if (!r || r->backend != "nccl" || r->nccl_id.empty()) continue;
    if (!placed(r->rank, r->world_size, r->nccl_roots)) continue;
    out.push_back({r->rank, r->nccl_roots, r->nccl_id});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  if (out.size() > static_cast<std::size_t>(kMaxNcclRoots)) out.resize(kMaxNcclRoots);
  return out;
}

void merge_root_ids(std::vector<NcclRootId>& into, const std::vector<NcclRootId>& from) {
  for (const auto& e : from) {
    auto at = std::lower_bound(into.begin(), into.end(), e.rank,
                               [](const NcclRootId& a, int r) { return a.rank < r; });
    if (at != into.end() && at->rank == e.rank) continue;
    into.insert(at, e);
  }
  if (into.size() > static_cast<std::size_t>(kMaxNcclRoots)) into.resize(kMaxNcclRoots);
}

std::string root_maker_note(int rank, int world, int roots) {
  const int root = roots >= 2 ? nccl_root_made_by(rank, world, roots) : -1;
  if (root < 1) return {};
  return "it carries the NCCL unique id of bootstrap root " + std::to_string(root) + " of " +
         std::to_string(roots);
}

std::vector<std::string> nccl_init_ids(const RankRecord& me, const std::optional<RankRecord>& rank0,
                                       const std::vector<NcclRootId>& shared) {
  const int n = me.world_size, roots = std::max(me.nccl_roots, 1);
  const std::string agree =
      "every rank must plan the same bootstrap roots: run one NCCL (2.23 or newer for several "
      "roots) and one GPUDIAG_NCCL_ROOTS on every rank, or GPUDIAG_NCCL_ROOTS=1";
  if (!rank0)
    throw Error(ExitCode::broken, "rank 0's record (its NCCL unique id) did not arrive at the "
                                  "exchange");
  if (std::max(rank0->nccl_roots, 1) != roots)
    throw Error(ExitCode::broken,
                "rank 0 plans NCCL's init as " + describe_nccl_init(rank0->nccl_roots) +
                    ", this rank as " + describe_nccl_init(roots),
                agree);
  std::vector<std::string> ids{rank0->nccl_id};
  for (int i = 1; i < roots; ++i) {
    const int maker = nccl_root_first_rank(i, n, roots);
    const std::string whose = "the NCCL unique id of root " + std::to_string(i) + " of " +
                              std::to_string(roots) + " (made by rank " + std::to_string(maker) +
                              ")";
    auto it = std::find_if(shared.begin(), shared.end(),
                           [&](const NcclRootId& e) { return e.rank == maker; });
    if (it == shared.end())
      throw Error(ExitCode::broken,
                  whose + " did not come with the exchange's digest: that rank made none, its "
                          "record could not be read, or it plans other roots",
                  agree);
    if (it->roots != roots)
      throw Error(ExitCode::broken,
                  whose + " was made for " + describe_nccl_init(it->roots) + ", this rank plans " +
                      describe_nccl_init(roots) + " (from rank 0's plan too)",
                  agree);
    if (!is_unique_id_hex(it->id))
      throw Error(ExitCode::broken,
                  whose + " arrived malformed (" + std::to_string(it->id.size()) +
                      " characters, expected 256 hex digits)",
                  "ranks running different gpudiag versions?");
    ids.push_back(it->id);
  }
  return ids;
}

void make_nccl_root_id(RankRecord& me, const NcclLibrary& nccl, const Env& env, int setting) {
  const NcclRootPlan plan =
      plan_nccl_roots(me.world_size, setting, nccl.version,
                      nccl.api && nccl.api->CommInitRankScalable, env.has("NCCL_COMM_ID"));
  me.nccl_roots = plan.roots;
  if (me.rank == 0) {
    if (!plan.why.empty() && setting > 1)
      spdlog::warn("GPUDIAG_NCCL_ROOTS={} asks for {} bootstrap roots, but {}: NCCL starts from "
                   "one root",
                   setting, plan.wanted, plan.why);
    spdlog::info("NCCL init: {} for {} ranks{}", plan.describe(), me.world_size,
                 plan.why.empty() ? "" : " (" + plan.why + ")");
  }
  if (nccl_root_made_by(me.rank, me.world_size, plan.roots) >= 0)
    me.nccl_id = nccl_make_unique_id(*nccl.api);
}

}  // namespace gpudiag
