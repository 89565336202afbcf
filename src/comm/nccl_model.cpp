// The NCCL model's rules (nccl_model.h). Each rule names the NCCL 2.28.9
// source that it follows (NVIDIA/nccl tag v2.28.9-1; file and function).
// What the model leaves out, on purpose: data (buffers are not combined
// across ranks: the virtual peers hold no data), NCCL's own timeouts, and a
// blocking launch whose peers never come (NCCL blocks forever there; the
// model answers ncclInternalError saying so instead of hanging a test).
#include "comm/nccl_model.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>

namespace gpudiag {

using nccl_abi::Result;

namespace {
// NCCL's texts, src/init.cc ncclGetErrorString, and the WARN in
// src/init.cc ncclCommEnsureReady.
const char* error_string(Result r) {
  switch (r) {
    case nccl_abi::kSuccess: return "no error";
    case nccl_abi::kUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case nccl_abi::kSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case nccl_abi::kInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case nccl_abi::kInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case nccl_abi::kInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case nccl_abi::kRemoteError: return "remote process exited or there was a network error";
    case nccl_abi::kInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}
constexpr const char* kNotReadyText =
    "Attempt to use communicator before the previous operation returned ncclSuccess";
}  // namespace

struct NcclModel::Impl {
  struct Comm {
    bool blocking = false;
    Result async = nccl_abi::kSuccess;  ///< comm->asyncResult
    bool launching = false;             ///< a launch (or init, finalize) thread runs
    int pending_polls = 0;              ///< polls until that thread is done
    double launch_ready_at = 0;         ///< ... and not before this host time
    bool waits_for_peers = false;       ///< pending until aborted (peers_absent)
    bool thread_live = false;           ///< a launch thread not yet joined
    bool connected = false;
    bool finalize_called = false;
    std::vector<double> pending;        ///< kernel times waiting for the launch
    Result injected = nccl_abi::kSuccess;
  };
  struct Event {
    bool recorded = false;
    double t = 0;
  };
  /// Work queued behind a held gate: a kernel of `us`, or an event.
  struct Held {
    double us = 0, enq = 0;
    Event* ev = nullptr;
  };

  Options o;
  std::mt19937 rng;
  mutable std::recursive_mutex m;
  double host = 0, tail = 0;  ///< virtual us: the host's clock, the stream's end
  std::deque<Comm> comms;     ///< stable addresses: a handle is a Comm*
  std::deque<Event> events;
  std::string last_error;
  int group_depth = 0;              ///< thread-local in NCCL (src/group.cc ncclGroupDepth)
  Comm* group_comm = nullptr;
  std::vector<double> group_kernels;
  bool group_needs_peers = false;
  Result group_error = nccl_abi::kSuccess;
  int refused = 0, kernels = 0, aborts = 0;
  // The stream gate (gpu/stream_gate.cu): while held, work queues behind it;
  // it ends when opened or when cap_us of device time passed since it started.
  bool gate_held = false, gate_expired = false;
  double gate_start = 0, gate_cap = 0;
  std::vector<Held> held;

  static Impl* current;

  Comm* comm(nccl_abi::CommHandle h) { return reinterpret_cast<Comm*>(h); }
  void to_stream(double us) {
    ++kernels;
    if (gate_held && !gate_lapsed())
      held.push_back({us, host, nullptr});
    else
      tail = std::max(tail, host) + us;
  }
  /// The gate's kernel gave up by now (device time past its cap): what was
  /// queued behind it runs from then on, each item no earlier than queued.
  bool gate_lapsed() {
    if (!gate_held || host <= gate_start + gate_cap) return false;
    release(gate_start + gate_cap, true);
    return true;
  }
  void release(double at, bool expired) {
    gate_held = false;
    gate_expired = expired;
    tail = std::max(tail, at);
    for (Held& h : held) {
      tail = std::max(tail, h.enq) + h.us;
      if (h.ev) h.ev->t = tail;
    }
    held.clear();
  }
  double kernel_us(std::size_t bytes) const {
    return o.kernel_latency_us + static_cast<double>(bytes) / o.bytes_per_us;
  }
  int draw() { return std::uniform_int_distribution<int>(-1, o.max_launch_polls)(rng); }

