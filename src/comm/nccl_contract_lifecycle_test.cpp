// The NCCL contract, second part (the first, the launch rules, is
// nccl_contract_test.cpp; both run against the model and real NCCL alike):
// a communicator's end (destroy, finalize and abort of one that is pending or
// in an error state), several communicators one after another, the unique
// id, the environment NCCL reads (NCCL_COMM_BLOCKING, NCCL_COMM_ID) and its
// process-wide last error. Each test names the NCCL source it states (tag
// v2.28.9-1 unless another is named). A test that leaves its thread's NCCL
// group open closes it itself, so the tests after it on real NCCL (the same
// process, the same thread) are not disturbed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "comm/nccl_contract_fixture.h"

namespace gpudiag {
namespace nccl_contract_lifecycle_test {  // named: the unity build puts this folder's tests in one unit

using nccl_abi::Result;
constexpr std::size_t kSmall = NcclContract::kSmall;
constexpr int kFloat = NcclContract::kFloat;

class NcclContractLifecycle : public NcclContract {
 protected:
  /// After a refused ncclCommDestroy: the group it opened is open where the
  /// version opens one, and this closes it; then no group is open.
  void expect_group_left_open() {
    if (destroy_opens_a_group()) {
      EXPECT_EQ(n->GroupEnd(), nccl_abi::kSuccess) << "ncclCommDestroy left its group open";
    }
    EXPECT_EQ(n->GroupEnd(), nccl_abi::kInvalidUsage) << "a group is still open";
  }
  std::string last() const { return n->GetLastError(nullptr); }
};

constexpr const char* kNotReady = "before the previous operation returned ncclSuccess";

// src/init.cc ncclCommDestroy: "init thread must be joined before we destroy
// the comm": NCCLCHECK(ncclCommEnsureReady(comm)) refuses a pending
// communicator with ncclInvalidArgument and returns at once, so nothing is
// freed (the handle still answers) and the refusal is not its state. In
// 2.24-2.26 and from 2.28 ncclGroupStartInternal came first and its
// ncclGroupEndInternal is never reached: the thread's group stays open
// (ncclGroupDepth 1) until something closes it.
TEST_P(NcclContractLifecycle, DestroyWhilePendingIsRefusedAndLeavesTheGroupOpen) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  auto c = make(false);
  if (s->rank() == 0) {
    void *out = s->device(kSmall), *in = s->device(kSmall);
    EXPECT_EQ(start_pending(c, out, in), nccl_abi::kInProgress);
    EXPECT_EQ(n->CommDestroy(c), nccl_abi::kInvalidArgument);
    EXPECT_NE(last().find(kNotReady), std::string::npos) << last();
    Result st = nccl_abi::kSuccess;
    EXPECT_EQ(n->CommGetAsyncError(c, &st), nccl_abi::kSuccess);
    EXPECT_EQ(st, nccl_abi::kInProgress)
        << "still pending: nothing freed, the refusal not its state";
    expect_group_left_open();
  }
  after_rank0("_checked");
  abort_in_time(c);
}

// The same for a communicator in an error state: ncclCommEnsureReady returns
// that error (a call refused while pending made it one: src/enqueue.cc
// ncclEnqueueCheck's fail path), and ncclCommFinalize is refused for it too.
TEST_P(NcclContractLifecycle, DestroyOfAnErroredCommunicatorIsRefusedWithItsError) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  auto c = make(false);
  if (s->rank() == 0) {
    void *out = s->device(kSmall), *in = s->device(kSmall);
    EXPECT_EQ(start_pending(c, out, in), nccl_abi::kInProgress);
    EXPECT_EQ(all_reduce(c, out, kSmall), nccl_abi::kInvalidArgument);
    Result st = nccl_abi::kSuccess;
    EXPECT_EQ(n->CommGetAsyncError(c, &st), nccl_abi::kSuccess);
    EXPECT_EQ(st, nccl_abi::kInvalidArgument) << "the refused call made it an error state";
    EXPECT_EQ(n->CommFinalize(c), nccl_abi::kInvalidArgument);
    EXPECT_EQ(n->CommDestroy(c), nccl_abi::kInvalidArgument);
    expect_group_left_open();
  }
  after_rank0("_checked");
  abort_in_time(c);
}

