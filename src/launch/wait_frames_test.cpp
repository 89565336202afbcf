// Which stacks wait for another rank (wait_frames.h), from faulthandler dumps
// and eu-stack frames laid out as torch 1.13 and 2.x ranks print them: long
// imports, loads, compiles, sleeps and CPU-bound lines wait for nobody;
// collectives, barriers, store waits, DDP's backward, a CUDA synchronisation
// in a rank with a process group, and a rank ahead of a peer in the default
// group's collectives do.
#include "launch/wait_frames.h"

#include <gtest/gtest.h>

#include "launch/stacks.h"

namespace gpudiag::launch {
namespace {

constexpr const char* kTorch = "/usr/lib/python3/dist-packages/torch/";

/// A faulthandler dump of the main thread: `inner` frames (innermost first,
/// "PATH\", line N in FUNC") then the script's main and <module>.
std::string dump(const std::vector<std::string>& inner) {
  std::string d = "Current thread 0x00007f3 (most recent call first):\n";
  for (const auto& f : inner) d += "  File \"" + f + "\n";
  d += "  File \"/work/job.py\", line 30 in main\n  File \"/work/job.py\", line 40 in <module>\n";
  return d;
}

RankStack python_rank(const std::vector<std::string>& inner, std::optional<long long> seq = 7,
                      std::vector<std::string> native = {}) {
  RankStack s;
  s.source = "python";
  s.frames = python_frames(dump(inner));
  s.sequence = seq;
  s.native = std::move(native);
  summarise(s);
  return s;
}

std::string torch_frame(const std::string& file, int line, const std::string& func) {
  return kTorch + file + "\", line " + std::to_string(line) + " in " + func;
}

TEST(WaitFrames, LongImportsLoadsCompilesSleepsAndCpuLinesWaitForNobody) {
  const std::vector<std::vector<std::string>> own_work{
      // import torch, then torch.distributed (whose module is under torch/distributed/)
      {torch_frame("__init__.py", 229, "<module>"),
       "<frozen importlib._bootstrap>\", line 241 in _call_with_frames_removed",
       "<frozen importlib._bootstrap_external>\", line 940 in exec_module",
       "<frozen importlib._bootstrap>\", line 1176 in _find_and_load"},
      {torch_frame("distributed/distributed_c10d.py", 12, "<module>"),
       "<frozen importlib._bootstrap>\", line 241 in _call_with_frames_removed",
       torch_frame("distributed/__init__.py", 73, "<module>"),
       "<frozen importlib._bootstrap>\", line 1176 in _find_and_load"},
      {"<frozen importlib._bootstrap_external>\", line 1233 in _find_spec",
       "<frozen importlib._bootstrap>\", line 1176 in _find_and_load"},
      // torch.load of a checkpoint
      {torch_frame("serialization.py", 1112, "load_tensor"),
       torch_frame("serialization.py", 1142, "persistent_load"),
       torch_frame("serialization.py", 1146, "_load"), torch_frame("serialization.py", 789, "load")},
      // torch.compile (2.x): inductor compiling, dynamo tracing
      {torch_frame("_inductor/codecache.py", 1900, "load"),
       torch_frame("_inductor/compile_fx.py", 496, "compile_fx_inner"),
       torch_frame("_dynamo/convert_frame.py", 676, "_compile")},
      {torch_frame("_dynamo/symbolic_convert.py", 2245, "run"),
       torch_frame("_dynamo/convert_frame.py", 676, "_compile")},
      // DDP's forward computing the model, autograd's own Python
      {torch_frame("nn/modules/linear.py", 114, "forward"),
       torch_frame("nn/parallel/distributed.py", 1040, "forward")},
      // a time.sleep and a CPU-bound line in the script (C frames are not in the dump)
      {},
      {"/work/job.py\", line 12 in <genexpr>"},
  };
  for (const auto& inner : own_work) {
    const RankStack s = python_rank(inner);
    EXPECT_FALSE(s.waiting) << s.where;
    EXPECT_EQ(s.where.rfind("in ", 0), 0u) << s.where;
  }
  // Their main threads' native frames name no wait either: a sleep, a busy
  // loop, a library loading whose static initialisers name c10d and gloo.
  const std::vector<std::vector<std::string>> natives{
      {"clock_nanosleep", "__clock_nanosleep", "time_sleep", "_PyEval_EvalFrameDefault", "main"},
      {"_PyEval_EvalFrameDefault", "PyEval_EvalCode", "main"},
      {"c10d::ProcessGroupGloo::ProcessGroupGloo", "_GLOBAL__sub_I_ProcessGroupGloo.cpp",
       "call_init", "_dl_init", "dlopen", "_PyImport_LoadDynamicModuleWithSpec"}};
  for (const auto& native : natives) {
    const RankStack s = python_rank({}, 7, native);
    EXPECT_FALSE(s.waiting) << s.where;
  }
}

TEST(WaitFrames, CollectivesBarriersStoreWaitsBackwardAndSynchronisationWait) {
  struct Case {
    std::vector<std::string> inner;
    std::string where;
  };
  const std::vector<Case> cases{
      {{torch_frame("distributed/distributed_c10d.py", 1536, "all_reduce")},
       "wait in all_reduce (distributed_c10d.py:1536) from job.py:30 in main"},
      {{torch_frame("distributed/distributed_c10d.py", 2291, "all_reduce"),
        torch_frame("distributed/c10d_logger.py", 75, "wrapper")},  // torch 2.x
       "wait in all_reduce (distributed_c10d.py:2291) from job.py:30 in main"},
      {{torch_frame("distributed/distributed_c10d.py", 3328, "barrier")},
       "wait in barrier (distributed_c10d.py:3328) from job.py:30 in main"},
      {{torch_frame("distributed/distributed_c10d.py", 3280, "monitored_barrier")},
       "wait in monitored_barrier (distributed_c10d.py:3280) from job.py:30 in main"},
      {{torch_frame("distributed/distributed_c10d.py", 320, "_store_based_barrier"),
        torch_frame("distributed/distributed_c10d.py", 763, "init_process_group")},
       "wait in _store_based_barrier (distributed_c10d.py:320) from job.py:30 in main"},
      {{torch_frame("distributed/elastic/utils/store.py", 31, "get_all"),
        torch_frame("distributed/elastic/utils/store.py", 64, "synchronize")},
       "wait in get_all (store.py:31) from job.py:30 in main"},
      {{torch_frame("distributed/rendezvous.py", 155, "_create_c10d_store"),
        torch_frame("distributed/rendezvous.py", 232, "_env_rendezvous_handler")},
       "wait in _create_c10d_store (rendezvous.py:155) from job.py:30 in main"},
      {{torch_frame("nn/parallel/distributed.py", 1575, "_distributed_broadcast_coalesced"),
        torch_frame("nn/parallel/distributed.py", 1495, "_default_broadcast_coalesced")},
       "wait in _distributed_broadcast_coalesced (distributed.py:1575) from job.py:30 in main"},
      {{torch_frame("autograd/__init__.py", 197, "backward"), torch_frame("_tensor.py", 488, "backward")},
       "wait in backward (__init__.py:197) from job.py:30 in main"},
      {{torch_frame("autograd/graph.py", 768, "_engine_run_backward"),
        torch_frame("autograd/__init__.py", 289, "backward")},  // torch 2.x
       "wait in _engine_run_backward (graph.py:768) from job.py:30 in main"},
      {{torch_frame("cuda/__init__.py", 566, "synchronize")},
       "wait in synchronize (__init__.py:566) from job.py:30 in main"},
  };
  for (const auto& c : cases) {
    const RankStack s = python_rank(c.inner);
    EXPECT_TRUE(s.waiting) << s.where;
    EXPECT_EQ(s.where, c.where);
  }
  // store.wait() and store.get() called from the script: its main thread in
  // c10d's TCPStore (eu-stack's frames of torch 1.13's libtorch).
  for (const auto& native : std::vector<std::vector<std::string>>{
           {"__recv", "c10d::TCPStore::doWait", "c10d::TCPStore::wait", "_PyObject_MakeTpCall"},
           {"__recv", "c10d::TCPStore::doWait", "c10d::TCPStore::doGet", "c10d::TCPStore::get"},
           {"syscall", "c10d::ProcessGroupGloo::AsyncWork::wait", "_PyEval_EvalFrameDefault"}}) {
    const RankStack s = python_rank({}, 7, native);
    EXPECT_TRUE(s.waiting);
    EXPECT_EQ(s.where, "wait in " + native[1] + " from job.py:30 in main");
  }
  // .item() behind a queued NCCL collective: a CUDA synchronisation.
  EXPECT_TRUE(python_rank({}, 7, {"cudaStreamSynchronize", "at::native::_local_scalar_dense"}).waiting);
}

TEST(WaitFrames, BackwardAndSynchronisationWaitOnlyInARankWithAProcessGroup) {
  const auto backward = torch_frame("autograd/__init__.py", 197, "backward");
  const auto sync = torch_frame("cuda/__init__.py", 566, "synchronize");
  for (const auto& f : {backward, sync}) {
    EXPECT_FALSE(python_rank({f}, -1).waiting) << f;         // plain training: its own work
    EXPECT_TRUE(python_rank({f}, 1804289385).waiting) << f;  // DDP
    EXPECT_TRUE(python_rank({f}, std::nullopt).waiting) << f;  // not known: by its name
  }
  // A collective waits whatever the sequence says.
  EXPECT_TRUE(python_rank({torch_frame("distributed/distributed_c10d.py", 1536, "all_reduce")}, -1).waiting);
}

TEST(WaitFrames, ARankAheadOfAPeerInTheDefaultGroupWaitsForIt) {
  std::vector<RankStack> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(python_rank({}, r == 1 ? 40 : 41));
    ranks.back().rank = r;
  }
  EXPECT_FALSE(some_rank_waits(ranks));
  EXPECT_EQ(mark_ahead(ranks), 2u);
  EXPECT_TRUE(some_rank_waits(ranks));
  EXPECT_FALSE(ranks[1].waiting);
  EXPECT_EQ(ranks[0].where, "wait in a collective rank 1 has not issued (default group) from job.py:30 in main");
  EXPECT_EQ(group_stacks(ranks).front(), "the others wait for rank 1");
  // Equal, unknown or no group: nobody is ahead (a long load on every rank).
  for (std::optional<long long> other : {std::optional<long long>(41), std::optional<long long>(),
                                         std::optional<long long>(-1)}) {
    std::vector<RankStack> pair{python_rank({}, 41), python_rank({}, other)};
    pair[1].rank = 1;
    EXPECT_EQ(mark_ahead(pair), 0u);
    EXPECT_FALSE(some_rank_waits(pair));
  }
}

TEST(WaitFrames, NativeRanksKeepTheirRule) {
  EXPECT_EQ(native_wait({"__futex_abstimed_wait_common", "pthread_cond_timedwait",
                         "gpudiag::wait_for_link", "main"})
                .kind,
            WaitKind::peer);
  EXPECT_EQ(native_wait({"epoll_wait", "ncclProxyService"}).kind, WaitKind::peer);
  EXPECT_EQ(native_wait({"sched_yield", "cudaStreamSynchronize", "main"}).kind, WaitKind::in_group);
  EXPECT_EQ(native_wait({"clock_nanosleep", "__nanosleep", "main"}).kind, WaitKind::none);
  EXPECT_EQ(native_wait({"gpudiag::scan_tensor", "main"}).kind, WaitKind::none);
}

}  // namespace
}  // namespace gpudiag::launch
