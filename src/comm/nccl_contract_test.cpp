// The NCCL contract: what gpudiag's NCCL backend relies on, as tests that run
// against the model here (nccl_model.h, at 1, 2 and 4 ranks) and against a
// real libnccl.so.2 on a GPU (GPUDIAG_NCCL_CONTRACT=real, one process per
// rank: scripts/gpu-check.sh runs it first). Where the two disagree, the
// model is wrong. Each test names the NCCL 2.28 source it states.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "comm/nccl_contract_subject.h"

namespace gpudiag {
namespace {

using nccl_abi::Result;
using Clock = std::chrono::steady_clock;
constexpr std::size_t kBig = 64u << 20, kSmall = 64u << 10;
constexpr int kFloat = 7, kSum = 0;
// In the test's body: GTEST_SKIP returns from the function it is in.
#define NEED_RANKS(ok, why) \
  if (!(ok)) GTEST_SKIP() << why

class NcclContract : public ::testing::TestWithParam<ContractParam> {
 protected:
  void SetUp() override {
    s = make_contract_subject(GetParam());
    n = &s->nccl();
    cuda = &s->cuda();
  }
  void TearDown() override {
    for (auto c : comms)
      if (c) n->CommAbort(c);
    comms.clear();
    s.reset();
  }

  std::string key(const std::string& suffix = "") const {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string k = std::string(info->name()) + suffix;
    for (char& ch : k)
      if (ch == '/') ch = '_';
    return k;
  }