// src/init.cc ncclCommFinalize while pending: ncclCommEnsureReady refuses it
// (the WARN), and its fail path makes the refusal a non-blocking
// communicator's state (ncclCommSetAsyncError): from then on the
// communicator is in an error state, and only an abort ends it.
TEST_P(NcclContractLifecycle, FinalizeWhilePendingIsRefusedAndItsRefusalBecomesTheState) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  auto c = make(false);
  if (s->rank() == 0) {
    void *out = s->device(kSmall), *in = s->device(kSmall);
    EXPECT_EQ(start_pending(c, out, in), nccl_abi::kInProgress);
    EXPECT_EQ(n->CommFinalize(c), nccl_abi::kInvalidArgument);
    EXPECT_NE(last().find(kNotReady), std::string::npos) << last();
    Result st = nccl_abi::kSuccess;
    EXPECT_EQ(n->CommGetAsyncError(c, &st), nccl_abi::kSuccess);
    EXPECT_EQ(st, nccl_abi::kInvalidArgument);
  }
  after_rank0("_checked");
  abort_in_time(c);
}

// What an open group does to the thread's later calls (src/group.cc
// ncclGroupEndInternal: an end that leaves the depth above 0 launches
// nothing): after a refused destroy, a collective on another, ready
// communicator returns ncclSuccess with nothing on the stream, and runs only
// once ncclGroupEnd closes the group. So a program that destroys a
// communicator that is not ready silently stops launching.
TEST_P(NcclContractLifecycle, AfterARefusedDestroyTheThreadsCallsNeverLaunch) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  NEED_RANKS(destroy_opens_a_group(), "ncclCommDestroy opens a group in 2.24-2.26 and from 2.28");
  auto a = make(false, "_a");
  auto b = make(false, "_b");
  void* buf = s->device(kSmall);
  if (s->rank() == 0) {
    void *out = s->device(kSmall), *in = s->device(kSmall);
    EXPECT_EQ(start_pending(a, out, in), nccl_abi::kInProgress);
    EXPECT_EQ(n->CommDestroy(a), nccl_abi::kInvalidArgument);
    EXPECT_EQ(all_reduce(b, buf, kSmall), nccl_abi::kSuccess) << "joined the open group";
    Result st = nccl_abi::kInProgress;
    EXPECT_EQ(n->CommGetAsyncError(b, &st), nccl_abi::kSuccess);
    EXPECT_EQ(st, nccl_abi::kSuccess);
    EXPECT_EQ(cuda->stream_query(s->stream()), CudaOps::kSuccess) << "something was launched";
    EXPECT_EQ(n->GroupEnd(), nccl_abi::kInProgress) << "closing the group launches it";
  } else {
    EXPECT_EQ(all_reduce(b, buf, kSmall), nccl_abi::kInProgress);
  }
  EXPECT_EQ(settle(b), nccl_abi::kSuccess);
  drain();
  abort_in_time(a);
  finish(b);
}

// src/init.cc ncclCommAbort of a communicator whose non-blocking init is
// still pending (the init deadline's path): the abort flag stops the init
// thread and ncclCommEnsureReady joins it (src/group.cc ncclGroupJobAbort),
// so the abort returns. Its commReclaim frees nothing: it acts only on a
// communicator whose init reached initTransportsRank (comm->intraComm0), so
// such a communicator's memory stays allocated (the model counts it).
TEST_P(NcclContractLifecycle, AbortOfAPendingInitReturns) {
  NEED_RANKS(s->size() >= 2, "needs 2+ ranks");
  if (s->rank() != 0) return;  // the others never take part
  s->peers_absent(true);
  nccl_abi::CommHandle c = nullptr;
  EXPECT_EQ(start_init(c, false, ""), nccl_abi::kInProgress);
  EXPECT_EQ(settle(c, s->real() ? 2.0 : 0.05), nccl_abi::kInProgress);
  s->peers_absent(false);
  abort_in_time(c);
}

// The sweep's pattern: communicators one after another in one process, each
// from its own id, one of which never completes (its peer is absent) and is
// aborted; the next one is not disturbed.
TEST_P(NcclContractLifecycle, CommunicatorsOneAfterAnotherSurviveOneWithAnAbsentPeer) {
  void* buf = s->device(kSmall);
  for (const char* name : {"_a", "_b", "_c"}) {
    if (std::string(name) == "_b") {
      if (s->size() < 2 || s->rank() != 0) continue;
      s->peers_absent(true);
      nccl_abi::CommHandle b = nullptr;
      EXPECT_EQ(start_init(b, false, name), nccl_abi::kInProgress);
      EXPECT_EQ(settle(b, s->real() ? 2.0 : 0.05), nccl_abi::kInProgress);
      s->peers_absent(false);
      abort_in_time(b);
      continue;
    }
    auto c = make(false, name);
    const Result r = all_reduce(c, buf, kSmall);
    EXPECT_TRUE(r == nccl_abi::kSuccess || r == nccl_abi::kInProgress) << name << ": " << r;
    EXPECT_EQ(settle(c), nccl_abi::kSuccess) << name << ": " << last();
    drain();
    finish(c);
  }
}

