// The NCCL communicator's control flow, driven through fake NCCL and CUDA
// tables on a machine without a GPU: init that never completes, an
// asynchronous error mid-collective, a group that returns ncclInProgress, a
// CUDA error, and a teardown that hangs. These prove gpudiag's logic around
// NCCL; NCCL's own rules (a pending launch, a refused call, the stream's
// timeline) are the model's (nccl_model.h), driven in nccl_comm_model_test.cpp
// and checked against real NCCL by the contract suite (nccl_contract_test.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "checks/watchdog.h"
#include "comm/nccl.h"
#include "util/error.h"

namespace gpudiag {
namespace nccl_comm_test {  // named: the unity build puts this folder's tests in one unit

using nccl_abi::Result;

/// What the fake NCCL does and what it saw. One at a time (tests run serially).
struct Fake {
  Result init_returns = nccl_abi::kInProgress;
  int init_polls_until_ready = 0;  ///< -1: never ready
  Result enqueue_returns = nccl_abi::kSuccess;
  Result group_end_returns = nccl_abi::kSuccess;
  int async_in_progress_polls = 0;  ///< polls answering ncclInProgress after an enqueue
  Result async_error = nccl_abi::kSuccess;
  const char* last_error = "";
  int stream_error = 0;            ///< CUDA code the stream query returns (0 = done)
  bool hang_in_abort = false;
  bool finalize_never_completes = false;
  // What was seen.
  int polls = 0, aborts = 0, finalizes = 0, destroys = 0;
  void* last_copy_stream = nullptr;
  int copies = 0, stream_queries = 0;
  int enqueues = 0, events_recorded = 0, events_alive = 0;
  int enqueues_at_first_query = -1;  ///< how many collectives were queued before the first wait
  std::vector<std::pair<int, const void*>> sends;  ///< (peer, buffer) per ncclSend
  std::vector<std::pair<int, void*>> recvs;
  int groups = 0;
};
Fake* g = nullptr;
nccl_abi::Comm* const kComm = reinterpret_cast<nccl_abi::Comm*>(0x1234);
void* const kStream = reinterpret_cast<void*>(0x5678);

Result init(nccl_abi::CommHandle* c, int, nccl_abi::UniqueId, int, nccl_abi::Config* cfg) {
  EXPECT_EQ(cfg->blocking, 0);
  EXPECT_EQ(cfg->magic, 0xcafebeefu);
  *c = kComm;
  return g->init_returns;
}
Result async_error(nccl_abi::CommHandle, Result* st) {
  ++g->polls;
  if (g->init_polls_until_ready != 0) {
    if (g->init_polls_until_ready > 0) --g->init_polls_until_ready;
    *st = nccl_abi::kInProgress;
    return nccl_abi::kSuccess;
  }
  if (g->finalize_never_completes && g->finalizes > 0) {
    *st = nccl_abi::kInProgress;
    return nccl_abi::kSuccess;
  }
  if (g->async_in_progress_polls > 0) {
    --g->async_in_progress_polls;
    *st = nccl_abi::kInProgress;
    return nccl_abi::kSuccess;
  }
  *st = g->async_error;
  return nccl_abi::kSuccess;
}
Result abort_comm(nccl_abi::CommHandle) {
  ++g->aborts;
  // A hung abort, bounded so a test without the watchdog fails instead of hanging.
  if (g->hang_in_abort) std::this_thread::sleep_for(std::chrono::seconds(60));
  return nccl_abi::kSuccess;
}
Result finalize(nccl_abi::CommHandle) {
  ++g->finalizes;
  return g->finalize_never_completes ? nccl_abi::kInProgress : nccl_abi::kSuccess;
}
Result destroy(nccl_abi::CommHandle) {
  ++g->destroys;
  return nccl_abi::kSuccess;
}
Result all_reduce(const void*, void*, std::size_t, int, int, nccl_abi::CommHandle, void* s) {
  EXPECT_EQ(s, kStream);
  ++g->enqueues;
  return g->enqueue_returns;
}
Result send(const void* buf, std::size_t, int, int peer, nccl_abi::CommHandle, void*) {
  g->sends.push_back({peer, buf});
  return nccl_abi::kSuccess;
}
Result recv(void* buf, std::size_t, int, int peer, nccl_abi::CommHandle, void*) {
  g->recvs.push_back({peer, buf});
  return nccl_abi::kSuccess;
}
Result group_start() {
  ++g->groups;
  return nccl_abi::kSuccess;
}
Result group_end() { return g->group_end_returns; }
const char* error_string(Result r) {
  return r == nccl_abi::kRemoteError ? "remote process exited or there was a network error"
                                     : "some NCCL error";
}
const char* last_error(nccl_abi::CommHandle) { return g->last_error; }

int stream_query(void* s) {
  EXPECT_EQ(s, kStream);
  if (g->enqueues_at_first_query < 0) g->enqueues_at_first_query = g->enqueues;
  ++g->stream_queries;
  return g->stream_error;
}
int memcpy_async(void*, const void*, std::size_t, int, void* s) {
  ++g->copies;
  g->last_copy_stream = s;
  return 0;
}
int memset_async(void*, int, std::size_t, void*) { return 0; }
int ev_create(void** ev) {
  static int token;
  *ev = &token;
  ++g->events_alive;
  return 0;
}
int ev_destroy(void*) {
  --g->events_alive;
  return 0;
}
int ev_record(void*, void* s) {
  EXPECT_EQ(s, kStream);
  ++g->events_recorded;
  return 0;
}
int ev_elapsed(float* ms, void*, void*) {
  *ms = 7.5f;
  return 0;
}
const char* cuda_name(int e) { return e == 700 ? "cudaErrorIllegalAddress" : "cudaError"; }
const char* cuda_text(int) { return "an illegal memory access was encountered"; }

class NcclFake : public ::testing::Test {
 protected:
  void SetUp() override {
    g = &fake;
    api.CommInitRankConfig = init;
    api.CommGetAsyncError = async_error;
    api.CommAbort = abort_comm;
    api.CommFinalize = finalize;
    api.CommDestroy = destroy;
    api.AllReduce = all_reduce;
    api.Send = send;
    api.Recv = recv;
    api.GroupStart = group_start;
    api.GroupEnd = group_end;
    api.GetErrorString = error_string;
    api.GetLastError = last_error;
    cuda = CudaOps{stream_query, memcpy_async, memset_async, cuda_name, cuda_text,
                   ev_create,    ev_destroy,   ev_record,    ev_elapsed};
    ctx.nccl = &api;
    ctx.cuda = &cuda;
    ctx.stream = kStream;
    ctx.scratch = &scratch;
  }
  void TearDown() override { g = nullptr; }

