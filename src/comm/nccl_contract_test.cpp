// The NCCL contract: what gpudiag's NCCL backend relies on, as tests that run
// against the model here (nccl_model.h, NCCL 2.28 at 1, 2 and 4 ranks, 2.18
// and 2.22 at 2) and against a real libnccl.so.2 on a GPU
// (GPUDIAG_NCCL_CONTRACT=real, one process per rank: scripts/gpu-check.sh
// runs it first). Where the two disagree, the model is wrong. Each test names
// the NCCL source it states (tag v2.28.9-1 unless another is named). This
// file holds the launch rules; nccl_contract_lifecycle_test.cpp a
// communicator's life, its id, NCCL's environment and its last error.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "comm/nccl_contract_fixture.h"

namespace gpudiag {
namespace {

using nccl_abi::Result;
constexpr std::size_t kBig = NcclContract::kBig, kSmall = NcclContract::kSmall;
constexpr int kFloat = NcclContract::kFloat;

// src/init.cc ncclCommInitRankConfig: a non-blocking init returns
// ncclInProgress (or ncclSuccess if done by then) and completes on a thread;
// ncclCommFinalize likewise, then ncclCommDestroy.
TEST_P(NcclContract, NonBlockingInitAndFinalizeArePolledToSuccess) {
  finish(make(false));
}

// src/enqueue.cc taskAppend: at one rank a collective is ncclLaunchOneRank on
// the caller's thread, outside the group machinery: done when it returns,
// and the next call is accepted at once.
TEST_P(NcclContract, OneRankCollectiveIsOnTheStreamWhenTheCallReturns) {
  NEED_RANKS(s->size() == 1, "states what one rank does");
  auto c = make(false);
  void* buf = s->device(kSmall);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kSuccess) << i;
  drain();
  finish(c);
}

// src/group.cc ncclGroupEndInternal: with a non-blocking communicator the
// group's work goes to a new thread and ncclGroupEnd returns ncclInProgress,
// at one rank too when it holds send/recv (src/enqueue.cc p2pTaskAppend
// always joins the group, even to the rank itself). Before 2.23 only a group
// that must connect first went to a thread: the first send/recv to a peer
// (v2.22.3-1 p2pTaskAppend: ncclGroupCommPreconnect), never one to itself.
TEST_P(NcclContract, GroupedSendRecvReturnsInProgress) {
  auto c = make(false);
  void *out = s->device(kSmall), *in = s->device(kSmall);
  const int next = (s->rank() + 1) % s->size(), prev = (s->rank() + s->size() - 1) % s->size();
  ASSERT_EQ(n->GroupStart(), nccl_abi::kSuccess);
  ASSERT_EQ(n->Send(out, kSmall / 4, kFloat, next, c, s->stream()), nccl_abi::kSuccess);
  ASSERT_EQ(n->Recv(in, kSmall / 4, kFloat, prev, c, s->stream()), nccl_abi::kSuccess);
  EXPECT_EQ(n->GroupEnd(),
            threaded() || s->size() > 1 ? nccl_abi::kInProgress : nccl_abi::kSuccess);
  EXPECT_EQ(settle(c), nccl_abi::kSuccess);
  drain();
  finish(c);
}

// src/enqueue.cc ncclEnqueueCheck: a collective's implicit group at 2+ ranks
// is launched by a thread (from 2.23); the communicator's first launch also
// connects to the peers, so it is still pending when the call returns.
TEST_P(NcclContract, FirstCollectiveAtTwoRanksIsPendingWhenItReturns) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  NEED_RANKS(threaded(), "from NCCL 2.23 (NonBlockingGroupRunsOnTheCallersThreadBefore2_23)");
  auto c = make(false);
  void* buf = s->device(kSmall);
  EXPECT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kInProgress);
  EXPECT_EQ(settle(c), nccl_abi::kSuccess);
  drain();
  finish(c);
}