// A send and a receive to the same peer in one group (gpudiag's pair
// exchange; src/enqueue.cc p2pTaskAppend takes each): one launch, both done.
TEST_P(NcclContractLifecycle, GroupedSendAndRecvToTheSamePeer) {
  NEED_RANKS(s->size() == 1 || s->size() % 2 == 0, "pairs ranks 0-1, 2-3, ...");
  auto c = make(false);
  const int peer = s->size() == 1 ? 0 : s->rank() ^ 1;
  void *out = s->device(kSmall), *in = s->device(kSmall);
  ASSERT_EQ(n->GroupStart(), nccl_abi::kSuccess);
  EXPECT_EQ(n->Send(out, kSmall / 4, kFloat, peer, c, s->stream()), nccl_abi::kSuccess);
  EXPECT_EQ(n->Recv(in, kSmall / 4, kFloat, peer, c, s->stream()), nccl_abi::kSuccess);
  EXPECT_EQ(n->GroupEnd(),
            threaded() || s->size() > 1 ? nccl_abi::kInProgress : nccl_abi::kSuccess);
  EXPECT_EQ(settle(c), nccl_abi::kSuccess) << last();
  drain();
  finish(c);
}

// src/init.cc ncclGetUniqueId -> src/bootstrap.cc bootstrapGetUniqueId: a
// random magic and a root of its own each time.
TEST_P(NcclContractLifecycle, UniqueIdsAreDistinct) {
  nccl_abi::UniqueId a{}, b{};
  ASSERT_EQ(n->GetUniqueId(&a), nccl_abi::kSuccess);
  ASSERT_EQ(n->GetUniqueId(&b), nccl_abi::kSuccess);
  EXPECT_NE(std::memcmp(a.internal, b.internal, sizeof a.internal), 0);
}

// An id that is no bootstrap handle (zeros: a stale or truncated id): the
// init returns ncclInProgress and fails on its thread, where src/bootstrap.cc
// sendToRoot's src/misc/socket.cc ncclSocketInit refuses an address of
// family 0 with ncclInternalError.
TEST_P(NcclContractLifecycle, AnIdOfZerosFailsTheInitOnItsThread) {
  nccl_abi::Config cfg;
  cfg.blocking = 0;
  nccl_abi::CommHandle c = nullptr;
  const Result r = n->CommInitRankConfig(&c, s->size(), nccl_abi::UniqueId{}, s->rank(), &cfg);
  comms.push_back(c);
  EXPECT_TRUE(r == nccl_abi::kInProgress || r == nccl_abi::kInternalError) << r;
  EXPECT_EQ(settle(c), nccl_abi::kInternalError);
  EXPECT_NE(last().find("neither AF_INET"), std::string::npos) << last();
  abort_in_time(c);
}

// An id whose communicator was made already: its root heard every rank and
// ended (src/bootstrap.cc bootstrapRoot), so the connection is refused,
// retried NCCL_SOCKET_RETRY_CNT times (34, about a minute) and fails with
// ncclRemoteError (src/misc/socket.cc socketConnectCheck).
TEST_P(NcclContractLifecycle, AnIdAlreadyUsedIsRefusedByItsEndedRoot) {
  const char* retries = std::getenv("NCCL_SOCKET_RETRY_CNT");
  NEED_RANKS(!s->real() || (retries && std::atoi(retries) <= 3),
             "real NCCL retries for a minute: run with NCCL_SOCKET_RETRY_CNT=1");
  const nccl_abi::UniqueId id = s->unique_id(key());
  nccl_abi::Config cfg;
  cfg.blocking = 0;
  nccl_abi::CommHandle a = nullptr, b = nullptr;
  n->CommInitRankConfig(&a, s->size(), id, s->rank(), &cfg);
  comms.push_back(a);
  ASSERT_EQ(settle(a), nccl_abi::kSuccess) << last();
  finish(a);
  const Result r = n->CommInitRankConfig(&b, s->size(), id, s->rank(), &cfg);
  comms.push_back(b);
  EXPECT_TRUE(r == nccl_abi::kInProgress || r == nccl_abi::kRemoteError) << r;
  EXPECT_EQ(settle(b, 120), nccl_abi::kRemoteError);
  EXPECT_NE(last().find("Connection refused"), std::string::npos) << last();
  abort_in_time(b);
}

