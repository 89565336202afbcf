// The NCCL contract suite's fixture, shared by its two files: the launch
// rules (nccl_contract_test.cpp) and a communicator's life, the unique id,
// the environment and the last error (nccl_contract_lifecycle_test.cpp).
// It makes communicators of every rank, polls them, ends them as a program
// should, and answers which NCCL version's rules apply.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "comm/nccl_contract_subject.h"

namespace gpudiag {

// In the test's body: GTEST_SKIP returns from the function it is in.
#define NEED_RANKS(ok, why) \
  if (!(ok)) GTEST_SKIP() << why

class NcclContract : public ::testing::TestWithParam<ContractParam> {
 public:
  static constexpr std::size_t kBig = 64u << 20, kSmall = 64u << 10;
  static constexpr int kFloat = 7, kSum = 0;

 protected:
  using Result = nccl_abi::Result;
  using Clock = std::chrono::steady_clock;

  void SetUp() override { use(make_contract_subject(GetParam())); }
  void TearDown() override {
    for (auto c : comms)
      if (c) n->CommAbort(c);
    comms.clear();
    s.reset();
  }
  void use(std::unique_ptr<ContractSubject> subject) {
    s = std::move(subject);
    if (!s) return;
    n = &s->nccl();
    cuda = &s->cuda();
  }
  /// A subject whose NCCL sees `env`; false (skip) on real NCCL when this
  /// process was not started with exactly that.
  bool with_env(const EnvVars& env) {
    auto subject = make_contract_subject(GetParam(), env);
    if (!subject) return false;
    use(std::move(subject));
    return true;
  }

  std::string key(const std::string& suffix = "") const {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string k = std::string(info->name()) + suffix;
    for (char& ch : k)
      if (ch == '/') ch = '_';
    return k;
  }
  int version() const {
    int v = 0;
    n->GetVersion(&v);
    return v;
  }
  /// src/group.cc ncclGroupEndInternal: from 2.23 every non-blocking group
  /// goes to a thread of NCCL's.
  bool threaded() const { return version() >= 22300; }
  /// src/init.cc ncclCommDestroy opens a group before its ncclCommEnsureReady
  /// in 2.24-2.26 and from 2.28.
  bool destroy_opens_a_group() const {
    const int v = version();
    return (v >= 22400 && v < 22700) || v >= 22800;
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
  /// Starts a non-blocking init; the handle is the fixture's to abort.
  Result start_init(nccl_abi::CommHandle& c, bool blocking, const std::string& suffix) {
    nccl_abi::Config cfg;
    cfg.blocking = blocking ? 1 : 0;
    const Result r =
        n->CommInitRankConfig(&c, s->size(), s->unique_id(key(suffix)), s->rank(), &cfg);
    comms.push_back(c);
    return r;
  }
  /// A communicator of every rank, ready (init polled to ncclSuccess).
  nccl_abi::CommHandle make(bool blocking, const std::string& suffix = "") {
    nccl_abi::CommHandle c = nullptr;
    const Result r = start_init(c, blocking, suffix);
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
  /// ncclCommAbort from another thread, as gpudiag's timeout paths may;
  /// it must return within 30 s.
  void abort_in_time(nccl_abi::CommHandle c) {
    auto done = std::async(std::launch::async, [&] { return n->CommAbort(c); });
    ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready)
        << "ncclCommAbort did not return in 30 s";
    EXPECT_EQ(done.get(), nccl_abi::kSuccess);
    std::erase(comms, c);
  }
  /// Rank 0 only, its peers absent: a grouped send and receive to its ring
  /// neighbours, the communicator's first, so it must connect and stays
  /// pending (src/transport.cc ncclTransportP2pSetup over the bootstrap) in
  /// every version: from 2.23 on the group's thread, before it on the
  /// preconnect's (src/group.cc v2.22.3-1 ncclGroupEndInternal).
  Result start_pending(nccl_abi::CommHandle c, void* out, void* in) {
    const int next = (s->rank() + 1) % s->size(), prev = (s->rank() + s->size() - 1) % s->size();
    s->peers_absent(true);
    EXPECT_EQ(n->GroupStart(), nccl_abi::kSuccess);
    EXPECT_EQ(n->Send(out, kSmall / 4, kFloat, next, c, s->stream()), nccl_abi::kSuccess);
    EXPECT_EQ(n->Recv(in, kSmall / 4, kFloat, prev, c, s->stream()), nccl_abi::kSuccess);
    const Result r = n->GroupEnd();
    EXPECT_EQ(settle(c, s->real() ? 2.0 : 0.05), nccl_abi::kInProgress);
    s->peers_absent(false);  // the launch waits on; later ones have their peers
    return r;
  }
  /// Rank 0 goes on, the others wait until it gets here (the subject's id
  /// exchange: rank 0 publishes, the others wait for it). What rank 0 checks
  /// alone on a communicator needs its peers' communicators alive meanwhile:
  /// an abort would close their end, and rank 0's launch would fail instead
  /// of staying pending.
  void after_rank0(const std::string& tag) { (void)s->unique_id(key(tag)); }
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

}  // namespace gpudiag