// src/init.cc ncclCommEnsureReady: a call while the previous one is pending
// is refused with ncclInvalidArgument and NCCL's last error says why. The
// refusal becomes a non-blocking communicator's state (src/enqueue.cc
// ncclEnqueueCheck's fail path: ncclCommSetAsyncError), so the finalize
// after it is refused for that error state, not for the pending launch
// (FinalizeWhilePendingIsRefusedAndItsRefusalBecomesTheState states that
// case). (What gpudiag's old back-to-back loop did.)
TEST_P(NcclContract, CallWhilePendingIsRefused) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  NEED_RANKS(threaded(),
             "a collective is pending from NCCL 2.23 (the lifecycle tests use send/recv)");
  auto c = make(false);
  void* buf = s->device(kSmall);
  ASSERT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kInProgress);
  EXPECT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kInvalidArgument);
  EXPECT_NE(std::string(n->GetLastError(c)).find("before the previous operation returned ncclSuccess"),
            std::string::npos)
      << n->GetLastError(c);
  Result st = nccl_abi::kSuccess;
  EXPECT_EQ(n->CommGetAsyncError(c, &st), nccl_abi::kSuccess);
  EXPECT_EQ(st, nccl_abi::kInvalidArgument) << "the refusal is the communicator's state";
  EXPECT_EQ(n->CommFinalize(c), nccl_abi::kInvalidArgument);
}

// The same rule seen from the stream: the kernel reaches it only when the
// launch leaves ncclInProgress, so an event recorded before then times
// nothing, and one recorded after it follows the kernel.
TEST_P(NcclContract, EventRecordedWhilePendingTimesNothing) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  NEED_RANKS(threaded(), "a collective is pending from NCCL 2.23");
  auto c = make(false);
  void* buf = s->device(kBig);
  void *e0 = event(), *e1 = event(), *e2 = event();
  cuda->event_record(e0, s->stream());
  ASSERT_EQ(all_reduce(c, buf, kBig), nccl_abi::kInProgress);
  cuda->event_record(e1, s->stream());
  ASSERT_EQ(settle(c), nccl_abi::kSuccess);
  cuda->event_record(e2, s->stream());
  drain();
  const double early = ms(e0, e1), whole = ms(e0, e2);
  EXPECT_LT(early * 10, whole) << "early " << early << " ms, whole " << whole << " ms";
  finish(c);
}

// Timed gpudiag's way, the events bracket the kernel.
TEST_P(NcclContract, EventsAfterTheLaunchTimeTheKernel) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  auto c = make(false);
  void* buf = s->device(kBig);
  timed_after_launch(c, buf, kSmall);  // connects
  const double small = timed_after_launch(c, buf, kSmall);
  const double big = timed_after_launch(c, buf, kBig);
  // "Times nothing" reads a few microseconds (EventRecordedWhilePendingTimesNothing);
  // a 64 MiB all-reduce moves 96 MiB through each of 4 ranks, over 50 us even at
  // 2 TB/s. (On one GPU shared by 4 processes a 64 KiB call can take tens of
  // milliseconds of time slices, so the two sizes are not compared by ratio.)
  EXPECT_GT(big, 0.05) << "64 MiB " << big << " ms";
  EXPECT_GT(big, small) << "64 KiB " << small << " ms, 64 MiB " << big << " ms";
  finish(c);
}

// src/group.cc, the blocking branch: a blocking communicator's collective
// returns with the work on the stream, so the next call is accepted and an
// event recorded after it follows the kernel.
TEST_P(NcclContract, BlockingCommunicatorQueuesBeforeReturning) {
  auto c = make(true);
  void* buf = s->device(kBig);
  void *e0 = event(), *e1 = event();
  ASSERT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kSuccess);
  cuda->event_record(e0, s->stream());
  ASSERT_EQ(all_reduce(c, buf, kBig), nccl_abi::kSuccess);
  ASSERT_EQ(all_reduce(c, buf, kBig), nccl_abi::kSuccess);
  cuda->event_record(e1, s->stream());
  drain();
  EXPECT_GT(ms(e0, e1), 0.0);
  EXPECT_EQ(n->CommFinalize(c), nccl_abi::kSuccess);
  EXPECT_EQ(n->CommDestroy(c), nccl_abi::kSuccess);
  std::erase(comms, c);
}