// src/init.cc ncclGetLastError: "comm is currently unused"; the text is
// src/debug.cc's one ncclLastError, which every WARN of the process writes
// (any thread, any communicator) and nothing clears: a success leaves it.
TEST_P(NcclContractLifecycle, GetLastErrorIsProcessWide) {
  auto c = make(false);
  void* buf = s->device(kSmall);
  EXPECT_EQ(n->GroupEnd(), nccl_abi::kInvalidUsage);  // a WARN of no communicator
  const std::string warn = "ncclGroupEnd: not in a group call.";
  EXPECT_EQ(std::string(n->GetLastError(c)), warn);
  EXPECT_EQ(last(), warn);
  const Result r = all_reduce(c, buf, kSmall);
  EXPECT_TRUE(r == nccl_abi::kSuccess || r == nccl_abi::kInProgress) << r;
  EXPECT_EQ(settle(c), nccl_abi::kSuccess);
  drain();
  EXPECT_EQ(std::string(n->GetLastError(c)), warn) << "a success does not clear it";
  finish(c);
}

// src/init.cc envConfigOverride (called by parseCommConfig at every init):
// NCCL_COMM_BLOCKING=1 makes the communicator blocking whatever its config
// asks, silently: the init, its collectives and its finalize return done.
TEST_P(NcclContractLifecycle, NcclCommBlockingMakesANonBlockingConfigBlocking) {
  if (!with_env({{"NCCL_COMM_BLOCKING", "1"}}))
    GTEST_SKIP() << "real NCCL reads it once a process: run with NCCL_COMM_BLOCKING=1";
  nccl_abi::CommHandle c = nullptr;
  EXPECT_EQ(start_init(c, /*blocking=*/false, ""), nccl_abi::kSuccess) << last();
  void* buf = s->device(kSmall);
  EXPECT_EQ(all_reduce(c, buf, kSmall), nccl_abi::kSuccess);
  drain();
  EXPECT_EQ(n->CommFinalize(c), nccl_abi::kSuccess);
  EXPECT_EQ(n->CommDestroy(c), nccl_abi::kSuccess);
  std::erase(comms, c);
}

// NCCL_COMM_ID=host:port: src/bootstrap.cc bootstrapGetUniqueId returns that
// address with NCCL_MAGIC and starts no root; rank 0's init starts the root
// there (src/init.cc ncclCommInitRankDev: bootstrapCreateRoot(handle, true),
// SO_REUSEPORT: src/misc/socket.cc ncclSocketListen). Communicators one
// after another work (each root ends once its ranks checked in); two
// initialising at once share one port, and their ranks' check-ins land at
// either root: the model never completes them (on real NCCL it is luck).
TEST_P(NcclContractLifecycle, NcclCommIdGivesEveryIdThatAddress) {
  if (!with_env({{"NCCL_COMM_ID", "127.0.0.1:29517"}}))
    GTEST_SKIP() << "real NCCL: run with NCCL_COMM_ID=127.0.0.1:29517";
  nccl_abi::UniqueId a{}, b{};
  ASSERT_EQ(n->GetUniqueId(&a), nccl_abi::kSuccess);
  ASSERT_EQ(n->GetUniqueId(&b), nccl_abi::kSuccess);
  EXPECT_EQ(std::memcmp(a.internal, b.internal, sizeof a.internal), 0);
  std::uint64_t magic = 0;
  std::memcpy(&magic, a.internal, sizeof magic);
  EXPECT_EQ(magic, 0x0280028002800280ull);  // src/include/comm.h NCCL_MAGIC
  finish(make(false, "_1"));
  finish(make(false, "_2"));
  if (s->real()) return;
  nccl_abi::CommHandle d = nullptr, e = nullptr;
  EXPECT_EQ(start_init(d, false, "_d"), nccl_abi::kInProgress);
  EXPECT_EQ(start_init(e, false, "_e"), nccl_abi::kInProgress);
  EXPECT_EQ(settle(d, 0.05), nccl_abi::kInProgress);
  EXPECT_EQ(settle(e, 0.05), nccl_abi::kInProgress);
}

INSTANTIATE_TEST_SUITE_P(Nccl, NcclContractLifecycle, ::testing::ValuesIn(contract_params()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gpudiag
