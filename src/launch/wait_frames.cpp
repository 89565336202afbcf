// The names of waits on a peer (wait_frames.h). The Python names are torch's
// own functions that call into its C++ and block there until the other ranks
// come (torch/distributed/distributed_c10d.py, rendezvous.py,
// elastic/utils/store.py, utils.py, nn/parallel/distributed.py in torch 1.13
// and 2.x); only the innermost frame counts, because a local helper inside a
// collective's Python (unpickling a broadcast object) is the rank's own work.
#include "launch/wait_frames.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "launch/summary.h"  // format_ranks

namespace gpudiag::launch {

namespace {

template <std::size_t N>
bool one_of(std::string_view name, const std::string_view (&names)[N]) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

/// Functions under torch/distributed/ whose frame, innermost, is a wait on the
/// other ranks: collectives, barriers, p2p, the store's waits, the rendezvous.
constexpr std::string_view kDistributed[] = {
    "all_reduce", "all_reduce_coalesced", "all_reduce_multigpu", "reduce", "reduce_multigpu",
    "broadcast", "broadcast_multigpu", "all_gather", "all_gather_multigpu", "all_gather_coalesced",
    "all_gather_into_tensor", "_all_gather_base", "gather", "scatter", "reduce_scatter",
    "reduce_scatter_multigpu", "reduce_scatter_tensor", "_reduce_scatter_base", "all_to_all",
    "all_to_all_single", "barrier", "monitored_barrier", "_store_based_barrier", "send", "recv",
    "wait_tensor", "get_all", "synchronize", "_barrier_nonblocking", "_try_detecting_missing_ranks",
    "_create_c10d_store", "_sync_params_and_buffers", "_verify_param_shape_across_processes"};

/// DistributedDataParallel's own broadcasts and all-reduces (forward aside:
/// a scripted module's forward runs in C++ from that frame too).
constexpr std::string_view kDdp[] = {
    "_distributed_broadcast_coalesced", "_sync_buffers", "_sync_module_buffers",
    "_default_broadcast_coalesced", "_pre_forward", "_check_global_requires_backward_grad_sync",
    "_find_common_rank", "_match_all_reduce_for_bwd_pass", "_match_unused_params_allreduce",
    "_check_and_sync_module_buffers", "_sync_final_model"};

/// Native names of a wait on a peer (anywhere in the main thread's stack).
constexpr std::string_view kNativePeer[] = {"gloo", "nccl", "Nccl", "MPI_", "PMPI_",
                                            "ompi_", "c10d", "ProcessGroup"};
/// A CUDA synchronisation: a peer's wait when a collective is queued before it.
constexpr std::string_view kCudaSync[] = {"cudaDeviceSynchronize", "cudaStreamSynchronize",
                                          "cudaEventSynchronize",  "cuCtxSynchronize",
                                          "cuStreamSynchronize",   "cuEventSynchronize"};
/// A library being loaded (its static initialisers name c10d, gloo, NCCL).
constexpr std::string_view kLoading[] = {"_GLOBAL__sub_I", "__static_initialization",
                                         "__cxx_global_var_init", "_dl_init", "dl_open_worker",
                                         "_dl_catch_exception", "dlopen"};

bool has_any(std::string_view f, std::initializer_list<std::string_view> words) {
  return std::any_of(words.begin(), words.end(),
                     [&](std::string_view w) { return f.find(w) != std::string_view::npos; });
}

/// gpudiag's own waits: a gpudiag:: function that waits, gathers, or is on a
/// ring, a link or the store.
bool own_wait(std::string_view f) {
  const std::size_t own = f.find("gpudiag::");
  if (own == std::string_view::npos) return false;
  return has_any(f.substr(own + 9),
                 {"Wait", "wait", "Gather", "gather", "Ring", "ring", "Link", "link", "Store", "store"});
}

}  // namespace

FrameWait python_wait(const std::vector<std::string>& frames) {
  if (frames.empty()) return {};
  const std::string& top = frames.front();
  const std::size_t in = top.rfind(" in ");
  if (in == std::string::npos) return {};
  const std::string func = top.substr(in + 4);
  const std::size_t colon = top.rfind(':', in);
  const std::string_view path = std::string_view(top).substr(0, colon == std::string::npos ? in : colon);
  FrameWait w;
  w.call = func;
  if (path.find("/torch/distributed/") != std::string_view::npos && one_of(func, kDistributed))
    w.kind = WaitKind::peer;
  else if (path.ends_with("/torch/nn/parallel/distributed.py") && one_of(func, kDdp))
    w.kind = WaitKind::peer;
  else if ((path.ends_with("/torch/autograd/__init__.py") && (func == "backward" || func == "grad")) ||
           (path.ends_with("/torch/autograd/graph.py") && func == "_engine_run_backward"))
    w.kind = WaitKind::in_group;  // DDP's all-reduces run inside autograd's backward
  else if ((path.ends_with("/torch/cuda/__init__.py") || path.ends_with("/torch/cuda/streams.py")) &&
           func == "synchronize")
    w.kind = WaitKind::in_group;
  return w;
}

FrameWait native_wait(const std::vector<std::string>& frames) {
  for (const auto& f : frames)
    if (std::any_of(std::begin(kLoading), std::end(kLoading),
                    [&](std::string_view l) { return std::string_view(f).starts_with(l); }))
      return {};
  for (const auto& f : frames) {
    if (std::any_of(std::begin(kNativePeer), std::end(kNativePeer),
                    [&](std::string_view n) { return f.find(n) != std::string::npos; }) ||
        own_wait(f))
      return {WaitKind::peer, f};
    if (one_of(std::string_view(f), kCudaSync)) return {WaitKind::in_group, f};
  }
  return {};
}

std::size_t mark_ahead(std::vector<RankStack>& stacks) {
  std::size_t marked = 0;
  for (auto& s : stacks) {
    if (s.waiting || !s.sequence || *s.sequence < 0) continue;
    std::vector<int> behind;
    for (const auto& o : stacks)
      if (o.sequence && *o.sequence >= 0 && *o.sequence < *s.sequence) behind.push_back(o.rank);
    if (behind.empty()) continue;
    // It issued a collective of the default group that they have not: it
    // waits for them there, whatever its code does meanwhile (NCCL returns at
    // once; the wait is in the next synchronisation).
    std::string from = s.where.rfind("in ", 0) == 0 ? s.where.substr(3) : s.where;
    s.where = "wait in a collective " + std::string(behind.size() == 1 ? "rank " : "ranks ") +
              format_ranks(behind) + (behind.size() == 1 ? " has" : " have") +
              " not issued (default group) from " + from;
    s.waiting = true;
    ++marked;
  }
  return marked;
}

bool some_rank_waits(const std::vector<RankStack>& stacks) {
  return std::any_of(stacks.begin(), stacks.end(), [](const RankStack& s) { return s.waiting; });
}

}  // namespace gpudiag::launch