  /// Polls ncclCommGetAsyncError until it leaves ncclInProgress (or the
  /// deadline); returns the last state.
  Result settle(nccl_abi::CommHandle c, double seconds = 60) {
    const auto end = Clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
    Result st = nccl_abi::kInProgress;
    while (Clock::now() < end) {
      EXPECT_EQ(n->CommGetAsyncError(c, &st), nccl_abi::kSuccess);
      if (st != nccl_abi::kInProgress) return st;
      std::this_thread::yield();
    }
    return st;
  }
  void drain() {
    const auto end = Clock::now() + std::chrono::seconds(60);
    int e = CudaOps::kNotReady;
    while (Clock::now() < end && (e = cuda->stream_query(s->stream())) == CudaOps::kNotReady) {
    }
    ASSERT_EQ(e, CudaOps::kSuccess) << "the stream did not drain";
  }
  /// A communicator of every rank, ready (init polled to ncclSuccess).
  nccl_abi::CommHandle make(bool blocking, const std::string& suffix = "") {
    nccl_abi::Config cfg;
    cfg.blocking = blocking ? 1 : 0;
    nccl_abi::CommHandle c = nullptr;
    const Result r = n->CommInitRankConfig(&c, s->size(), s->unique_id(key(suffix)), s->rank(), &cfg);
    comms.push_back(c);
    if (blocking) {
      EXPECT_EQ(r, nccl_abi::kSuccess) << n->GetLastError(c);
    } else {
      EXPECT_TRUE(r == nccl_abi::kInProgress || r == nccl_abi::kSuccess) << r;
      EXPECT_EQ(settle(c), nccl_abi::kSuccess) << n->GetLastError(c);
    }
    return c;
  }
  /// Ends a communicator whose calls all completed as a program should:
  /// finalize (which flushes what NCCL's proxy still sends to the peers),
  /// then destroy. An abort here could cut a peer's data in flight (seen on
  /// real NCCL: the peer's receive never completed); the fixture aborts only
  /// what a test left behind.
  void finish(nccl_abi::CommHandle c) {
    const Result f = n->CommFinalize(c);
    EXPECT_TRUE(f == nccl_abi::kInProgress || f == nccl_abi::kSuccess) << f;
    EXPECT_EQ(settle(c), nccl_abi::kSuccess);
    EXPECT_EQ(n->CommDestroy(c), nccl_abi::kSuccess);
    std::erase(comms, c);
  }
  Result all_reduce(nccl_abi::CommHandle c, void* buf, std::size_t bytes) {
    return n->AllReduce(buf, buf, bytes / 4, kFloat, kSum, c, s->stream());
  }
  void* event() {
    void* e = nullptr;
    EXPECT_EQ(cuda->event_create(&e), CudaOps::kSuccess);
    return e;
  }
  double ms(void* a, void* b) {
    float v = -1;
    EXPECT_EQ(cuda->event_elapsed_ms(&v, a, b), CudaOps::kSuccess);
    return v;
  }
  /// One all-reduce of `bytes` timed by events recorded only once NCCL has
  /// put it on the stream: gpudiag's way (comm/nccl_comm.cpp).
  double timed_after_launch(nccl_abi::CommHandle c, void* buf, std::size_t bytes) {
    void *e0 = event(), *e1 = event();
    cuda->event_record(e0, s->stream());
    const Result r = all_reduce(c, buf, bytes);
    EXPECT_TRUE(r == nccl_abi::kSuccess || r == nccl_abi::kInProgress) << r;
    EXPECT_EQ(settle(c), nccl_abi::kSuccess);
    cuda->event_record(e1, s->stream());
    drain();
    return ms(e0, e1);
  }
  std::unique_ptr<ContractSubject> s;
  const NcclApi* n = nullptr;
  const CudaOps* cuda = nullptr;
  std::vector<nccl_abi::CommHandle> comms;
};

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
// always joins the group, even to the rank itself).
TEST_P(NcclContract, GroupedSendRecvReturnsInProgress) {
  auto c = make(false);
  void *out = s->device(kSmall), *in = s->device(kSmall);
  const int next = (s->rank() + 1) % s->size(), prev = (s->rank() + s->size() - 1) % s->size();
  ASSERT_EQ(n->GroupStart(), nccl_abi::kSuccess);
  ASSERT_EQ(n->Send(out, kSmall / 4, kFloat, next, c, s->stream()), nccl_abi::kSuccess);
  ASSERT_EQ(n->Recv(in, kSmall / 4, kFloat, prev, c, s->stream()), nccl_abi::kSuccess);
  EXPECT_EQ(n->GroupEnd(), nccl_abi::kInProgress);
  EXPECT_EQ(settle(c), nccl_abi::kSuccess);
  drain();
  finish(c);
}

// src/enqueue.cc ncclEnqueueCheck: a collective's implicit group at 2+ ranks
// is launched by a thread; the communicator's first launch also connects
// to the peers, so it is still pending when the call returns.
TEST_P(NcclContract, FirstCollectiveAtTwoRanksIsPendingWhenItReturns) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  auto c = make(false);
  void* buf = s->device(kSmall);
  EXPECT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kInProgress);
  EXPECT_EQ(settle(c), nccl_abi::kSuccess);
  drain();
  finish(c);
}

// src/init.cc ncclCommEnsureReady: a call while the previous one is pending
// is refused with ncclInvalidArgument and NCCL's last error says why; the
// same for ncclCommFinalize. (What gpudiag's old back-to-back loop did.)
TEST_P(NcclContract, CallWhilePendingIsRefused) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  auto c = make(false);
  void* buf = s->device(kSmall);
  ASSERT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kInProgress);
  EXPECT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kInvalidArgument);
  EXPECT_NE(std::string(n->GetLastError(c)).find("before the previous operation returned ncclSuccess"),
            std::string::npos)
      << n->GetLastError(c);
  EXPECT_EQ(n->CommFinalize(c), nccl_abi::kInvalidArgument);
}

// The same rule seen from the stream: the kernel reaches it only when the
// launch leaves ncclInProgress, so an event recorded before then times
// nothing, and one recorded after it follows the kernel.
TEST_P(NcclContract, EventRecordedWhilePendingTimesNothing) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
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
  ASSERT_EQ(all_reduce(c, buf, kSmall), s->size() == 1 ? nccl_abi::kSuccess : nccl_abi::kInProgress);
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

INSTANTIATE_TEST_SUITE_P(Nccl, NcclContract, ::testing::ValuesIn(contract_params()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gpudiag
