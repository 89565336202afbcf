// NCCL backend (see nccl.h): the collectives of a communicator that
// nccl_init.cpp made. Every call goes through one entry point, run() or
// run_timed(), and follows NCCL's rules for a non-blocking communicator
// (docs/ARCHITECTURE.md, "The NCCL data path"):
//   1. launch: the call returns ncclSuccess or ncclInProgress; at 2+ ranks
//      NCCL hands the work to a thread of its own and only that thread puts
//      the kernel on the stream (NCCL 2.28 src/group.cc ncclGroupEndInternal).
//      launched() polls ncclCommGetAsyncError until it leaves ncclInProgress,
//      against the deadline and abort_check: before that, any call on the
//      communicator is refused (src/init.cc ncclCommEnsureReady) and an event
//      recorded on the stream would land before the kernel and time nothing.
//   2. timing: an event before the first call and one after each call, each
//      recorded only once that call is on the stream, so the events bracket
//      work that is really there, as nccl-tests' events do;
//   3. completion: wait() polls the async state (network errors surface
//      there) and the stream until both are done.
// Any way out but success aborts the communicator right there, so no NCCL
// kernel or proxy thread spins on through later phases; a communicator that
// ever failed, by an NCCL or a CUDA error, is aborted rather than finalized.
// Only a communicator found ready (ncclSuccess) is finalized and destroyed:
// NCCL refuses to destroy one that is pending or in an error state, frees
// nothing, and (2.24-2.26, 2.28+) leaves the calling thread's group open, so
// that thread's later NCCL calls would never launch (src/init.cc
// ncclCommDestroy). A failure quotes NCCL's last error, which is the
// process's (nccl.h NcclLastError), read right after the failing call.
// The NCCL call itself, the events and the gate hold are nccl_enqueue.h's.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

#include "comm/nccl.h"
#include "comm/nccl_enqueue.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