  /// src/group.cc ncclGroupEndInternal's non-blocking branch: the comm goes
  /// ncclInProgress and a thread (groupLaunchNonBlocking) does the launch,
  /// connecting first if this is the communicator's first use (runtime
  /// connection, src/enqueue.cc ncclPrepareTasks); the thread's end sets
  /// the state to its result (groupLaunch: ncclCommSetAsyncError(comm, ret)).
  void start_launch(Comm& c, std::vector<double> work, bool needs_peers) {
    c.pending = std::move(work);
    c.async = nccl_abi::kInProgress;
    c.launching = true;
    c.thread_live = true;
    c.waits_for_peers = needs_peers && o.peers_absent;
    c.pending_polls = draw();
    c.launch_ready_at = host + o.launch_us;
    if (needs_peers && !c.connected) c.pending_polls = std::max(c.pending_polls, 0) + o.connect_polls;
    c.connected = c.connected || needs_peers;
    if (c.pending_polls < 0 && o.launch_us <= 0 && !c.waits_for_peers) finish_launch(c);
  }
  bool launch_done(Comm& c) {
    return --c.pending_polls < 0 && host >= c.launch_ready_at;
  }
  void finish_launch(Comm& c) {
    for (double us : c.pending) to_stream(us);
    c.pending.clear();
    c.async = nccl_abi::kSuccess;  // overwrites a refusal made meanwhile, as NCCL's thread does
    c.launching = false;
    c.waits_for_peers = false;
  }

  /// src/init.cc ncclCommGetAsyncError: the state, then the proxy's
  /// (injected errors) when clean; a clean state joins the launch thread
  /// (ncclGroupJobComplete). Each poll is a microsecond of the host's.
  Result poll(Comm& c) {
    host += 1;
    if (c.launching && !c.waits_for_peers && launch_done(c)) finish_launch(c);
    if (c.async == nccl_abi::kSuccess && c.injected != nccl_abi::kSuccess) c.async = c.injected;
    if (c.async == nccl_abi::kSuccess) c.thread_live = false;
    return c.async;
  }

  /// src/init.cc ncclCommEnsureReady, called by src/enqueue.cc
  /// ncclEnqueueCheck and ncclCommFinalize: a pending communicator is
  /// refused with ncclInvalidArgument, and on a non-blocking one the
  /// refusal becomes its state (ncclEnqueueCheck's fail path); one in an
  /// error state refuses with that error.
  Result ensure_ready(Comm& c) {
    if (c.async == nccl_abi::kSuccess) return nccl_abi::kSuccess;
    Result r = c.async;
    if (r == nccl_abi::kInProgress) {
      last_error = kNotReadyText;
      r = nccl_abi::kInvalidArgument;
      ++refused;
      if (!c.blocking) c.async = r;
    }
    return r;
  }

  /// src/enqueue.cc ncclEnqueueCheck + taskAppend: one collective or one
  /// send/recv, inside the caller's group or in an implicit group of its own.
  Result enqueue(nccl_abi::CommHandle h, std::size_t bytes, bool p2p, bool self_p2p) {
    Comm& c = *comm(h);
    host += 1;
    ++group_depth;  // ncclGroupStartInternal
    Result r = ensure_ready(c);
    if (r == nccl_abi::kSuccess) {
      if (!p2p && bytes == 0) {
        // "Empty collectives can be discarded."
      } else if (!p2p && o.nranks == 1) {
        to_stream(kernel_us(bytes));  // ncclLaunchOneRank: on the caller's thread, no group
      } else {
        group_comm = &c;  // joins the group (ncclGroupCommJoin)
        group_kernels.push_back(kernel_us(bytes));
        group_needs_peers = group_needs_peers || !self_p2p;
      }
    } else if (group_error == nccl_abi::kSuccess) {
      group_error = r;  // ncclGroupErrCheck
    }
    const Result end = group_end();
    if (r != nccl_abi::kSuccess) return r;
    // The trailing ncclCommGetAsyncError of a non-blocking communicator.
    return c.blocking ? end : read(c);
  }
  Result read(Comm& c) {
    if (c.async == nccl_abi::kSuccess) c.thread_live = false;
    return c.async;
  }

