// gpudiag's NCCL communicator (nccl_init.cpp, nccl_comm.cpp) against NCCL's
// rules for a communicator's life, through the model (nccl_model.h), whose
// rules the contract suite checks against real NCCL: it never destroys one
// that is not ready (NCCL would refuse, free nothing and leave the thread's
// group open: the next communicator's calls would silently never launch);
// a bad or used unique id fails the init, named; an init whose peer never
// comes ends at the deadline in an abort; communicators one after another
// in one process (the sweep's pairs) do not disturb each other; NCCL's
// process-wide last error is quoted as such and kept out of the remedy when
// it predates the failure; NCCL_COMM_BLOCKING and NCCL_COMM_ID as the model
// is given them show why gpudiag sets the first to 0 and clears the second
// for the sweep (nccl_env.h).
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "comm/nccl.h"
#include "comm/nccl_model.h"
#include "util/error.h"

namespace gpudiag {
namespace {

NcclModel::Options model_options(int size, std::map<std::string, std::string> env = {}) {
  NcclModel::Options o;
  o.nranks = size;
  o.env = std::move(env);
  return o;
}

struct Ctx {
  explicit Ctx(NcclModel& m) {
    ctx.nccl = &m.nccl();
    ctx.cuda = &m.cuda();
    ctx.stream = m.stream();
    ctx.scratch = &scratch;
  }
  NcclContext ctx;
  float scratch = 0;
};

std::unique_ptr<Communicator> make(const NcclContext& ctx, const std::string& id, int size,
                                   double seconds = 10) {
  return make_nccl_communicator(ctx, id, 0, size, Deadline::after_seconds(seconds), nullptr);
}

std::string failure(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.one_line();
  }
  return "(no failure)";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The teardown finalizes and destroys only a communicator it finds ready;
// one with a launch pending or an error is aborted, and no call is refused.
TEST(NcclCommRules, TeardownNeverDestroysACommunicatorThatIsNotReady) {
  {  // a launch pending (NCCL's thread still at work)
    NcclModel model(model_options(2));
    Ctx c(model);
    const NcclApi& api = model.nccl();
    nccl_abi::Config cfg;
    cfg.blocking = 0;
    nccl_abi::UniqueId id{};
    api.GetUniqueId(&id);
    nccl_abi::CommHandle h = nullptr;
    ASSERT_EQ(api.CommInitRankConfig(&h, 2, id, 0, &cfg), nccl_abi::kInProgress);
    nccl_abi::Result st = nccl_abi::kInProgress;
    while (st == nccl_abi::kInProgress) api.CommGetAsyncError(h, &st);
    ASSERT_EQ(api.AllReduce(&c.scratch, &c.scratch, 1, 7, 0, h, model.stream()),
              nccl_abi::kInProgress);
    wrap_nccl_communicator(c.ctx, h, 0, 2).reset();
    EXPECT_EQ(model.destroys(), 0);
    EXPECT_EQ(model.refused_calls(), 0) << "a finalize while pending was refused";
    EXPECT_EQ(model.aborts(), 1);
    EXPECT_EQ(model.group_depth(), 0);
  }
  {  // an asynchronous error after the last call
    NcclModel model(model_options(2));
    Ctx c(model);
    auto comm = make(c.ctx, nccl_make_unique_id(model.nccl()), 2);
    comm->barrier(Deadline::after_seconds(10));
    model.inject_async_error(nccl_abi::kRemoteError, "NET/IB : Got completion with error 12");
    comm.reset();
    EXPECT_EQ(model.destroys(), 0);
    EXPECT_EQ(model.aborts(), 1);
    EXPECT_EQ(model.group_depth(), 0);
  }
  {  // ready: finalized, destroyed and freed
    NcclModel model(model_options(2));
    Ctx c(model);
    auto comm = make(c.ctx, nccl_make_unique_id(model.nccl()), 2);
    comm->barrier(Deadline::after_seconds(10));
    comm.reset();
    EXPECT_EQ(model.destroys(), 1);
    EXPECT_EQ(model.refused_destroys(), 0);
    EXPECT_EQ(model.reclaimed(), 1);
    EXPECT_EQ(model.aborts(), 0);
  }
}

// Why: after one refused destroy, the next communicator made on the thread
// "initialises" at once and its collective "completes" with nothing on the
// stream (src/group.cc: inside an open group nothing launches).
TEST(NcclCommRules, ARefusedDestroyWouldSilentlyStopTheNextCommunicator) {
  NcclModel model(model_options(2));
  Ctx c(model);
  const NcclApi& api = model.nccl();
  nccl_abi::Config cfg;
  cfg.blocking = 0;
  nccl_abi::UniqueId id{};
  api.GetUniqueId(&id);
  nccl_abi::CommHandle h = nullptr;
  ASSERT_EQ(api.CommInitRankConfig(&h, 2, id, 0, &cfg), nccl_abi::kInProgress);
  EXPECT_EQ(api.CommDestroy(h), nccl_abi::kInvalidArgument);  // still initialising
  EXPECT_EQ(model.group_depth(), 1);
  auto next = make(c.ctx, nccl_make_unique_id(model.nccl()), 2);
  const int kernels = model.kernels();
  next->all_reduce_sum(&c.scratch, 1, Deadline::after_seconds(10));
  EXPECT_EQ(model.kernels(), kernels) << "the all-reduce was launched after all";
  EXPECT_EQ(api.GroupEnd(), nccl_abi::kInProgress);  // closing the group launches both
  api.CommAbort(h);
  next.reset();
  EXPECT_EQ(model.group_depth(), 0);
}

// The id must be one NCCL issued for this communicator: zeros (a truncated
// or never-filled id), an id of a process that is gone (a stale id from an
// earlier run: its root no longer listens), or one whose communicator was
// made already fail the init, named, and the communicator is aborted. (Ids
// each rank made for itself reach roots that wait for the other ranks: the
// init stays pending until the deadline, as a peer that never comes.)
TEST(NcclCommRules, AnIdNcclDidNotIssueFailsTheInit) {
  std::string foreign;
  {
    NcclModel::Options o = model_options(2);
    o.seed = 99;
    NcclModel other(o);
    foreign = nccl_make_unique_id(other.nccl());  // a process that is gone
  }
  NcclModel model(model_options(2));
  Ctx c(model);
  const std::string zeros = failure([&] { make(c.ctx, std::string(256, '0'), 2); });
  EXPECT_TRUE(has(zeros, "NCCL communicator init failed")) << zeros;
  EXPECT_TRUE(has(zeros, "neither AF_INET")) << zeros;
  const std::string other = failure([&] { make(c.ctx, foreign, 2); });
  EXPECT_TRUE(has(other, "Connection refused")) << other;
  EXPECT_TRUE(has(other, "NCCL_SOCKET_IFNAME")) << other;  // the remedy
  const std::string id = nccl_make_unique_id(model.nccl());
  make(c.ctx, id, 2).reset();  // the id's communicator
  const std::string used = failure([&] { make(c.ctx, id, 2); });
  EXPECT_TRUE(has(used, "Connection refused")) << used;
  EXPECT_EQ(model.aborts(), 3);
  EXPECT_EQ(model.refused_destroys(), 0);
}

// The init deadline: a peer that never comes keeps the init pending; the
// deadline aborts it (src/init.cc ncclCommAbort ends the init thread), and
// commReclaim frees nothing of a communicator whose init never completed.
TEST(NcclCommRules, AnInitPastItsDeadlineIsAbortedNotDestroyed) {
  NcclModel model(model_options(2));
  Ctx c(model);
  model.set_peers_absent(true);
  EXPECT_THROW(make(c.ctx, nccl_make_unique_id(model.nccl()), 2, 0.05), TimeoutError);
  EXPECT_EQ(model.aborts(), 1);
  EXPECT_EQ(model.destroys(), 0);
  EXPECT_EQ(model.reclaimed(), 0);
  EXPECT_EQ(model.live_threads(), 0);
  EXPECT_EQ(model.group_depth(), 0);
}

// The sweep's pattern: pair communicators one after another in one process,
// each from its own id; the second's peer never comes. The pairs after it
// run as the first did, and a later failure quotes its own NCCL error.
TEST(NcclCommRules, APairThatFailsDoesNotDisturbTheNext) {
  NcclModel model(model_options(2));
  Ctx c(model);
  std::vector<float> a(4096), b(4096);
  const double k = model.kernel_us(a.size() * 4) / 1e6;
  for (int pair = 0; pair < 4; ++pair) {
    model.set_peers_absent(pair == 1);
    if (pair == 1) {
      EXPECT_THROW(make(c.ctx, nccl_make_unique_id(model.nccl()), 2, 0.05), TimeoutError);
      continue;
    }
    auto comm = make(c.ctx, nccl_make_unique_id(model.nccl()), 2);
    comm->send_recv(1, a.data(), b.data(), a.size(), Deadline::after_seconds(10));  // connects
    const double t =
        comm->send_recv_timed(1, a.data(), b.data(), a.size(), 3, Deadline::after_seconds(10));
    EXPECT_NEAR(t, 3 * 2 * k, 3 * 2 * k * 0.02) << "pair " << pair;
    if (pair == 3) {
      model.inject_async_error(nccl_abi::kRemoteError, "NET/Socket : peer 10.0.0.9 closed");
      const std::string f =
          failure([&] { comm->all_reduce_sum(a.data(), 1, Deadline::after_seconds(10)); });
      EXPECT_TRUE(has(f, "failed: remote process exited")) << f;
      EXPECT_TRUE(has(f, ": NET/Socket : peer 10.0.0.9 closed")) << f;
      EXPECT_FALSE(has(f, "process-wide")) << f;
    }
  }
  EXPECT_EQ(model.refused_calls(), 0);
  EXPECT_EQ(model.group_depth(), 0);
}

// ncclGetLastError is the process's: an earlier WARN (another communicator,
// a proxy thread) still there when a CUDA error surfaces is quoted as NCCL's
// process-wide last error, and the remedy is the CUDA one, not /dev/shm's.
TEST(NcclCommRules, AStaleLastErrorIsNamedAndKeptOutOfTheRemedy) {
  NcclModel model(model_options(2));
  Ctx c(model);
  auto comm = make(c.ctx, nccl_make_unique_id(model.nccl()), 2);
  comm->barrier(Deadline::after_seconds(10));
  model.warn("Error: failed to extend /dev/shm/nccl-x to 9637892 bytes");  // an older failure's
  model.inject_async_error(nccl_abi::kUnhandledCudaError, "");
  try {
    comm->barrier(Deadline::after_seconds(10));
    FAIL() << "the barrier succeeded";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(has(what, "unhandled cuda error")) << what;
    EXPECT_TRUE(has(what, "NCCL's last error (process-wide)")) << what;
    EXPECT_TRUE(has(what, "/dev/shm/nccl-x")) << what;
    EXPECT_TRUE(has(e.remedy(), "nvidia-smi")) << e.remedy();
    EXPECT_FALSE(has(e.remedy(), "shm-size")) << e.remedy();
  }
}

// NCCL_COMM_BLOCKING=1 (src/init.cc envConfigOverride) turns gpudiag's
// non-blocking init blocking: a peer that never comes then holds the call
// inside NCCL (the model says so instead of hanging) and the deadline cannot
// act; with NCCL_COMM_BLOCKING=0, as gpudiag sets it, the deadline ends it.
TEST(NcclCommRules, NcclCommBlockingTakesAwayTheDeadline) {
  for (const char* value : {"1", "0"}) {
    NcclModel model(model_options(2, {{"NCCL_COMM_BLOCKING", value}}));
    Ctx c(model);
    model.set_peers_absent(true);
    const std::string f = failure([&] { make(c.ctx, nccl_make_unique_id(model.nccl()), 2, 0.05); });
    EXPECT_EQ(has(f, "blocks forever"), value[0] == '1') << f;
    EXPECT_EQ(has(f, "did not complete in time"), value[0] == '0') << f;
  }
}

// NCCL_COMM_ID (src/bootstrap.cc bootstrapGetUniqueId): every pair's id is
// the same host:port. A pair that failed leaves its root listening there, so
// the next pair's init never completes; without it (the sweep clears it)
// every pair has a root of its own.
TEST(NcclCommRules, NcclCommIdLetsAFailedPairStopTheNext) {
  for (bool comm_id : {true, false}) {
    NcclModel::Options o = model_options(2);
    if (comm_id) o.env["NCCL_COMM_ID"] = "127.0.0.1:29517";
    NcclModel model(o);
    Ctx c(model);
    model.set_peers_absent(true);
    EXPECT_THROW(make(c.ctx, nccl_make_unique_id(model.nccl()), 2, 0.05), TimeoutError);
    model.set_peers_absent(false);
    const std::string f = failure([&] {
      make(c.ctx, nccl_make_unique_id(model.nccl()), 2, 0.2)->barrier(Deadline::after_seconds(10));
    });
    EXPECT_EQ(has(f, "did not complete in time"), comm_id) << f;
  }
}

}  // namespace
}  // namespace gpudiag
