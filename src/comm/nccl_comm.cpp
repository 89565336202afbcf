// NCCL backend (see nccl.h). Every wait is a poll loop: ncclCommGetAsyncError
// for the communicator's state, the stream for queued work, the deadline and
// the caller's abort_check. Any way out but success aborts the communicator
// right there (not at the end of the check), so no NCCL kernel or proxy
// thread spins on through later phases; a communicator that ever failed, by
// an NCCL or a CUDA error, is aborted rather than finalized when it goes.
#include <chrono>
#include <thread>

#include "comm/nccl.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

using nccl_abi::Result;

class NcclCommunicator : public Communicator {
 public:
  NcclCommunicator(const NcclContext& ctx, nccl_abi::CommHandle comm, int rank, int size)
      : ctx_(ctx), api_(*ctx.nccl), comm_(comm), rank_(rank), size_(size) {}

  ~NcclCommunicator() override {
    if (aborted_) return;
    if (!healthy_) {
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
    if (st == nccl_abi::kSuccess)
      api_.CommDestroy(comm_);
    else
      api_.CommAbort(comm_);
  }

  std::string name() const override { return "nccl"; }

  void all_reduce_sum(float* data, std::size_t count, Deadline deadline) override {
    enqueue_all_reduce(data, count);
    wait("ncclAllReduce of " + human_bytes(count * sizeof(float)), deadline);
  }

  double all_reduce_timed(float* data, std::size_t count, int iters, Deadline deadline) override {
    return timed(iters, "ncclAllReduce of " + human_bytes(count * sizeof(float)), deadline,
                 [&] { enqueue_all_reduce(data, count); });
  }

  double send_recv_timed(int peer, const float* out, float* in, std::size_t count, int iters,
                         Deadline deadline) override {
    return timed(iters,
                 "ncclSend/ncclRecv of " + human_bytes(count * sizeof(float)) + " with rank " +
                     std::to_string(peer),
                 deadline, [&] { enqueue_send_recv(peer, out, in, count); });
  }

  void all_gather(float* data, std::size_t count, Deadline deadline) override {
    start("ncclAllGather", api_.AllGather(data + rank_ * count, data, count, nccl_abi::kFloat32,
                                          comm_, ctx_.stream));
    wait("ncclAllGather of " + human_bytes(count * sizeof(float)) + " per rank", deadline);
  }

  void broadcast(float* data, std::size_t count, int root, Deadline deadline) override {
    start("ncclBroadcast", api_.Broadcast(data, data, count, nccl_abi::kFloat32, root, comm_,
                                          ctx_.stream));
    wait("ncclBroadcast of " + human_bytes(count * sizeof(float)), deadline);
  }

  void send_recv(int peer, const float* out, float* in, std::size_t count,
                 Deadline deadline) override {
    enqueue_send_recv(peer, out, in, count);
    wait("ncclSend/ncclRecv of " + human_bytes(count * sizeof(float)) + " with rank " +
             std::to_string(peer),
         deadline);
  }

  void run(const CollCall& c, Deadline deadline) override {
    enqueue(c);
    wait("nccl" + describe_call(c), deadline);
  }

  /// Per-iteration device times: an event before the first call and after
  /// each, every call queued back to back (or, with `blocking`, waited for
  /// before the next), one wait at the end. Past kMaxEvents iterations only
  /// the first and last events are kept and each gets the mean.
  std::vector<double> run_timed(const CollCall& c, int iters, bool blocking,
                                Deadline deadline) override {
    constexpr int kMaxEvents = 1024;
    const bool each = iters <= kMaxEvents;
    const std::string what = "nccl" + describe_call(c);
    Events events(*ctx_.cuda, each ? iters + 1 : 2);
    usable(what);
    cuda_check(events.create(), "cudaEventCreate");
    cuda_check(events.record(0, ctx_.stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) {
      enqueue(c);
      if (each) cuda_check(events.record(i + 1, ctx_.stream), "cudaEventRecord");
      if (blocking) wait(what, deadline);
    }
    if (!each) cuda_check(events.record(1, ctx_.stream), "cudaEventRecord");
    wait(std::to_string(iters) + " x " + what, deadline);
    std::vector<double> out;
    for (int i = 0; i + 1 < events.size(); ++i) {
      float ms = 0;
      cuda_check(events.elapsed(&ms, i), "cudaEventElapsedTime");
      out.push_back(ms / 1e3);
    }
    if (!each) out.assign(iters, out[0] / iters);
    return out;
  }

  void barrier(Deadline deadline) override {
    // What torch.distributed.barrier() does on NCCL: a one-element
    // all-reduce. The scratch float's value does not matter.
    all_reduce_sum(ctx_.scratch, 1, deadline);
  }

 private:
  void enqueue_all_reduce(float* data, std::size_t count) {
    start("ncclAllReduce", api_.AllReduce(data, data, count, nccl_abi::kFloat32, nccl_abi::kSum,
                                          comm_, ctx_.stream));
  }

  /// Queues one bench collective (collective.h's buffer conventions).
  void enqueue(const CollCall& c) {
    const int t = nccl_dtype(c.type), op = nccl_redop(c.op);
    const std::string call = "nccl" + describe_call(c);
    switch (c.coll) {
      case Coll::all_reduce:
        return start(call, api_.AllReduce(c.send, c.recv, c.count, t, op, comm_, ctx_.stream));
      case Coll::all_gather:
        return start(call, api_.AllGather(c.send, c.recv, c.count, t, comm_, ctx_.stream));
      case Coll::reduce_scatter:
        return start(call,
                     api_.ReduceScatter(c.send, c.recv, c.count, t, op, comm_, ctx_.stream));
      case Coll::broadcast:
        return start(call,
                     api_.Broadcast(c.send, c.recv, c.count, t, c.root, comm_, ctx_.stream));
      case Coll::reduce:
        return start(call,
                     api_.Reduce(c.send, c.recv, c.count, t, op, c.root, comm_, ctx_.stream));
      case Coll::alltoall:
      case Coll::sendrecv: break;
    }
    usable(call);
    const std::size_t block = c.count * dtype_size(c.type);
    const auto* send = static_cast<const char*>(c.send);
    auto* recv = static_cast<char*>(c.recv);
    Result r = api_.GroupStart();
    if (c.coll == Coll::sendrecv) {
      if (r == nccl_abi::kSuccess)
        r = api_.Send(send, c.count, t, (rank_ + 1) % size_, comm_, ctx_.stream);
      if (r == nccl_abi::kSuccess)
        r = api_.Recv(recv, c.count, t, (rank_ + size_ - 1) % size_, comm_, ctx_.stream);
    } else {
      for (int p = 0; p < size_ && r == nccl_abi::kSuccess; ++p) {
        r = api_.Send(send + p * block, c.count, t, p, comm_, ctx_.stream);
        if (r == nccl_abi::kSuccess) r = api_.Recv(recv + p * block, c.count, t, p, comm_, ctx_.stream);
      }
    }
    const Result end = api_.GroupEnd();  // always closed (see enqueue_send_recv)
    if (r == nccl_abi::kSuccess) r = end;
    start(call, r);
  }

  /// CUDA events for run_timed(), destroyed with the object.
  class Events {
   public:
    Events(const CudaOps& cuda, int n) : cuda_(cuda), ev_(n, nullptr) {}
    ~Events() {
      for (void* e : ev_)
        if (e) cuda_.event_destroy(e);
    }
    int create() {
      for (void*& e : ev_)
        if (int r = cuda_.event_create(&e); r != CudaOps::kSuccess) return r;
      return CudaOps::kSuccess;
    }
    int record(int i, void* stream) { return cuda_.event_record(ev_[i], stream); }
    int elapsed(float* ms, int i) { return cuda_.event_elapsed_ms(ms, ev_[i], ev_[i + 1]); }
    int size() const { return static_cast<int>(ev_.size()); }

   private:
    const CudaOps& cuda_;
    std::vector<void*> ev_;
  };

  void cuda_check(int e, const char* call) {
    if (e == CudaOps::kSuccess) return;
    abort_now();
    throw Error(ExitCode::broken, std::string(call) + " failed: " + cuda_error_text(*ctx_.cuda, e),
                "check the GPU with nvidia-smi and dmesg (Xid errors)");
  }

  void enqueue_send_recv(int peer, const float* out, float* in, std::size_t count) {
    const std::string call = "ncclSend/ncclRecv with rank " + std::to_string(peer);
    usable(call);
    Result r = api_.GroupStart();
    if (r == nccl_abi::kSuccess)
      r = api_.Send(out, count, nccl_abi::kFloat32, peer, comm_, ctx_.stream);
    if (r == nccl_abi::kSuccess)
      r = api_.Recv(in, count, nccl_abi::kFloat32, peer, comm_, ctx_.stream);
    // The group is always closed; with a non-blocking communicator it may
    // return ncclInProgress, and wait() polls it to completion.
    const Result end = api_.GroupEnd();
    if (r == nccl_abi::kSuccess) r = end;
    start(call, r);
  }

  /// nccl-tests' way: an event, every iteration queued back to back, an
  /// event, one wait. The time is the device's between the two events, so
  /// neither the enqueue nor this thread's polling is in it.
  template <class Enqueue>
  double timed(int iters, const std::string& what, Deadline deadline, Enqueue enqueue) {
    Events events(*ctx_.cuda, 2);
    usable(what);
    cuda_check(events.create(), "cudaEventCreate");
    cuda_check(events.record(0, ctx_.stream), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) enqueue();
    cuda_check(events.record(1, ctx_.stream), "cudaEventRecord");
    wait(std::to_string(iters) + " x " + what, deadline);
    float ms = 0;
    cuda_check(events.elapsed(&ms, 0), "cudaEventElapsedTime");
    return ms / 1e3;
  }

  void usable(const std::string& call) {
    if (aborted_)
      throw Error(ExitCode::broken,
                  call + " not attempted: the NCCL communicator was aborted after an earlier "
                         "failure");
  }

  /// Checks what an enqueue returned (ncclInProgress is fine: wait() polls it).
  void start(const std::string& call, Result r) {
    usable(call);
    if (r != nccl_abi::kSuccess && r != nccl_abi::kInProgress) fail(call, r);
  }

  std::string describe(Result r) const {
    const char* s = api_.GetErrorString ? api_.GetErrorString(r) : nullptr;
    std::string out = s ? s : "NCCL error " + std::to_string(r);
    const char* last = api_.GetLastError ? api_.GetLastError(comm_) : nullptr;
    if (last && *last) out += ": " + std::string(last);
    return out;
  }

  /// Gives the communicator up now: aborting stops NCCL's kernels and proxy
  /// threads, which would otherwise spin until the process ends.
  void abort_now() {
    healthy_ = false;
    if (aborted_) return;
    aborted_ = true;
    api_.CommAbort(comm_);
  }

  [[noreturn]] void fail(const std::string& call, Result r) {
    const std::string last = api_.GetLastError && api_.GetLastError(comm_)
                                 ? std::string(api_.GetLastError(comm_))
                                 : std::string();
    const std::string what = call + " failed: " + describe(r);
    abort_now();
    throw Error(ExitCode::broken, what, nccl_remedy(r, last, dev_shm_bytes()));
  }

  /// Polls until the enqueue finished and the stream drained.
  void wait(const std::string& what, Deadline deadline) {
    for (int polls = 0;; ++polls) {
      Result st = nccl_abi::kSuccess;
      const Result q = api_.CommGetAsyncError(comm_, &st);
      if (q != nccl_abi::kSuccess) fail(what + " (ncclCommGetAsyncError)", q);
      if (st != nccl_abi::kSuccess && st != nccl_abi::kInProgress) fail(what, st);
      if (st == nccl_abi::kSuccess) {
        const int e = ctx_.cuda->stream_query(ctx_.stream);
        if (e == CudaOps::kSuccess) return;
        if (e != CudaOps::kNotReady) {
          abort_now();
          throw Error(ExitCode::broken, what + " failed on the GPU: " + cuda_error_text(*ctx_.cuda, e),
                      "check the GPU with nvidia-smi and dmesg (Xid errors)");
        }
      }
      if (abort_check_) {
        if (auto why = abort_check_()) {
          abort_now();
          throw Error(ExitCode::broken, what + " abandoned: " + *why);
        }
      }
      if (deadline.expired()) {
        abort_now();
        throw TimeoutError(what + " did not complete in time (communicator aborted)",
                           "a peer is stuck or gone; see the other ranks' lines, or run with "
                           "--nccl-debug info");
      }
      // Spin first: a small collective completes in microseconds, and a
      // sleep here would be most of what a benchmark measures.
      if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  NcclContext ctx_;
  const NcclApi& api_;
  nccl_abi::CommHandle comm_;
  int rank_, size_;
  bool healthy_ = true;
  bool aborted_ = false;
};

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

nccl_abi::UniqueId parse_id(const std::string& hex) {
  nccl_abi::UniqueId id{};
  if (hex.size() != 2 * sizeof id.internal)
    throw Error(ExitCode::broken, "rank 0's NCCL unique id arrived malformed (" +
                                      std::to_string(hex.size()) + " hex digits, expected 256)",
                "ranks running different gpudiag versions?");
  for (std::size_t i = 0; i < sizeof id.internal; ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0)
      throw Error(ExitCode::broken, "rank 0's NCCL unique id arrived malformed (not hex)",
                  "ranks running different gpudiag versions?");
    id.internal[i] = static_cast<char>(hi * 16 + lo);
  }
  return id;
}

}  // namespace

std::string nccl_make_unique_id(const NcclApi& nccl) {
  nccl_abi::UniqueId id{};
  const Result r = nccl.GetUniqueId(&id);
  if (r != nccl_abi::kSuccess)
    throw Error(ExitCode::broken,
                std::string("ncclGetUniqueId failed: ") + nccl.GetErrorString(r),
                "NCCL could not find a network interface for its bootstrap; set "
                "NCCL_SOCKET_IFNAME to an interface the ranks share");
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (char c : id.internal) {
    auto b = static_cast<unsigned char>(c);
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  return hex;
}

std::unique_ptr<Communicator> make_nccl_communicator(const NcclContext& ctx,
                                                     const std::string& unique_id_hex, int rank,
                                                     int size, Deadline deadline,
                                                     const AbortCheck& abort_check) {
  const NcclApi& api = *ctx.nccl;
  const nccl_abi::UniqueId id = parse_id(unique_id_hex);
  nccl_abi::Config config;
  config.blocking = 0;
  nccl_abi::CommHandle comm = nullptr;
  const Result r = api.CommInitRankConfig(&comm, size, id, rank, &config);
  auto give_up = [&](const std::string& msg, ExitCode code, const std::string& remedy) {
    if (comm) api.CommAbort(comm);
    if (code == ExitCode::timeout) throw TimeoutError(msg, remedy);
    throw Error(code, msg, remedy);
  };
  auto text = [&](Result res) {
    std::string s = api.GetErrorString(res);
    const char* last = api.GetLastError(comm);
    if (last && *last) s += ": " + std::string(last);
    return s;
  };
  auto last = [&] {
    const char* l = api.GetLastError(comm);
    return std::string(l ? l : "");
  };
  if (r != nccl_abi::kSuccess && r != nccl_abi::kInProgress)
    give_up("ncclCommInitRankConfig failed: " + text(r), ExitCode::broken,
            nccl_remedy(r, last(), dev_shm_bytes()));
  for (int polls = 0;; ++polls) {
    Result st = nccl_abi::kInProgress;
    if (comm) api.CommGetAsyncError(comm, &st);
    if (st == nccl_abi::kSuccess) break;
    if (st != nccl_abi::kInProgress)
      give_up("NCCL communicator init failed: " + text(st), ExitCode::broken,
              nccl_remedy(st, last(), dev_shm_bytes()));
    if (abort_check)
      if (auto why = abort_check())
        give_up("NCCL communicator init abandoned: " + *why, ExitCode::broken, "");
    if (deadline.expired())
      give_up("NCCL communicator init did not complete in time (aborted)", ExitCode::timeout,
              "NCCL's bootstrap could not reach all peers: check NCCL_SOCKET_IFNAME and "
              "firewalls, and run with --nccl-debug info");
    if (polls > 100) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  auto c = std::make_unique<NcclCommunicator>(ctx, comm, rank, size);
  c->set_abort_check(abort_check);
  return c;
}

}  // namespace gpudiag