// A launch whose peers never take part stays pending (it waits to connect:
// src/transport.cc ncclTransportP2pSetup over the bootstrap), never reports
// success, and ncclCommAbort ends it and returns (src/init.cc ncclCommAbort:
// the abort flag stops the launch thread, ncclGroupJobAbort joins it).
// gpudiag's timeout path relies on this.
TEST_P(NcclContract, AbortEndsALaunchWhosePeersNeverCome) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  NEED_RANKS(threaded(),
             "a collective is pending from NCCL 2.23 (AbortOfAPendingLaunch... states it)");
  auto c = make(false);
  void* buf = s->device(kSmall);
  if (s->rank() == 0) {
    s->peers_absent(true);
    const Result r = all_reduce(c, buf, kSmall);
    EXPECT_TRUE(r == nccl_abi::kInProgress) << r;
    EXPECT_NE(settle(c, s->real() ? 2.0 : 0.05), nccl_abi::kSuccess);
  }
  auto done = std::async(std::launch::async, [&] { return n->CommAbort(c); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "ncclCommAbort did not return in 30 s";
  EXPECT_EQ(done.get(), nccl_abi::kSuccess);
  comms.clear();
}

// gpudiag's meter (comm/nccl_comm.cpp run_timed) queues calls behind a
// stream gate (gpu/stream_gate.cu): it relies on NCCL's launch never waiting
// for the stream's earlier work. src/enqueue.cc ncclLaunchKernel puts the
// kernel on the stream with cuLaunchKernelEx (asynchronous), and at 2+
// ranks src/group.cc groupLaunchNonBlocking's thread ends when it has; so
// every call settles to ncclSuccess while the gate still holds, the stream
// stays busy until the gate opens, and then drains.
TEST_P(NcclContract, LaunchesBehindAHeldGateSettleBeforeItOpens) {
  ASSERT_NE(cuda->gate_create, nullptr);
  auto c = make(false);
  void* buf = s->device(kSmall);
  void* gate = nullptr;
  ASSERT_EQ(cuda->gate_create(&gate), CudaOps::kSuccess);
  ASSERT_EQ(all_reduce(c, buf, kSmall),
            s->size() == 1 || !threaded() ? nccl_abi::kSuccess : nccl_abi::kInProgress);
  ASSERT_EQ(settle(c), nccl_abi::kSuccess);  // connects, outside the gate
  drain();
  void *e0 = event(), *e1 = event();
  ASSERT_EQ(cuda->gate_hold(gate, s->stream(), 20000000), CudaOps::kSuccess);
  cuda->event_record(e0, s->stream());
  for (int i = 0; i < 16; ++i) {
    const Result r = all_reduce(c, buf, kSmall);
    ASSERT_TRUE(r == nccl_abi::kSuccess || r == nccl_abi::kInProgress) << i << ": " << r;
    ASSERT_EQ(settle(c, 10), nccl_abi::kSuccess) << i << ": " << n->GetLastError(c);
  }
  cuda->event_record(e1, s->stream());
  EXPECT_EQ(cuda->stream_query(s->stream()), CudaOps::kNotReady) << "the gate did not hold";
  ASSERT_EQ(cuda->gate_open(gate), CudaOps::kSuccess);
  drain();
  EXPECT_EQ(cuda->gate_expired(gate), 0);
  EXPECT_GT(ms(e0, e1), 0.0);
  EXPECT_EQ(cuda->gate_destroy(gate), CudaOps::kSuccess);
  finish(c);
}

// The meter's hung-peer path: a launch behind a held gate whose peers never
// come stays pending; ncclCommAbort returns (src/init.cc ncclCommAbort),
// and once the gate opens the stream drains (the aborted launch put
// nothing on it that waits for the peers).
TEST_P(NcclContract, AbortOfAGatedLaunchWhosePeersNeverComeLetsTheStreamDrain) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  NEED_RANKS(threaded(), "a collective is pending from NCCL 2.23");
  auto c = make(false);
  void* buf = s->device(kSmall);
  if (s->rank() == 0) {
    void* gate = nullptr;
    ASSERT_EQ(cuda->gate_create(&gate), CudaOps::kSuccess);
    ASSERT_EQ(cuda->gate_hold(gate, s->stream(), 20000000), CudaOps::kSuccess);
    s->peers_absent(true);
    EXPECT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kInProgress);
    EXPECT_NE(settle(c, s->real() ? 2.0 : 0.05), nccl_abi::kSuccess);
    auto done = std::async(std::launch::async, [&] { return n->CommAbort(c); });
    ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready)
        << "ncclCommAbort did not return in 30 s";
    comms.clear();
    cuda->gate_open(gate);
    drain();
    EXPECT_EQ(cuda->gate_destroy(gate), CudaOps::kSuccess);
  } else {
    EXPECT_EQ(n->CommAbort(c), nccl_abi::kSuccess);
    comms.clear();
  }
}

