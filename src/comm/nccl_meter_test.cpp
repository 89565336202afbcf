// The one NCCL meter (nccl_comm.cpp run_timed, behind the check's timed
// all-reduce, the link test's exchange, the sweep's pair meter and bench)
// against the NCCL model with NCCL's launch cost made visible: a launch
// thread that takes 100 us of host time per call (src/group.cc
// groupLaunchNonBlocking) and a kernel of 140 us (a 32 MiB all-reduce on
// 8 H100s). Every figure must be the kernel's within 2%: the stream gate
// keeps the launch outside the interval. The same runs with the gate taken
// out of the CUDA table read the launch into single-call figures, so these
// tests fail if the meter loses its gate.
#include <gtest/gtest.h>

#include <algorithm>

#include "comm/nccl.h"
#include "comm/nccl_model.h"
#include "util/error.h"

namespace gpudiag {
namespace {

constexpr double kLaunchUs = 100, kKernelUs = 140;
// kernel_us(bytes) = latency + bytes / bytes_per_us = 8 + 132,000 / 1,000.
constexpr std::size_t kBytes = 132000;

struct Meter {
  explicit Meter(int size, bool gated = true) : Meter(options(size), gated) {}
  Meter(const NcclModel::Options& o, bool gated) : model(o) {
    const int size = o.nranks;
    cuda = model.cuda();
    if (!gated) cuda.gate_create = nullptr;
    ctx.nccl = &model.nccl();
    ctx.cuda = &cuda;
    ctx.stream = model.stream();
    ctx.scratch = &scratch;
    comm = make_nccl_communicator(ctx, nccl_make_unique_id(model.nccl()), 0, size,
                                  Deadline::after_seconds(10), nullptr);
    comm->barrier(Deadline::after_seconds(10));  // connects, as every meter's warm-up does
  }
  static NcclModel::Options options(int size) {
    NcclModel::Options o;
    o.nranks = size;
    o.launch_us = kLaunchUs;
    return o;
  }
  NcclModel model;
  CudaOps cuda;
  NcclContext ctx;
  float scratch = 0;
  std::vector<float> a = std::vector<float>(kBytes / 4), b = std::vector<float>(kBytes / 4);
  std::unique_ptr<Communicator> comm;
};

CollCall all_reduce(Meter& m) {
  return {Coll::all_reduce, DType::float32, RedOp::sum, 0, m.a.data(), m.a.data(), kBytes / 4};
}

class NcclMeter : public ::testing::TestWithParam<int> {};

TEST_P(NcclMeter, TheChecksSingleCallIsTheKernel) {
  Meter m(GetParam());
  ASSERT_DOUBLE_EQ(m.model.kernel_us(kBytes), kKernelUs);
  for (int i = 0; i < 5; ++i) {
    const double s = m.comm->all_reduce_timed(m.a.data(), m.a.size(), 1, Deadline::after_seconds(10));
    EXPECT_NEAR(s * 1e6, kKernelUs, kKernelUs * 0.02) << "iteration " << i;
  }
  EXPECT_EQ(m.model.refused_calls(), 0);
}

TEST_P(NcclMeter, TheLinkTestsExchangeIsTheKernels) {
  Meter m(GetParam());
  // A send and a receive: two kernels of the model's (nccl_meter_test's expected_seconds).
  const double s =
      m.comm->send_recv_timed(1, m.a.data(), m.b.data(), m.a.size(), 1, Deadline::after_seconds(10));
  EXPECT_NEAR(s * 1e6, 2 * kKernelUs, 2 * kKernelUs * 0.02);
}

TEST_P(NcclMeter, TheSweepsBlockingExchangesAreTheKernel) {
  Meter m(GetParam());
  const auto t = m.comm->run_timed(all_reduce(m), 7, true, Deadline::after_seconds(10));
  ASSERT_EQ(t.size(), 7u);
  for (double s : t) EXPECT_NEAR(s * 1e6, kKernelUs, kKernelUs * 0.02);
}

TEST_P(NcclMeter, BenchsQueuedCallsAreTheKernelAcrossBatches) {
  Meter m(GetParam());
  // 70 calls: three batches behind the gate (32, 32, 6).
  const auto t = m.comm->run_timed(all_reduce(m), 70, false, Deadline::after_seconds(10));
  ASSERT_EQ(t.size(), 70u);
  for (double s : t) EXPECT_NEAR(s * 1e6, kKernelUs, kKernelUs * 0.02);
  EXPECT_EQ(m.model.refused_calls(), 0);
}

TEST_P(NcclMeter, PastTheEventLimitEachCallGetsTheMean) {
  Meter m(GetParam());
  const auto t = m.comm->run_timed(all_reduce(m), 1100, false, Deadline::after_seconds(30));
  ASSERT_EQ(t.size(), 1100u);
  EXPECT_NEAR(t.front() * 1e6, kKernelUs, kKernelUs * 0.02);
  EXPECT_NEAR(t.back() * 1e6, kKernelUs, kKernelUs * 0.02);
}

// The control: without the gate a single call's events bracket NCCL's
// launch too (the figure the check printed before: 25-40% low busbw).
TEST_P(NcclMeter, WithoutTheGateTheLaunchIsInTheFigure) {
  Meter m(GetParam(), false);
  const double s = m.comm->all_reduce_timed(m.a.data(), m.a.size(), 1, Deadline::after_seconds(10));
  EXPECT_GT(s * 1e6, kKernelUs + kLaunchUs * 0.9);
}

// A gate whose batch is never all launched (a launch waiting on the device,
// a host that died) lets go after its cap of device time: the work behind
// it runs, the stream drains, and the gate says it expired.
TEST(NcclMeterGate, AGateHeldPastItsCapLetsTheWorkRun) {
  NcclModel model({});
  const CudaOps& cu = model.cuda();
  void* gate = nullptr;
  ASSERT_EQ(cu.gate_create(&gate), CudaOps::kSuccess);
  void *e0 = nullptr, *e1 = nullptr;
  cu.event_create(&e0);
  cu.event_create(&e1);
  ASSERT_EQ(cu.gate_hold(gate, model.stream(), 1000), CudaOps::kSuccess);
  cu.event_record(e0, model.stream());
  std::vector<char> x(64000);
  cu.memset_async(x.data(), 0, x.size(), model.stream());
  cu.event_record(e1, model.stream());
  int polls = 0;
  while (cu.stream_query(model.stream()) == CudaOps::kNotReady) ASSERT_LT(++polls, 100000);
  EXPECT_EQ(cu.gate_expired(gate), 1);
  float ms = 0;
  ASSERT_EQ(cu.event_elapsed_ms(&ms, e0, e1), CudaOps::kSuccess);
  EXPECT_NEAR(ms * 1e3, model.kernel_us(x.size()), 1);
  // Opened in time, the next hold does not expire.
  ASSERT_EQ(cu.gate_hold(gate, model.stream(), 1000), CudaOps::kSuccess);
  cu.gate_open(gate);
  while (cu.stream_query(model.stream()) == CudaOps::kNotReady) ASSERT_LT(++polls, 200000);
  EXPECT_EQ(cu.gate_expired(gate), 0);
}

// At one rank NCCL puts a collective on the stream before returning
// (src/enqueue.cc taskAppend: ncclLaunchOneRank on the caller's thread): the
// gate opens at the first call and the device runs as the host queues, as in
// nccl-tests' loop, whose small sizes run at the host's launch rate. Held
// for the whole batch the gate would show the kernel alone (0.5 us here),
// below what nccl-tests reports for the same calls (the model's host takes
// 1 us a call).
TEST(NcclMeterOneRank, InlineLaunchesAreTimedAsTheHostQueuesThem) {
  NcclModel::Options o;
  o.nranks = 1;
  o.kernel_latency_us = 0.5;
  NcclModel model(o);
  NcclContext ctx{&model.nccl(), &model.cuda(), model.stream(), nullptr, nullptr};
  float scratch = 0;
  ctx.scratch = &scratch;
  auto comm = make_nccl_communicator(ctx, nccl_make_unique_id(model.nccl()), 0, 1,
                                     Deadline::after_seconds(10), nullptr);
  float x[2] = {};
  const CollCall c{Coll::all_reduce, DType::float32, RedOp::sum, 0, x, x, 1};
  const auto t = comm->run_timed(c, 40, false, Deadline::after_seconds(10), false);
  ASSERT_EQ(t.size(), 40u);
  EXPECT_GT(t[0] * 1e6, 0.9);  // the host's microsecond a call, not the kernel's half
  EXPECT_LT(t[0] * 1e6, 1.6);
}

// nccl-tests' alltoall_perf calls ncclAlltoAll where NCCL has it (2.28+), a
// copy at one rank and nothing at all for an empty call (src/enqueue.cc
// taskAppend); gpudiag does the same, and the group of sends and receives
// only where the library lacks it.
TEST(NcclMeterOneRank, AlltoallIsNcclsOwnWhereItExists) {
  for (bool has : {true, false}) {
    NcclModel::Options o;
    o.nranks = 1;
    o.has_alltoall = has;
    NcclModel model(o);
    NcclContext ctx{&model.nccl(), &model.cuda(), model.stream(), nullptr, nullptr};
    float scratch = 0;
    ctx.scratch = &scratch;
    auto comm = make_nccl_communicator(ctx, nccl_make_unique_id(model.nccl()), 0, 1,
                                       Deadline::after_seconds(10), nullptr);
    std::vector<float> a(1024), b(1024);
    const int before = model.kernels();
    comm->run({Coll::alltoall, DType::float32, RedOp::sum, 0, a.data(), b.data(), 1024},
              Deadline::after_seconds(10));
    EXPECT_EQ(model.kernels() - before, has ? 1 : 2) << (has ? "ncclAlltoAll" : "send+recv");
    const int mid = model.kernels();
    comm->run({Coll::alltoall, DType::float32, RedOp::sum, 0, a.data(), b.data(), 0},
              Deadline::after_seconds(10));
    if (has) EXPECT_EQ(model.kernels(), mid) << "an empty ncclAlltoAll is discarded";
  }
}

// Peers whose launch loops are slower than this rank's (each its own launch
// time: a loaded host, a slower CPU) open their gates later, and a
// collective's kernel waits on the device for every peer's copy. The
// untimed aligning call at the head of each gated batch absorbs that wait,
// so every figure is still the kernel's: the single call of the check, the
// batches of bench, the blocking exchanges of the sweep.
NcclModel::Options skewed(int size) {
  NcclModel::Options o = Meter::options(size);
  for (int p = 1; p < size; ++p) o.peer_launch_us.push_back(kLaunchUs + 60.0 * p / (size - 1));
  return o;
}

TEST_P(NcclMeter, SkewedPeersAreOutsideTheChecksSingleCall) {
  Meter m(skewed(GetParam()), true);
  for (int i = 0; i < 5; ++i) {
    const double s = m.comm->all_reduce_timed(m.a.data(), m.a.size(), 1, Deadline::after_seconds(10));
    EXPECT_NEAR(s * 1e6, kKernelUs, kKernelUs * 0.02) << "iteration " << i;
  }
}

TEST_P(NcclMeter, SkewedPeersAreOutsideEveryBatch) {
  Meter m(skewed(GetParam()), true);
  for (bool blocking : {false, true}) {
    const auto t = m.comm->run_timed(all_reduce(m), 70, blocking, Deadline::after_seconds(10));
    ASSERT_EQ(t.size(), 70u);
    for (double s : t) EXPECT_NEAR(s * 1e6, kKernelUs, kKernelUs * 0.02) << "blocking " << blocking;
  }
  EXPECT_EQ(m.comm->ungated(), "");
}

// The control: the skewed peers do reach the figure where nothing aligns
// them (here, no gate: the slowest peer's launch is in every call).
TEST_P(NcclMeter, WithoutAlignmentTheSkewIsInTheFigure) {
  Meter m(skewed(GetParam()), false);
  const double s = m.comm->all_reduce_timed(m.a.data(), m.a.size(), 1, Deadline::after_seconds(10));
  EXPECT_GT(s * 1e6, kKernelUs + kLaunchUs + 50);
  EXPECT_EQ(m.comm->ungated(), "no stream gate");
}

// A threaded launch that has ended by the call's trailing
// ncclCommGetAsyncError (the caller was descheduled meanwhile) returns
// ncclSuccess at 2+ ranks. The gate stays held all the same: whether NCCL
// launches on the caller's thread is decided from what was called.
TEST_P(NcclMeter, ALaunchEndedBeforeTheCallReturnedKeepsTheGateHeld) {
  NcclModel::Options o = Meter::options(GetParam());
  o.launch_ends_before_return = true;
  Meter m(o, true);
  for (int i = 0; i < 3; ++i) {
    const double s = m.comm->all_reduce_timed(m.a.data(), m.a.size(), 1, Deadline::after_seconds(10));
    EXPECT_NEAR(s * 1e6, kKernelUs, kKernelUs * 0.02) << "iteration " << i;
  }
  const auto t = m.comm->run_timed(all_reduce(m), 40, false, Deadline::after_seconds(10));
  for (double s : t) EXPECT_NEAR(s * 1e6, kKernelUs, kKernelUs * 0.02);
}

// An abort while calls wait behind the held gate (a peer reported dead in
// the middle of a batch) opens the gate first: NCCL's teardown waits for the
// communicator's work on the stream (the model's reclaim, as src/init.cc
// commDestroySync), which behind a held gate would be the gate's 1 s cap.
TEST_P(NcclMeter, AnAbortMidBatchOpensTheGateFirst) {
  Meter m(GetParam());
  int polls = 0;
  m.comm->set_abort_check([&]() -> std::optional<std::string> {
    if (++polls < 350) return std::nullopt;  // ~100 polls a launch: the third call's
    return std::string("rank 1 reported dead");
  });
  const double before = m.model.host_us();
  const int kernels = m.model.kernels();
  EXPECT_THROW(m.comm->run_timed(all_reduce(m), 32, false, Deadline::after_seconds(10)), Error);
  EXPECT_EQ(m.model.aborts(), 1);
  EXPECT_GE(m.model.kernels() - kernels, 2) << "no call was queued behind the gate";
  EXPECT_LT(m.model.host_us() - before, 100000) << "the abort waited for the gate's cap";
}

// What the aligning call is for, on the model's own tables: a gated batch
// timed from its first call reads the last peer's later gate into the
// figure; one whose first event follows an untimed call reads the kernel.
TEST(NcclMeterModel, SkewedPeersReachAGatedBatchThatIsNotAligned) {
  NcclModel model(skewed(2));
  const NcclApi& n = model.nccl();
  const CudaOps& cu = model.cuda();
  void* const st = model.stream();
  auto settle = [&](nccl_abi::CommHandle c) {
    nccl_abi::Result r = nccl_abi::kInProgress;
    for (int i = 0; i < 100000 && r == nccl_abi::kInProgress; ++i) n.CommGetAsyncError(c, &r);
    return r;
  };
  auto drain = [&] {
    for (int i = 0; i < 100000 && cu.stream_query(st) == CudaOps::kNotReady; ++i) {
    }
  };
  nccl_abi::UniqueId id{};
  ASSERT_EQ(n.GetUniqueId(&id), nccl_abi::kSuccess);
  nccl_abi::Config cfg;
  cfg.blocking = 0;
  nccl_abi::CommHandle c = nullptr;
  n.CommInitRankConfig(&c, 2, id, 0, &cfg);
  ASSERT_EQ(settle(c), nccl_abi::kSuccess);
  std::vector<float> x(kBytes / 4);
  auto call = [&] {
    n.AllReduce(x.data(), x.data(), x.size(), 7, 0, c, st);  // ncclFloat32, ncclSum
    ASSERT_EQ(settle(c), nccl_abi::kSuccess);
  };
  call();  // connects
  drain();
  void* gate = nullptr;
  ASSERT_EQ(cu.gate_create(&gate), CudaOps::kSuccess);
  double us[2] = {0, 0};
  for (int aligned = 0; aligned < 2; ++aligned) {
    void *e0 = nullptr, *e1 = nullptr;
    cu.event_create(&e0);
    cu.event_create(&e1);
    ASSERT_EQ(cu.gate_hold(gate, st, 1000000), CudaOps::kSuccess);
    if (aligned) call();
    cu.event_record(e0, st);
    call();
    cu.event_record(e1, st);
    cu.gate_open(gate);
    drain();
    float ms = 0;
    ASSERT_EQ(cu.event_elapsed_ms(&ms, e0, e1), CudaOps::kSuccess);
    us[aligned] = ms * 1e3;
  }
  EXPECT_NEAR(us[1], kKernelUs, kKernelUs * 0.02) << "aligned";
  EXPECT_GT(us[0], kKernelUs + 30) << "the peer's later gate is not in the unaligned figure";
  n.CommAbort(c);
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclMeter, ::testing::Values(2, 8));

}  // namespace
}  // namespace gpudiag