  std::unique_ptr<Communicator> make(double seconds = 5) {
    return make_nccl_communicator(ctx, std::string(256, '0'), 0, 2,
                                  Deadline::after_seconds(seconds), nullptr);
  }

  Fake fake;
  NcclApi api;
  CudaOps cuda;
  NcclContext ctx;
  float scratch = 0;
};

TEST_F(NcclFake, InitThatNeverCompletesIsAbortedAndNamed) {
  fake.init_polls_until_ready = -1;
  try {
    make(0.05);
    FAIL() << "init returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL communicator init did not complete"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(fake.aborts, 1);
  EXPECT_GT(fake.polls, 1);
}

TEST_F(NcclFake, AsyncErrorMidCollectiveCarriesNcclsLastError) {
  auto comm = make();
  fake.async_in_progress_polls = 3;
  fake.async_error = nccl_abi::kRemoteError;
  fake.last_error = "NET/Socket : peer 10.1.2.3<41222> closed the connection";
  try {
    comm->all_reduce_sum(&scratch, 1, Deadline::after_seconds(5));
    FAIL() << "the collective succeeded";
  } catch (const Error& e) {
    const std::string line = e.one_line();
    EXPECT_NE(line.find("ncclAllReduce"), std::string::npos) << line;
    EXPECT_NE(line.find("remote process exited"), std::string::npos) << line;
    EXPECT_NE(line.find("peer 10.1.2.3<41222> closed the connection"), std::string::npos) << line;
    EXPECT_NE(line.find("NCCL_SOCKET_IFNAME"), std::string::npos) << line;  // the remedy
  }
  // Aborted right there, not at the end of the check; once.
  EXPECT_EQ(fake.aborts, 1);
  comm.reset();
  EXPECT_EQ(fake.aborts, 1);
  EXPECT_EQ(fake.finalizes, 0);
}

TEST_F(NcclFake, GroupEndInProgressIsPolledToCompletion) {
  auto comm = make();
  fake.group_end_returns = nccl_abi::kInProgress;
  fake.async_in_progress_polls = 5;
  const int before = fake.polls;
  float out = 1, in = 0;
  comm->send_recv(1, &out, &in, 1, Deadline::after_seconds(5));
  EXPECT_GE(fake.polls - before, 6);
  EXPECT_EQ(fake.aborts, 0);
  comm.reset();
  EXPECT_EQ(fake.finalizes, 1);
  EXPECT_EQ(fake.destroys, 1);
}

TEST_F(NcclFake, CudaErrorMarksTheCommunicatorForAbort) {
  auto comm = make();
  fake.stream_error = 700;
  try {
    comm->all_reduce_sum(&scratch, 1, Deadline::after_seconds(5));
    FAIL() << "the collective succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::broken);
    EXPECT_NE(std::string(e.what()).find("cudaErrorIllegalAddress"), std::string::npos)
        << e.what();
  }
  comm.reset();
  EXPECT_EQ(fake.aborts, 1);
  EXPECT_EQ(fake.finalizes, 0);  // a communicator in a dead context is never finalized
}

TEST_F(NcclFake, LaterCallsAfterAnAbortFailAtOnce) {
  auto comm = make();
  fake.async_error = nccl_abi::kSystemError;
  EXPECT_THROW(comm->barrier(Deadline::after_seconds(5)), Error);
  fake.async_error = nccl_abi::kSuccess;
  try {
    comm->barrier(Deadline::after_seconds(5));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("aborted after an earlier failure"), std::string::npos);
  }
  EXPECT_EQ(fake.aborts, 1);
}

TEST_F(NcclFake, FinalizeThatNeverCompletesIsAborted) {
  ctx.teardown_s = 0.05;
  auto comm = make();
  fake.finalize_never_completes = true;
  comm.reset();
  EXPECT_EQ(fake.finalizes, 1);
  EXPECT_EQ(fake.aborts, 1);
  EXPECT_EQ(fake.destroys, 0);
}

TEST_F(NcclFake, BlockingBenchCallsAreWaitedForOneByOne) {
  auto comm = make();
  float buf[4] = {};
  const CollCall call{Coll::all_reduce, DType::float32, RedOp::sum, 0, buf, buf, 4};
  (void)comm->run_timed(call, 3, true, Deadline::after_seconds(5));
  EXPECT_EQ(fake.enqueues_at_first_query, 1);
}

TEST_F(NcclFake, AlltoallSendsBlockPToRankPInOneGroup) {
  auto comm = make();  // rank 0 of 2
  float send[8] = {}, recv[8] = {};
  comm->run({Coll::alltoall, DType::float32, RedOp::sum, 0, send, recv, 4},
            Deadline::after_seconds(5));
  EXPECT_EQ(fake.groups, 1);
  using S = std::vector<std::pair<int, const void*>>;
  using R = std::vector<std::pair<int, void*>>;
  EXPECT_EQ(fake.sends, (S{{0, send}, {1, send + 4}}));
  EXPECT_EQ(fake.recvs, (R{{0, recv}, {1, recv + 4}}));
}

TEST_F(NcclFake, SendrecvGoesToTheNextRankAndComesFromThePrevious) {
  auto comm = make();  // rank 0 of 2: next and previous are both rank 1
  float send[4] = {}, recv[4] = {};
  comm->run({Coll::sendrecv, DType::int8, RedOp::sum, 0, send, recv, 16},
            Deadline::after_seconds(5));
  ASSERT_EQ(fake.sends.size(), 1u);
  EXPECT_EQ(fake.sends[0].first, 1);
  EXPECT_EQ(fake.recvs[0].first, 1);
}

TEST_F(NcclFake, DeviceWorkspaceCopiesOnTheCommunicatorsStream) {
  auto ws = make_device_workspace(cuda, kStream, nullptr);
  float host[4] = {1, 2, 3, 4}, dev[4];
  ws->upload(dev, host, 4);
  ws->download(host, dev, 4);
  EXPECT_EQ(fake.copies, 2);
  EXPECT_EQ(fake.last_copy_stream, kStream);
  EXPECT_GE(fake.stream_queries, 2);  // each copy is waited for before the host buffer is reused
}

TEST_F(NcclFake, RemediesNameTheLikelyCauseFirst) {
  EXPECT_NE(nccl_remedy(nccl_abi::kSystemError,
                        "Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)",
                        64ull << 20)
                .find("--shm-size"),
            std::string::npos);
  EXPECT_NE(nccl_remedy(nccl_abi::kSystemError, "", 64ull << 20).find("/dev/shm here is 64 MiB"),
            std::string::npos);
  EXPECT_NE(nccl_remedy(nccl_abi::kRemoteError, "socket connect to 10.0.0.2 timed out", 0)
                .find("NCCL_SOCKET_IFNAME"),
            std::string::npos);
  EXPECT_NE(nccl_remedy(nccl_abi::kUnhandledCudaError, "", 0).find("fabricmanager"),
            std::string::npos);
}

using NcclFakeDeathTest = NcclFake;

TEST_F(NcclFakeDeathTest, TeardownThatHangsIsCutByTheWatchdog) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ctx.teardown_s = 0.01;
        auto comm = make();
        fake.finalize_never_completes = true;
        fake.hang_in_abort = true;
        Watchdog watchdog("node1-0");
        watchdog.arm("teardown", Deadline::after_seconds(0.2));
        comm.reset();  // finalize never completes, then the abort hangs
        std::exit(0);
      },
      ::testing::ExitedWithCode(static_cast<int>(ExitCode::timeout)),
      "");
}

}  // namespace
}  // namespace gpudiag