using nccl_abi::Result;

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const NcclContext& ctx, nccl_abi::CommHandle comm, int rank, int size)
      : ctx_(ctx), api_(*ctx.nccl), comm_(comm), rank_(rank), size_(size) {
    if (api_.GetVersion && api_.GetVersion(&version_) != nccl_abi::kSuccess) version_ = 0;
  }

  ~NcclCommunicator() override {
    end_communicator();
    drop_gate();
  }

  std::string name() const override { return "nccl"; }

  // The check's and the link test's collectives, as calls of run()/run_timed().
  void all_reduce_sum(float* data, std::size_t count, Deadline deadline) override {
    run(f32(Coll::all_reduce, data, data, count), deadline);
  }
  double all_reduce_timed(float* data, std::size_t count, int iters, Deadline deadline) override {
    return total(run_timed(f32(Coll::all_reduce, data, data, count), iters, false, deadline, true));
  }
  void all_gather(float* data, std::size_t count, Deadline deadline) override {
    run(f32(Coll::all_gather, data + rank_ * count, data, count), deadline);
  }
  void broadcast(float* data, std::size_t count, int root, Deadline deadline) override {
    CollCall c = f32(Coll::broadcast, data, data, count);
    c.root = root;
    run(c, deadline);
  }
  void send_recv(int peer, const float* out, float* in, std::size_t count,
                 Deadline deadline) override {
    run(pair(peer, out, in, count), deadline);
  }
  double send_recv_timed(int peer, const float* out, float* in, std::size_t count, int iters,
                         Deadline deadline) override {
    return total(run_timed(pair(peer, out, in, count), iters, false, deadline, true));
  }
  void barrier(Deadline deadline) override {
    // What torch.distributed.barrier() does on NCCL: a one-element
    // all-reduce. The scratch float's value does not matter.
    all_reduce_sum(ctx_.scratch, 1, deadline);
  }

  void run(const CollCall& c, Deadline deadline) override {
    launch(c, deadline);
    wait([&] { return "nccl" + describe_call(c); }, deadline);
  }

  /// Device times, as nccl-tests times them: calls queued back to back
  /// between events, NCCL's launch thread outside the interval. Where NCCL
  /// launches each call on a thread of its own (50-100 us, longer than a
  /// small kernel) the calls are queued behind a stream gate (gpu/
  /// stream_gate.cu) in batches (nccl_gate_batch): the gate holds the stream, an
  /// untimed aligning call, an event, each call launched (polled until on
  /// the stream), an event, then the gate opens. The aligning call ends on
  /// every rank when the last rank's gate opened (a collective waits on the
  /// device for its peers), so the peers' spread of launch loops is outside
  /// every rank's interval, as nccl-tests' barrier before its loop keeps it.
  /// Where NCCL launches on the caller's thread (nccl_launches_inline) there is
  /// no gate: the device runs while the host queues, as in nccl-tests' loop.
  /// With `blocking` (nccl-tests' -z) each call is its own batch and is
  /// waited for. With `per_call` each call gets events of its own, else each
  /// call of a batch its mean. Without a gate (ungated() says why) the
  /// figures include launch gaps longer than a kernel.
  std::vector<double> run_timed(const CollCall& c, int iters, bool blocking, Deadline deadline,
                                bool per_call) override {
    auto what = [&] { return "nccl" + describe_call(c); };
    usable(what);
    const bool inline_launch = nccl_launches_inline(api_, version_, c, size_);
    void* gate = inline_launch ? nullptr : timing_gate();
    ungated_ = gate || inline_launch ? ""
               : ctx_.cuda->gate_absent_why ? ctx_.cuda->gate_absent_why
                                            : "no stream gate";
    const int batch = gate ? nccl_gate_batch(c, size_, kGateBatch) : std::max(iters, 1);
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(std::max(iters, 0)));
    for (int done = 0; done < iters;) {
      const int n = blocking ? 1 : std::min(iters - done, batch);
      time_batch(c, n, blocking, per_call, gate, deadline, out);
      done += n;
    }
    return out;
  }

  std::string ungated() const override { return ungated_; }

 private:
  void end_communicator() {
    if (aborted_) return;
    if (!healthy_ || !ready()) {
      api_.CommAbort(comm_);
      return;
    }
    // Finalize flushes outstanding work and may wait on peers: bounded, and
    // an abort (which never waits on peers) if it does not complete.
    Result st = api_.CommFinalize(comm_);
    const auto deadline = Deadline::after_seconds(ctx_.teardown_s);
    while (st == nccl_abi::kInProgress && !deadline.expired()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (api_.CommGetAsyncError(comm_, &st) != nccl_abi::kSuccess) break;
    }
    if (st != nccl_abi::kSuccess || api_.CommDestroy(comm_) != nccl_abi::kSuccess) {
      // Refused after all (an error that arrived since the last poll): close
      // the group the refusal left open (elsewhere NCCL answers
      // ncclInvalidUsage, "not in a group call"), then abort.
      if (st == nccl_abi::kSuccess) (void)api_.GroupEnd();
      api_.CommAbort(comm_);
    }
  }

  /// The communicator's state is ncclSuccess: no launch pending, no error.
  bool ready() {
    Result st = nccl_abi::kInProgress;
    return api_.CommGetAsyncError(comm_, &st) == nccl_abi::kSuccess && st == nccl_abi::kSuccess;
  }

  /// Frees the gate once the stream has drained (its kernel has ended); on a
  /// stream that never drains (a hung GPU) the few bytes are left, never
  /// freed under a kernel that may still read them.
  void drop_gate() {
    if (!gate_) return;
    ctx_.cuda->gate_open(gate_);
    const auto deadline = Deadline::after_seconds(1);
    while (ctx_.cuda->stream_query(ctx_.stream) == CudaOps::kNotReady && !deadline.expired())
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (ctx_.cuda->stream_query(ctx_.stream) == CudaOps::kSuccess) ctx_.cuda->gate_destroy(gate_);
    gate_ = nullptr;
  }

  static constexpr int kMaxEvents = 1024;
  static constexpr int kGateBatch = 32;
  /// Device time a gate may hold the stream while its batch is launched:
  /// far above 32 launches of 100 us, and short enough that a launch waiting
  /// on the device (NCCL's work FIFO full) only costs that much.
  static constexpr unsigned kGateCapUs = 1000000;

  /// The communicator's gate, made on first use; null when the CUDA table
  /// has none or it could not be made (then timing goes ungated).
  void* timing_gate() {
    const CudaOps& cu = *ctx_.cuda;
    if (gate_ || gate_failed_ || !cu.gate_create) return gate_;
    if (cu.gate_create(&gate_) != CudaOps::kSuccess) {
      gate_ = nullptr;
      gate_failed_ = true;
    }
    return gate_;
  }

  /// One batch of `n` calls (run_timed above), after an untimed aligning
  /// call where it is gated.
  void time_batch(const CollCall& c, int n, bool blocking, bool per_call, void* gate,
                  Deadline deadline, std::vector<double>& out) {
    auto what = [&] { return "nccl" + describe_call(c); };
    const bool each = per_call && n <= kMaxEvents;
    Events events(*ctx_.cuda, each ? n + 1 : 2);
    cuda_check(events.create(), "cudaEventCreate");
    if (gate) cuda_check(ctx_.cuda->gate_hold(gate, ctx_.stream, kGateCapUs), "stream gate launch");
    {
      GateHold hold(*ctx_.cuda, gate);
      held_ = gate;
      if (gate) launch(c, deadline);  // aligning: ends when the last peer's gate opened
      cuda_check(events.record(0, ctx_.stream), "cudaEventRecord");
      for (int i = 0; i < n; ++i) {
        launch(c, deadline);
        if (each) cuda_check(events.record(i + 1, ctx_.stream), "cudaEventRecord");
        if (blocking && !gate) wait(what, deadline);
      }
      if (!each) cuda_check(events.record(1, ctx_.stream), "cudaEventRecord");
      held_ = nullptr;
    }
    wait([&] { return std::to_string(n) + " x " + what(); }, deadline);
    if (gate && ctx_.cuda->gate_expired(gate) == 1) note_gate_expired(what());
    const std::size_t first = out.size();
    for (int i = 0; i + 1 < events.size(); ++i) {
      float ms = 0;
      cuda_check(events.elapsed(&ms, i), "cudaEventElapsedTime");
      out.push_back(ms / 1e3);
    }
    if (!each) {
      const double per_call_s = out[first] / n;
      out.resize(first + static_cast<std::size_t>(n));
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), per_call_s);
    }
  }

  void note_gate_expired(const std::string& what) {
    ungated_ = "the stream gate expired";
    if (gate_expired_++ == 0)
      spdlog::warn("{}: the stream gate gave up after {} s before every call of its batch was "
                "launched; that batch's figures include launch time (slower than the device)",
                what, kGateCapUs / 1e6);
  }

  static CollCall f32(Coll coll, const float* send, float* recv, std::size_t count) {
    return CollCall{coll, DType::float32, RedOp::sum, 0, send, recv, count};
  }
  static CollCall pair(int peer, const float* out, float* in, std::size_t count) {
    CollCall c = f32(Coll::sendrecv, out, in, count);
    c.peer = peer;
    return c;
  }
  static double total(const std::vector<double>& times) {
    return std::accumulate(times.begin(), times.end(), 0.0);
  }

  /// Hands one call (collective.h's buffer conventions) to NCCL and returns
  /// once NCCL has put its work on the stream (step 1 above).
  void launch(const CollCall& c, Deadline deadline) {
    auto what = [&] { return "nccl" + describe_call(c); };
    usable(what);
    note_last_error();
    const Result r = nccl_enqueue(api_, c, {comm_, ctx_.stream, rank_, size_});
    if (r != nccl_abi::kSuccess && r != nccl_abi::kInProgress) fail(what(), r);
    if (r == nccl_abi::kInProgress) launched(what, deadline);
  }

  void cuda_check(int e, const char* call) {
    if (e == CudaOps::kSuccess) return;
    abort_now();
    throw Error(ExitCode::broken, std::string(call) + " failed: " + cuda_error_text(*ctx_.cuda, e),
                "check the GPU with nvidia-smi and dmesg (Xid errors)");
  }

  template <class What>
  void usable(const What& what) {
    if (aborted_)
      throw Error(ExitCode::broken,
                  what() + " not attempted: the NCCL communicator was aborted after an earlier "
                           "failure");
  }

  /// NCCL's last error as it is before a call, to tell a failure's own text
  /// from an older one (NcclLastError); assigned, so no allocation a call.
  void note_last_error() {
    const char* t = api_.GetLastError ? api_.GetLastError(comm_) : nullptr;
    last_before_.assign(t ? t : "");
  }

  /// Gives the communicator up now: aborting stops NCCL's kernels and proxy
  /// threads, which would otherwise spin until the process ends.
  /// A gate held over this batch opens first: NCCL's teardown waits for the
  /// communicator's work on the stream (src/init.cc commReclaim ->
  /// commDestroySync), and work behind a held gate would keep it there until
  /// the gate's cap.
  void abort_now() {
    healthy_ = false;
    if (aborted_) return;
    aborted_ = true;
    if (held_) ctx_.cuda->gate_open(held_);
    held_ = nullptr;
    api_.CommAbort(comm_);
  }

  /// Reads NCCL's last error first: the abort may WARN over it.
  [[noreturn]] void fail(const std::string& call, Result r) {
    const NcclLastError last = nccl_last_error(api_, last_before_);
    const std::string what = call + " failed: " + nccl_failure_text(api_, r, last);
    abort_now();
    throw Error(ExitCode::broken, what, nccl_failure_remedy(r, last));
  }

  /// One round of the polls both waits share: a reason to give up (abort
  /// check, deadline) ends the call; then a pause. The first kSpin of a wait
  /// spins: a launch (NCCL's thread starts and puts the kernel on the stream)
  /// or a small collective ends in microseconds, and a sleep's wake-up would
  /// be most of what a small-size benchmark measures.
  template <class What>
  void between_polls(Deadline::Clock::time_point since, const What& what, Deadline deadline) {
    if (abort_check_) {
      if (auto why = abort_check_()) {
        abort_now();
        throw Error(ExitCode::broken, what() + " abandoned: " + *why);
      }
    }
    if (deadline.expired()) {
      abort_now();
      throw TimeoutError(what() + " did not complete in time (communicator aborted)",
                         "a peer is stuck or gone; see the other ranks' lines, or run with "
                         "--nccl-debug info");
    }
    constexpr auto kSpin = std::chrono::microseconds(500);
    if (Deadline::Clock::now() - since > kSpin)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

  /// Step 1: until NCCL's launch left ncclInProgress. A launch stays pending
  /// while NCCL connects to peers (first use of a pair or algorithm), so a
  /// peer that never comes keeps it there: the deadline and abort_check end it.
  template <class What>
  void launched(const What& what, Deadline deadline) {
    const auto since = Deadline::Clock::now();
    for (;;) {
      Result st = nccl_abi::kSuccess;
      const Result q = api_.CommGetAsyncError(comm_, &st);
      if (q != nccl_abi::kSuccess) fail(what() + " (ncclCommGetAsyncError)", q);
      if (st == nccl_abi::kSuccess) return;
      if (st != nccl_abi::kInProgress) fail(what(), st);
      between_polls(since, what, deadline);
    }
  }

  /// Step 3: until the async state is clean and the stream drained.
  template <class What>
  void wait(const What& what, Deadline deadline) {
    const auto since = Deadline::Clock::now();
    for (;;) {
      Result st = nccl_abi::kSuccess;
      const Result q = api_.CommGetAsyncError(comm_, &st);
      if (q != nccl_abi::kSuccess) fail(what() + " (ncclCommGetAsyncError)", q);
      if (st != nccl_abi::kSuccess && st != nccl_abi::kInProgress) fail(what(), st);
      if (st == nccl_abi::kSuccess) {
        const int e = ctx_.cuda->stream_query(ctx_.stream);
        if (e == CudaOps::kSuccess) return;
        if (e != CudaOps::kNotReady) {
          abort_now();
          throw Error(ExitCode::broken,
                      what() + " failed on the GPU: " + cuda_error_text(*ctx_.cuda, e),
                      "check the GPU with nvidia-smi and dmesg (Xid errors)");
        }
      }
      between_polls(since, what, deadline);
    }
  }

  NcclContext ctx_;
  void* gate_ = nullptr;
  void* held_ = nullptr;  ///< gate_ while a batch holds it
  std::string ungated_;   ///< why the last run_timed's figures were not gated
  int version_ = 0;       ///< ncclGetVersion(), 0 when unknown
  bool gate_failed_ = false;
  int gate_expired_ = 0;
  const NcclApi& api_;
  nccl_abi::CommHandle comm_;
  int rank_, size_;
  std::string last_before_;  ///< NCCL's last error before the current call
  bool healthy_ = true;
  bool aborted_ = false;
};

}  // namespace

std::unique_ptr<Communicator> wrap_nccl_communicator(const NcclContext& ctx,
                                                     nccl_abi::CommHandle comm, int rank,
                                                     int size) {
  return std::make_unique<NcclCommunicator>(ctx, comm, rank, size);
}

}  // namespace gpudiag
