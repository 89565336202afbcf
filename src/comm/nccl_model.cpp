// The NCCL model's launches and groups (nccl_model.h): how a call becomes
// work on the stream. A call joins its thread's group (an implicit one of its
// own unless the caller opened one); when the group's depth returns to 0 it
// is launched on a thread of NCCL's (ncclInProgress until a poll finds it
// done) or on the caller's thread, as src/group.cc ncclGroupEndInternal
// decides for the model's version. Each rule names the NCCL source it follows
// (NVIDIA/nccl tag v2.28.9-1 unless another is named; file and function).
// What the model leaves out, on purpose: data (buffers are not combined
// across ranks: the virtual peers hold no data), NCCL's own timeouts, and a
// launch that must connect to peers who never come on the caller's thread
// (NCCL blocks there for good; the model answers ncclInternalError saying so
// instead of hanging a test).
#include <algorithm>

#include "comm/nccl_model_impl.h"

namespace gpudiag {

using nccl_abi::Result;
using M = NcclModel::Impl;

M* M::current = nullptr;

namespace {
/// The WARN in src/init.cc ncclCommEnsureReady.
constexpr const char* kNotReadyText =
    "Attempt to use communicator before the previous operation returned ncclSuccess";
}  // namespace

/// A launch on NCCL's thread (src/group.cc groupLaunchNonBlocking): the
/// communicator goes ncclInProgress, and the thread's end puts the work on
/// the stream and sets the state to its result (groupLaunch:
/// ncclCommSetAsyncError(comm, ret)). `connects`: the thread first connects
/// to the peers (src/enqueue.cc ncclPrepareTasks, runtime connection; before
/// 2.23 the p2p preconnect of src/group.cc groupLaunch), connect_polls more.
void M::start_launch(Comm& c, std::vector<double> work, bool needs_peers, bool connects) {
  c.pending = std::move(work);
  c.async = nccl_abi::kInProgress;
  c.launching = true;
  c.thread_live = true;
  c.initing = false;
  c.outcome = nccl_abi::kSuccess;
  c.waits_for_peers = needs_peers && o.peers_absent;
  c.coupled = needs_peers && o.nranks > 1;
  c.peers_ready = c.coupled ? peers_launch() : 0;
  c.pending_polls = draw();
  c.launch_ready_at = host + o.launch_us;
  if (connects) c.pending_polls = std::max(c.pending_polls, 0) + o.connect_polls;
  if (o.launch_ends_before_return && !connects && !c.waits_for_peers) {
    host = std::max(host, c.launch_ready_at);  // the caller was off the CPU meanwhile
    c.pending_polls = -1;
  }
  if (c.pending_polls < 0 && host >= c.launch_ready_at && !c.waits_for_peers) finish_launch(c);
}
bool M::launch_done(Comm& c) { return --c.pending_polls < 0 && host >= c.launch_ready_at; }
void M::finish_launch(Comm& c) {
  if (c.outcome != nccl_abi::kSuccess) {
    // The thread failed (an init whose bootstrap could not reach its root):
    // nothing reaches the stream, the state is the error, its WARN the text.
    c.async = c.outcome;
    last_error = c.outcome_warn;
    c.pending.clear();
  } else {
    if (c.initing) init_succeeded(c);
    for (double us : c.pending) to_stream(us, c.coupled, c.peers_ready);
    c.pending.clear();
    c.async = nccl_abi::kSuccess;  // overwrites a refusal made meanwhile, as NCCL's thread does
  }
  c.launching = false;
  c.initing = false;
  c.waits_for_peers = false;
}

/// src/init.cc ncclCommGetAsyncError: the state, then the proxy's
/// (injected errors) when clean; a clean state joins the launch thread
/// (ncclGroupJobComplete). Each poll is a microsecond of the host's.
Result M::poll(Comm& c) {
  host += 1;
  if (c.launching && !c.waits_for_peers && launch_done(c)) finish_launch(c);
  return read(c);
}
Result M::read(Comm& c) {
  if (c.async == nccl_abi::kSuccess && c.injected != nccl_abi::kSuccess) {
    c.async = c.injected;
    if (!c.injected_warn.empty()) last_error = c.injected_warn;
  }
  if (c.async == nccl_abi::kSuccess) c.thread_live = false;
  return c.async;
}

/// src/init.cc ncclCommEnsureReady, called by src/enqueue.cc
/// ncclEnqueueCheck, ncclCommFinalize and ncclCommDestroy: a pending
/// communicator is refused with ncclInvalidArgument (and the WARN), one in
/// an error state with that error. `refusal_becomes_state`: the caller's fail
/// path sets a non-blocking communicator's state to the refusal
/// (ncclEnqueueCheck, ncclCommFinalize; ncclCommDestroy returns at once).
Result M::ensure_ready(Comm& c, bool refusal_becomes_state) {
  if (c.async == nccl_abi::kSuccess) return nccl_abi::kSuccess;
  Result r = c.async;
  if (r == nccl_abi::kInProgress) {
    last_error = kNotReadyText;
    r = nccl_abi::kInvalidArgument;
    ++refused;
    if (refusal_becomes_state && !c.blocking) c.async = r;
  }
  return r;
}

/// src/enqueue.cc ncclEnqueueCheck + taskAppend: one collective or one
/// send/recv, inside the caller's group or in an implicit group of its own.
Result M::enqueue(nccl_abi::CommHandle h, std::size_t bytes, bool p2p, bool self_p2p) {
  Comm& c = *comm(h);
  host += 1;
  ++group().depth;  // ncclGroupStartInternal
  Result r = ensure_ready(c, true);
  if (r == nccl_abi::kSuccess) {
    if (!p2p && bytes == 0) {
      // "Empty collectives can be discarded."
    } else if (!p2p && o.nranks == 1) {
      to_stream(kernel_us(bytes));  // ncclLaunchOneRank: on the caller's thread, no group
    } else {
      join(c, {kernel_us(bytes)}, p2p, self_p2p);
    }
  } else {
    error_check(r);
  }
  const Result end = group_end();
  if (r != nccl_abi::kSuccess) return r;
  // The trailing ncclCommGetAsyncError of a non-blocking communicator.
  return c.blocking ? end : read(c);
}

/// The communicator joins the thread's group with its work
/// (ncclGroupCommJoin). Before 2.23 a send or receive to a peer not yet
/// connected marks it for preconnect (src/enqueue.cc p2pTaskAppend,
/// v2.22.3-1: ncclGroupCommPreconnect), which sends the group to a thread.
void M::join(Comm& c, std::vector<double> work, bool p2p, bool self_p2p) {
  Group& g = group();
  g.comm = &c;
  g.kernels.insert(g.kernels.end(), work.begin(), work.end());
  g.needs_peers = g.needs_peers || !self_p2p;
  if (p2p && !self_p2p && !threaded() && !c.p2p_connected) g.preconnect = true;
}
void M::error_check(Result r) {  // ncclGroupErrCheck
  Group& g = group();
  if (g.error == nccl_abi::kSuccess) g.error = r;
}

/// src/group.cc ncclGroupEndInternal: only the end that brings the thread's
/// depth to 0 launches; an inner one returns ncclSuccess with nothing done.
Result M::group_end() {
  Group& g = group();
  if (g.depth == 0) {
    last_error = "ncclGroupEnd: not in a group call.";
    return nccl_abi::kInvalidUsage;
  }
  if (--g.depth > 0) return nccl_abi::kSuccess;
  return launch_group(g);
}

/// The launch of a closed group. A group error fails it and becomes the
/// state of its non-blocking communicators (groupCleanup). A destroy or abort
/// in it makes it blocking (src/group.cc ncclAsyncLaunch: destroyFlag).
/// Non-blocking, it goes to a thread and returns ncclInProgress: always from
/// 2.23, before only when it holds an init or finalize job or a preconnect
/// (v2.22.3-1 ncclGroupEndInternal); else it runs here (groupLaunch).
Result M::launch_group(Group& g) {
  Group job = std::move(g);
  g = Group{};  // groupLocalResetJobState
  if (job.error != nccl_abi::kSuccess) {
    if (job.comm && !job.comm->blocking) job.comm->async = job.error;
    for (auto* list : {&job.inits, &job.finalizes})
      for (Comm* c : *list)
        if (!c->blocking) c->async = job.error;
    return job.error;
  }
  Comm* first = job.comm                 ? job.comm
                : !job.inits.empty()     ? job.inits[0]
                : !job.finalizes.empty() ? job.finalizes[0]
                                         : nullptr;
  if (!first && job.reclaims.empty()) return nccl_abi::kSuccess;
  const bool blocking = !job.reclaims.empty() || first->blocking;
  const bool jobs = !job.inits.empty() || !job.finalizes.empty();
  if (!blocking && (threaded() || jobs || job.preconnect)) {
    for (Comm* c : job.inits) start_init(*c);
    for (Comm* c : job.finalizes) start_launch(*c, {}, false, false);
    if (Comm* c = job.comm) {
      if (c->launching && c->initing) {  // its init is this group's too: one thread does both
        c->pending.insert(c->pending.end(), job.kernels.begin(), job.kernels.end());
      } else {
        const bool connects = threaded() ? job.needs_peers && !c->connected : job.preconnect;
        start_launch(*c, std::move(job.kernels), job.needs_peers, connects);
        if (threaded()) c->connected = c->connected || job.needs_peers;
        if (job.preconnect) c->p2p_connected = true;
      }
    }
    return nccl_abi::kInProgress;  // "ret = ncclInProgress"
  }
  Result r = nccl_abi::kSuccess;
  for (Comm* c : job.inits)
    if (Result ir = init_inline(*c); r == nccl_abi::kSuccess) r = ir;
  for (Comm* c : job.reclaims) reclaim(*c);
  if (!job.comm || r != nccl_abi::kSuccess) return r;
  // groupLaunch on this thread. A launch that must connect first (a blocking
  // communicator's first use; from 2.22 a collective's runtime connection)
  // waits here for the peers; a connected one puts the kernel on the stream,
  // where it waits for them on the device.
  Comm& c = *job.comm;
  const bool absent = job.needs_peers && o.peers_absent;
  if (absent && !c.connected) {
    last_error = "model: a launch that connects to peers who never come blocks forever in NCCL";
    return nccl_abi::kInternalError;
  }
  c.connected = c.connected || job.needs_peers;
  const bool coupled = job.needs_peers && o.nranks > 1;
  const double ready = coupled ? peers_launch() : 0;
  for (double us : job.kernels) to_stream(us, coupled, ready);
  if (absent) stuck = &c;
  return nccl_abi::kSuccess;
}

/// src/init.cc ncclCommAbort -> ncclCommEnsureReady with the abort flag
/// raised: src/group.cc ncclGroupJobAbort ends the launch thread and joins
/// it, so its work never reaches the stream; a kernel waiting on the device
/// sees the flag and ends (abortFlagDev).
void M::abort_launch(Comm& c) {
  if (c.launching) {
    c.launching = false;
    c.pending.clear();
    c.waits_for_peers = false;
    c.async = nccl_abi::kInternalError;
  }
  c.initing = false;  // its root still holds its check-in, and listens on

  c.thread_live = false;
  unstick(c);
}

/// src/init.cc commReclaim: frees the communicator only when its init
/// reached initTransportsRank (comm->intraComm0 set there, src/init.cc);
/// one whose init never got that far is left as it is, never freed. Either
/// way the handle is gone for the caller: the model answers ncclInvalidUsage
/// to any later use, which would be a bug.
void M::reclaim(Comm& c) {
  if (c.init_done) wait_for_held_work();  // commDestroySync (nccl_model_cuda.cpp)
  if (c.init_done) ++reclaimed;
  c.gone = true;
  c.launching = false;
  c.pending.clear();
  c.thread_live = false;
  c.async = nccl_abi::kInvalidUsage;
}

NcclModel::NcclModel(Options o) : impl_(new Impl) {
  impl_->o = o;
  impl_->rng.seed(o.seed);
  Impl::current = impl_;
  fill_model_nccl(nccl_, o);
  cuda_ = model_cuda_table();
}

NcclModel::~NcclModel() {
  if (Impl::current == impl_) Impl::current = nullptr;
  delete impl_;
}

void* NcclModel::stream() const { return reinterpret_cast<void*>(0x5eed); }

void NcclModel::inject_async_error(nccl_abi::Result r, std::string text) {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  for (auto& c : impl_->comms) {
    c.injected = r;
    c.injected_warn = text;
  }
}
void NcclModel::warn(std::string text) {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  impl_->last_error = std::move(text);
}
void NcclModel::set_peers_absent(bool absent) {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  impl_->o.peers_absent = absent;
}
void NcclModel::set_peer_ids(std::vector<nccl_abi::UniqueId> ids) {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  impl_->peer_ids = std::move(ids);
}
int NcclModel::scalable_inits() const { return impl_->scalable_inits; }
int NcclModel::refused_calls() const { return impl_->refused; }
int NcclModel::kernels() const { return impl_->kernels; }
int NcclModel::aborts() const { return impl_->aborts; }
int NcclModel::destroys() const { return impl_->destroys; }
int NcclModel::refused_destroys() const { return impl_->refused_destroys; }
int NcclModel::reclaimed() const { return impl_->reclaimed; }
int NcclModel::live_threads() const {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  return static_cast<int>(std::count_if(impl_->comms.begin(), impl_->comms.end(),
                                        [](const Impl::Comm& c) { return c.thread_live; }));
}
int NcclModel::group_depth() const {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  return impl_->group().depth;
}
double NcclModel::kernel_us(std::size_t bytes) const { return impl_->kernel_us(bytes); }
double NcclModel::host_us() const {
  std::lock_guard<std::recursive_mutex> lock(impl_->m);
  return impl_->host;
}

}  // namespace gpudiag