  /// src/group.cc ncclGroupEndInternal.
  Result group_end() {
    if (group_depth == 0) {
      last_error = "ncclGroupEnd: not in a group call.";
      return nccl_abi::kInvalidUsage;
    }
    if (--group_depth > 0) return nccl_abi::kSuccess;
    Result r = group_error;
    Comm* c = group_comm;
    std::vector<double> work = std::move(group_kernels);
    const bool peers = group_needs_peers;
    group_comm = nullptr;
    group_kernels.clear();
    group_needs_peers = false;
    group_error = nccl_abi::kSuccess;
    if (r != nccl_abi::kSuccess) {
      if (c && !c->blocking) c->async = r;  // groupCleanup
      return r;
    }
    if (!c) return nccl_abi::kSuccess;
    if (!c->blocking) {
      start_launch(*c, std::move(work), peers);
      return nccl_abi::kInProgress;  // "ret = ncclInProgress"
    }
    if (peers && o.peers_absent) {
      last_error = "model: a blocking launch whose peers never come blocks forever in NCCL";
      return nccl_abi::kInternalError;
    }
    c->connected = c->connected || peers;
    for (double us : work) to_stream(us);  // the blocking branch: groupLaunch here
    return nccl_abi::kSuccess;
  }
};

NcclModel::Impl* NcclModel::Impl::current = nullptr;

namespace {
using M = NcclModel::Impl;
M& cur() { return *M::current; }
std::size_t bytes_of(std::size_t count, int type) {
  static const std::size_t size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};  // ncclInt8 .. ncclBfloat16
  return count * (type >= 0 && type < 10 ? size[type] : 1);
}
#define LOCK std::lock_guard<std::recursive_mutex> lock(cur().m)

Result get_version(int* v) {
  *v = 22809;
  return nccl_abi::kSuccess;
}
Result get_unique_id(nccl_abi::UniqueId* id) {
  std::memset(id->internal, 0, sizeof id->internal);
  return nccl_abi::kSuccess;
}
// src/init.cc ncclCommInitRankConfig -> ncclCommInitRankDev: the init job
// goes through the group machinery, so a non-blocking config returns
// ncclInProgress (at any size) and the bootstrap completes on a thread.
Result init(nccl_abi::CommHandle* out, int nranks, nccl_abi::UniqueId, int rank,
            nccl_abi::Config* cfg) {
  LOCK;
  M& m = cur();
  if (nranks != m.o.nranks || rank != m.o.rank || rank < 0 || rank >= nranks) {
    m.last_error = "Invalid rank requested";
    return nccl_abi::kInvalidArgument;
  }
  m.comms.emplace_back();
  M::Comm& c = m.comms.back();
  c.blocking = cfg->blocking != 0;
  *out = reinterpret_cast<nccl_abi::CommHandle>(&c);
  if (c.blocking) {
    if (m.o.peers_absent && nranks > 1) {
      m.last_error = "model: a blocking init whose peers never come blocks forever in NCCL";
      return nccl_abi::kInternalError;
    }
    return nccl_abi::kSuccess;
  }
  c.async = nccl_abi::kInProgress;
  c.launching = true;
  c.thread_live = true;
  c.pending_polls = m.o.init_polls;
  c.waits_for_peers = m.o.peers_absent && nranks > 1;
  return nccl_abi::kInProgress;
}
Result async_error(nccl_abi::CommHandle h, Result* st) {
  LOCK;
  *st = cur().poll(*cur().comm(h));
  return nccl_abi::kSuccess;
}
// src/init.cc ncclCommFinalize: refused while pending (ncclCommEnsureReady),
// refused twice, and run as an async job: ncclInProgress when non-blocking.
Result finalize(nccl_abi::CommHandle h) {
  LOCK;
  M& m = cur();
  M::Comm& c = *m.comm(h);
  if (Result r = m.ensure_ready(c); r != nccl_abi::kSuccess) return r;
  if (c.finalize_called) return nccl_abi::kInvalidArgument;
  c.finalize_called = true;
  if (c.blocking) return nccl_abi::kSuccess;
  m.start_launch(c, {}, false);
  return m.read(c) == nccl_abi::kSuccess ? nccl_abi::kSuccess : nccl_abi::kInProgress;
}
// src/init.cc ncclCommDestroy / ncclCommAbort: (void)ncclCommEnsureReady,
// then the communicator is freed; abort raises the abort flag first, which
// ends a pending launch thread (ncclGroupJobAbort), so its work never
// reaches the stream. Either may be called from another thread.
Result destroy(nccl_abi::CommHandle h) {
  LOCK;
  M::Comm& c = *cur().comm(h);
  c = M::Comm{};
  c.async = nccl_abi::kInvalidUsage;  // a freed handle: any later use is a bug
  return nccl_abi::kSuccess;
}
Result abort_comm(nccl_abi::CommHandle h) {
  LOCK;
  ++cur().aborts;
  return destroy(h);
}
Result user_rank(nccl_abi::CommHandle, int* r) {
  *r = cur().o.rank;
  return nccl_abi::kSuccess;
}
Result all_reduce(const void*, void*, std::size_t n, int t, int, nccl_abi::CommHandle h, void*) {
  LOCK;
  return cur().enqueue(h, bytes_of(n, t), false, false);
}
Result all_gather(const void*, void*, std::size_t n, int t, nccl_abi::CommHandle h, void*) {
  LOCK;
  return cur().enqueue(h, bytes_of(n, t) * cur().o.nranks, false, false);
}
Result broadcast(const void*, void*, std::size_t n, int t, int, nccl_abi::CommHandle h, void*) {
  LOCK;
  return cur().enqueue(h, bytes_of(n, t), false, false);
}
Result reduce_scatter(const void*, void*, std::size_t n, int t, int, nccl_abi::CommHandle h,
                      void*) {
  LOCK;
  return cur().enqueue(h, bytes_of(n, t) * cur().o.nranks, false, false);
}
Result reduce(const void*, void*, std::size_t n, int t, int, int, nccl_abi::CommHandle h, void*) {
  LOCK;
  return cur().enqueue(h, bytes_of(n, t), false, false);
}
// src/collectives.cc ncclAlltoAll (2.28) -> src/enqueue.cc taskAppend: an
// empty one is discarded; at one rank it is ncclLaunchOneRank (a copy on the
// caller's thread); at 2+ ranks a send and a receive per rank in the call's
// implicit group, which the threaded launch puts on the stream.
Result all_to_all(const void*, void*, std::size_t n, int t, nccl_abi::CommHandle h, void*) {
  LOCK;
  M& m = cur();
  if (m.o.nranks == 1) return m.enqueue(h, bytes_of(n, t), false, false);
  m.host += 1;
  ++m.group_depth;
  Result r = m.ensure_ready(*m.comm(h));
  if (r == nccl_abi::kSuccess && n > 0) {
    m.group_comm = m.comm(h);
    for (int p = 0; p < 2 * m.o.nranks; ++p) m.group_kernels.push_back(m.kernel_us(bytes_of(n, t)));
    m.group_needs_peers = true;
  } else if (r != nccl_abi::kSuccess && m.group_error == nccl_abi::kSuccess) {
    m.group_error = r;
  }
  const Result end = m.group_end();
  if (r != nccl_abi::kSuccess) return r;
  return m.comm(h)->blocking ? end : m.read(*m.comm(h));
}
// Send/recv always join the group (src/enqueue.cc p2pTaskAppend), even to
// the rank itself: at one rank they too take the threaded launch.
Result send(const void*, std::size_t n, int t, int peer, nccl_abi::CommHandle h, void*) {
  LOCK;
  return cur().enqueue(h, bytes_of(n, t), true, peer == cur().o.rank);
}
Result recv(void*, std::size_t n, int t, int peer, nccl_abi::CommHandle h, void*) {
  LOCK;
  return cur().enqueue(h, bytes_of(n, t), true, peer == cur().o.rank);
}
Result group_start() {
  LOCK;
  ++cur().group_depth;
  return nccl_abi::kSuccess;
}
Result group_end() {
  LOCK;
  return cur().group_end();
}
const char* last_error(nccl_abi::CommHandle) { return cur().last_error.c_str(); }

// CUDA: the stream and its events (cudaStreamQuery, cudaEventRecord,
// cudaEventElapsedTime: cudaErrorNotReady until both events completed).
int stream_query(void*) {
  LOCK;
  M& m = cur();
  if (m.gate_held && !m.gate_lapsed()) {
    m.host += 1;  // the gate's kernel holds the stream
    return CudaOps::kNotReady;
  }
  if (m.tail <= m.host) return CudaOps::kSuccess;
  m.host += std::max(1.0, (m.tail - m.host) / 4);
  return m.tail <= m.host ? CudaOps::kSuccess : CudaOps::kNotReady;
}
int memcpy_async(void* dst, const void* src, std::size_t bytes, int, void*) {
  LOCK;
  std::memmove(dst, src, bytes);  // host memory stands in for device memory
  cur().to_stream(cur().kernel_us(bytes));
  return CudaOps::kSuccess;
}
int memset_async(void* dst, int value, std::size_t bytes, void*) {
  LOCK;
  std::memset(dst, value, bytes);
  cur().to_stream(cur().kernel_us(bytes));
  return CudaOps::kSuccess;
}
const char* cuda_name(int e) {
  return e == CudaOps::kNotReady ? "cudaErrorNotReady" : "cudaErrorInvalidResourceHandle";
}
const char* cuda_text(int e) { return e == CudaOps::kNotReady ? "device not ready" : "invalid resource handle"; }
int ev_create(void** ev) {
  LOCK;
  cur().events.emplace_back();
  *ev = &cur().events.back();
  return CudaOps::kSuccess;
}
int ev_destroy(void*) { return CudaOps::kSuccess; }
int ev_record(void* ev, void*) {
  LOCK;
  M& m = cur();
  auto* e = static_cast<M::Event*>(ev);
  m.host += 1;
  e->recorded = true;
  if (m.gate_held && !m.gate_lapsed()) {
    e->t = 1e300;  // not reached until the gate ends
    m.held.push_back({0, m.host, e});
    return CudaOps::kSuccess;
  }
  e->t = std::max(m.host, m.tail);  // the stream reaches it after the work before it
  return CudaOps::kSuccess;
}
// The stream gate: one kernel that holds the stream (gpu/stream_gate.cu).
int gate_create(void** g) {
  *g = &cur();
  return CudaOps::kSuccess;
}
int gate_destroy(void*) { return CudaOps::kSuccess; }
int gate_hold(void*, void*, unsigned cap_us) {
  LOCK;
  M& m = cur();
  m.host += 1;
  m.gate_lapsed();
  if (m.gate_held) return 400;  // one gate, one hold at a time: a bug in the caller
  m.gate_held = true;
  m.gate_expired = false;
  m.gate_start = std::max(m.host, m.tail);  // it runs once the work before it is done
  m.gate_cap = cap_us;
  return CudaOps::kSuccess;
}
int gate_open(void*) {
  LOCK;
  M& m = cur();
  m.host += 1;
  if (m.gate_held && !m.gate_lapsed()) m.release(std::max(m.gate_start, m.host), false);
  return CudaOps::kSuccess;
}
int gate_expired(void*) {
  LOCK;
  cur().gate_lapsed();
  return cur().gate_expired ? 1 : 0;
}
int ev_elapsed(float* ms, void* a, void* b) {
  LOCK;
  auto *x = static_cast<M::Event*>(a), *y = static_cast<M::Event*>(b);
  if (!x->recorded || !y->recorded) return 400;  // cudaErrorInvalidResourceHandle
  if (x->t > cur().host || y->t > cur().host) return CudaOps::kNotReady;
  *ms = static_cast<float>((y->t - x->t) / 1e3);
  return CudaOps::kSuccess;
}
#undef LOCK
}  // namespace

NcclModel::NcclModel(Options o) : impl_(new Impl) {
  impl_->o = o;
  impl_->rng.seed(o.seed);
  Impl::current = impl_;
  nccl_.GetVersion = get_version;
  nccl_.GetUniqueId = get_unique_id;
  nccl_.CommInitRankConfig = init;
  nccl_.CommGetAsyncError = async_error;
  nccl_.CommFinalize = finalize;
  nccl_.CommDestroy = destroy;
  nccl_.CommAbort = abort_comm;
  nccl_.CommUserRank = user_rank;
  nccl_.AllReduce = all_reduce;
  nccl_.AllGather = all_gather;
  nccl_.Broadcast = broadcast;
  nccl_.ReduceScatter = reduce_scatter;
  nccl_.Reduce = reduce;
  nccl_.Send = send;
  nccl_.Recv = recv;
  nccl_.GroupStart = group_start;
  nccl_.GroupEnd = group_end;
  nccl_.GetErrorString = error_string;
  nccl_.GetLastError = last_error;
  if (o.has_alltoall) nccl_.AlltoAll = all_to_all;
  cuda_ = CudaOps{stream_query, memcpy_async, memset_async, cuda_name,    cuda_text,
                  ev_create,    ev_destroy,   ev_record,    ev_elapsed,   gate_create,
                  gate_destroy, gate_hold,    gate_open,    gate_expired};
}

NcclModel::~NcclModel() {
  if (Impl::current == impl_) Impl::current = nullptr;
  delete impl_;
}

void* NcclModel::stream() const { return reinterpret_cast<void*>(0x5eed); }

void NcclModel::inject_async_error(nccl_abi::Result r, std::string text) {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  for (auto& c : impl_->comms) c.injected = r;
  impl_->last_error = std::move(text);
}
void NcclModel::set_peers_absent(bool absent) {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  impl_->o.peers_absent = absent;
}
int NcclModel::refused_calls() const { return impl_->refused; }
int NcclModel::kernels() const { return impl_->kernels; }
int NcclModel::aborts() const { return impl_->aborts; }
int NcclModel::live_threads() const {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  return static_cast<int>(std::count_if(impl_->comms.begin(), impl_->comms.end(),
                                        [](const Impl::Comm& c) { return c.thread_live; }));
}
double NcclModel::kernel_us(std::size_t bytes) const { return impl_->kernel_us(bytes); }

}  // namespace gpudiag