// gpudiag's abort in the middle of a gated batch (comm/nccl_comm.cpp
// abort_now): calls queued behind a held gate, the gate opened first, then
// ncclCommAbort, which returns well under the gate's cap. NCCL's teardown
// waits for the communicator's work on the stream (src/init.cc commReclaim ->
// commDestroySync: ncclStrongStreamSynchronize of the deviceStream that
// src/enqueue.cc ncclLaunchFinish advanced to the user stream after each
// launch), so with the gate still held it would wait for the cap (the
// model's reclaim does: nccl_meter_test.cpp AnAbortMidBatchOpensTheGateFirst).
TEST_P(NcclContract, AbortWithCallsQueuedBehindAnOpenedGateReturnsWellUnderItsCap) {
  auto c = make(false);
  void* buf = s->device(kSmall);
  (void)all_reduce(c, buf, kSmall);
  ASSERT_EQ(settle(c), nccl_abi::kSuccess);  // connects, outside the gate
  drain();
  void* gate = nullptr;
  ASSERT_EQ(cuda->gate_create(&gate), CudaOps::kSuccess);
  constexpr unsigned kCapUs = 20000000;
  ASSERT_EQ(cuda->gate_hold(gate, s->stream(), kCapUs), CudaOps::kSuccess);
  for (int i = 0; i < 8; ++i) {
    const Result r = all_reduce(c, buf, kSmall);
    ASSERT_TRUE(r == nccl_abi::kSuccess || r == nccl_abi::kInProgress) << i << ": " << r;
    ASSERT_EQ(settle(c, 10), nccl_abi::kSuccess) << i;
  }
  EXPECT_EQ(cuda->stream_query(s->stream()), CudaOps::kNotReady) << "the gate did not hold";
  ASSERT_EQ(cuda->gate_open(gate), CudaOps::kSuccess);
  const auto t0 = Clock::now();
  abort_in_time(c);
  const double s_taken = std::chrono::duration<double>(Clock::now() - t0).count();
  if (s->real()) EXPECT_LT(s_taken, kCapUs / 1e6 / 4) << "the abort waited on the gate";
  drain();
  EXPECT_EQ(cuda->gate_expired(gate), 0);
  EXPECT_EQ(cuda->gate_destroy(gate), CudaOps::kSuccess);
}

// Before 2.23 a non-blocking group with nothing to connect (no init or
// finalize job, no send/recv to a peer not yet connected) is launched on the
// caller's thread, as a blocking one is (src/group.cc v2.22.3-1
// ncclGroupEndInternal: the thread only when ncclGroupCommPreconnectHead or
// ncclAsyncJobs is set); from 2.23 every one takes a thread (v2.23.4-1).
// gpudiag's communicator takes both (nccl_comm_model_test.cpp).
TEST_P(NcclContract, NonBlockingGroupRunsOnTheCallersThreadBefore2_23) {
  auto c = make(false);
  void* buf = s->device(kSmall);
  const Result first = all_reduce(c, buf, kSmall);  // connects (2.22: here, on this thread)
  ASSERT_TRUE(first == nccl_abi::kSuccess || first == nccl_abi::kInProgress) << first;
  ASSERT_EQ(settle(c), nccl_abi::kSuccess);
  for (int i = 0; i < 4; ++i) {
    // From 2.23 NCCL's thread may also have finished by the call's trailing
    // ncclCommGetAsyncError; before, the call itself launched.
    const Result r = all_reduce(c, buf, kSmall);
    if (threaded() && s->size() > 1) {
      EXPECT_TRUE(r == nccl_abi::kInProgress || r == nccl_abi::kSuccess) << r << ", call " << i;
    } else {
      EXPECT_EQ(r, nccl_abi::kSuccess) << "NCCL " << version() << ", call " << i;
    }
    ASSERT_EQ(settle(c), nccl_abi::kSuccess);
  }
  drain();
  finish(c);
}

INSTANTIATE_TEST_SUITE_P(Nccl, NcclContract, ::testing::ValuesIn(contract_params()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gpudiag
