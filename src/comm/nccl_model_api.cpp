// NCCL's entry points in the model (nccl_model.h): a communicator's init
// from one unique id or several (its config, NCCL's environment, nId),
// finalize, destroy and abort, the
// collectives, groups and the process-wide last error; the unique id and the
// bootstrap it names are nccl_model_bootstrap.cpp's. Each rule names the NCCL
// source it follows (NVIDIA/nccl tag v2.28.9-1; file and function).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/nccl_model_impl.h"

namespace gpudiag {

using nccl_abi::Result;
using M = NcclModel::Impl;

namespace {

M& cur() { return *M::current; }
#define LOCK std::lock_guard<std::recursive_mutex> lock(cur().m)

// NCCL's texts, src/init.cc ncclGetErrorString.
const char* error_string(Result r) {
  switch (r) {
    case nccl_abi::kSuccess:
      return "no error";
    case nccl_abi::kUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case nccl_abi::kSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case nccl_abi::kInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case nccl_abi::kInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case nccl_abi::kInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case nccl_abi::kRemoteError:
      return "remote process exited or there was a network error";
    case nccl_abi::kInProgress:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}

std::size_t bytes_of(std::size_t count, int type) {
  static const std::size_t size[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};  // ncclInt8 .. ncclBfloat16
  return count * (type >= 0 && type < 10 ? size[type] : 1);
}

// src/init.cc ncclGetVersion: NCCL_VERSION_CODE.
Result get_version(int* v) {
  *v = cur().o.version;
  return nccl_abi::kSuccess;
}

/// NCCL_COMM_BLOCKING as src/init.cc envConfigOverride reads it
/// (ncclParamCommBlocking: strtoll, cached at the first read of the process,
/// src/include/param.h NCCL_PARAM); only 0 and 1 override the config.
long long blocking_override(M& m) {
  if (!m.comm_blocking_env) {
    const std::string* v = m.env("NCCL_COMM_BLOCKING");
    m.comm_blocking_env = v && !v->empty() ? std::strtoll(v->c_str(), nullptr, 0) : -1;
  }
  return *m.comm_blocking_env;
}

// src/init.cc ncclCommInitRankConfig and ncclCommInitRankScalable ->
// ncclCommInitRankDev, inside a group of its own: nId first (1 <= nId <=
// nranks, else "improper usage", before anything else), the rank, the config
// (parseCommConfig, then envConfigOverride), the root under NCCL_COMM_ID,
// and the init job (ncclAsyncLaunch) that the group's end runs: on a thread
// when non-blocking (ncclInProgress, at any size), here when blocking. In a
// group left open the job waits there, and the communicator's state is still
// the zero of its allocation: ncclSuccess.
Result init_dev(nccl_abi::CommHandle* out, int nranks, int nid, const nccl_abi::UniqueId* ids,
                int rank, nccl_abi::Config* cfg) {
  LOCK;
  M& m = cur();
  ++m.group().depth;  // ncclGroupStartInternal
  *out = nullptr;
  Result r = nccl_abi::kSuccess;
  M::Comm* c = nullptr;
  if (nid <= 0 || nid > nranks) {
    m.last_error = "improper usage of ncclCommInitRank: nId = " + std::to_string(nid) +
                   ", nranks=" + std::to_string(nranks);
    r = nccl_abi::kInvalidArgument;
  } else if (!ids) {
    // Not NCCL's rule: NCCL copies nId ids from the pointer unchecked
    // (memcpy in ncclCommInitRankDev) and crashes; the model refuses instead.
    m.last_error = "model: ncclCommInitRankScalable with commIds = NULL (NCCL would read "
                   "through the null pointer)";
    r = nccl_abi::kInvalidArgument;
  } else if (nranks != m.o.nranks || rank != m.o.rank || rank < 0 || rank >= nranks) {
    m.last_error =
        "Invalid rank requested : " + std::to_string(rank) + "/" + std::to_string(nranks);
    r = nccl_abi::kInvalidArgument;
  } else if (cfg && cfg->magic != 0xcafebeef) {
    m.last_error = "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER";
    r = nccl_abi::kInvalidArgument;
  } else {
    c = &m.comms.emplace_back();
    c->nranks = nranks;
    m.name_roots(*c, ids, nid);
    c->blocking = !cfg || cfg->version < 21400 || cfg->blocking != 0;
    if (const long long b = blocking_override(m); b == 0 || b == 1) c->blocking = b == 1;
    // With NCCL_COMM_ID, rank 0 (this one or a virtual peer) starts the
    // root at the first id's address (bootstrapCreateRoot(handle, true)).
    if (m.env("NCCL_COMM_ID")) ++m.roots[model_handle_key(ids[0])].listening;
    c->init_queued = true;
    m.group().inits.push_back(c);
    *out = reinterpret_cast<nccl_abi::CommHandle>(c);
  }
  if (r != nccl_abi::kSuccess) m.error_check(r);
  const Result end = m.group_end();
  if (end != nccl_abi::kSuccess && end != nccl_abi::kInProgress) return end;  // NCCLCHECK
  if (!c) return r;
  return c->blocking ? r : m.read(*c);
}

Result init(nccl_abi::CommHandle* out, int nranks, nccl_abi::UniqueId id, int rank,
            nccl_abi::Config* cfg) {
  return init_dev(out, nranks, 1, &id, rank, cfg);
}

// src/init.cc ncclCommInitRankScalable (from v2.23.4-1): nId ids, "the same
// for every rank" (nccl.h.in), which no rank can check: ids that differ
// between ranks leave roots waiting for ranks that check in elsewhere
// (nccl_model_bootstrap.cpp).
Result init_scalable(nccl_abi::CommHandle* out, int nranks, int rank, int nid,
                     nccl_abi::UniqueId* ids, nccl_abi::Config* cfg) {
  const Result r = init_dev(out, nranks, nid, ids, rank, cfg);
  if (*out) ++cur().scalable_inits;
  return r;
}

Result async_error(nccl_abi::CommHandle h, Result* st) {
  LOCK;
  *st = cur().poll(*cur().comm(h));
  return nccl_abi::kSuccess;
}

// src/init.cc ncclCommFinalize, in a group of its own: refused while
// pending or in an error state (ncclCommEnsureReady), refused twice, the
// refusal becoming a non-blocking communicator's state (its fail path);
// else the job runs on a thread (ncclInProgress) when non-blocking.
Result finalize(nccl_abi::CommHandle h) {
  LOCK;
  M& m = cur();
  M::Comm& c = *m.comm(h);
  ++m.group().depth;
  Result r = m.ensure_ready(c, true);
  if (r == nccl_abi::kSuccess && c.finalize_called) {
    r = nccl_abi::kInvalidArgument;
    if (!c.blocking) c.async = r;
  }
  if (r == nccl_abi::kSuccess) {
    c.finalize_called = true;
    m.group().finalizes.push_back(&c);
  } else {
    m.error_check(r);
  }
  const Result end = m.group_end();
  if (end != nccl_abi::kSuccess && end != nccl_abi::kInProgress) return end;
  return c.blocking ? r : m.read(c);
}

// src/init.cc ncclCommDestroy: ncclCommEnsureReady's refusal (pending, or an
// error state) returns at once (NCCLCHECK), so nothing is freed, and in
// 2.24-2.26 and 2.28+ the group it opened first (ncclGroupStartInternal)
// stays open: the thread's later calls join it and never launch. A ready
// communicator's commReclaim job runs as the group closes.
Result destroy(nccl_abi::CommHandle h) {
  LOCK;
  M& m = cur();
  M::Comm& c = *m.comm(h);
  ++m.destroys;
  const bool grouped = m.teardown_in_group();
  if (grouped) ++m.group().depth;
  if (c.gone) {
    char s[96];
    std::snprintf(s, sizeof s, "comm %p has already been destroyed", static_cast<void*>(&c));
    m.last_error = s;
    ++m.refused_destroys;
    return nccl_abi::kInvalidArgument;
  }
  if (Result r = m.ensure_ready(c, false); r != nccl_abi::kSuccess) {
    ++m.refused_destroys;
    return r;
  }
  if (m.group().depth > 0)
    m.group().reclaims.push_back(&c);  // ncclAsyncLaunch inside a group: a job of it
  else
    m.reclaim(c);
  if (!grouped) return nccl_abi::kSuccess;
  const Result end = m.group_end();
  return end == nccl_abi::kInProgress ? nccl_abi::kSuccess : end;
}

// src/init.cc ncclCommAbort: the abort flag, then (void)ncclCommEnsureReady,
// which ends and joins a pending launch or init thread (ncclGroupJobAbort),
// then commReclaim as a job (2.24-2.26, 2.28+ in a group of its own). May be
// called from another thread.
Result abort_comm(nccl_abi::CommHandle h) {
  LOCK;
  M& m = cur();
  M::Comm& c = *m.comm(h);
  ++m.aborts;
  M::Group& g = m.group();
  const bool grouped = m.teardown_in_group();
  if (grouped) ++g.depth;
  c.aborted = true;
  std::erase(g.inits, &c);
  std::erase(g.finalizes, &c);
  if (g.comm == &c) g.comm = nullptr;
  m.abort_launch(c);
  if (g.depth > 0)
    g.reclaims.push_back(&c);
  else
    m.reclaim(c);
  if (grouped) (void)m.group_end();
  return nccl_abi::kSuccess;
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
// implicit group.
Result all_to_all(const void*, void*, std::size_t n, int t, nccl_abi::CommHandle h, void*) {
  LOCK;
  M& m = cur();
  if (m.o.nranks == 1) return m.enqueue(h, bytes_of(n, t), false, false);
  M::Comm& c = *m.comm(h);
  m.host += 1;
  ++m.group().depth;
  Result r = m.ensure_ready(c, true);
  if (r == nccl_abi::kSuccess && n > 0)
    m.join(c, std::vector<double>(2 * m.o.nranks, m.kernel_us(bytes_of(n, t))), false, false);
  else if (r != nccl_abi::kSuccess)
    m.error_check(r);
  const Result end = m.group_end();
  if (r != nccl_abi::kSuccess) return r;
  return c.blocking ? end : m.read(c);
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
Result group_start() {  // src/include/group.h ncclGroupStartInternal
  LOCK;
  ++cur().group().depth;
  return nccl_abi::kSuccess;
}
Result group_end() {
  LOCK;
  return cur().group_end();
}
// src/init.cc ncclGetLastError: "comm is currently unused"; the text is
// src/debug.cc's one ncclLastError, written by every WARN of the process.
const char* last_error(nccl_abi::CommHandle) { return cur().last_error.c_str(); }
#undef LOCK

}  // namespace

void fill_model_nccl(NcclApi& api, const NcclModel::Options& o) {
  api.GetVersion = get_version;
  api.GetUniqueId = model_get_unique_id;
  api.CommInitRankConfig = init;
  api.CommGetAsyncError = async_error;
  api.CommFinalize = finalize;
  api.CommDestroy = destroy;
  api.CommAbort = abort_comm;
  api.CommUserRank = user_rank;
  api.AllReduce = all_reduce;
  api.AllGather = all_gather;
  api.Broadcast = broadcast;
  api.ReduceScatter = reduce_scatter;
  api.Reduce = reduce;
  api.Send = send;
  api.Recv = recv;
  api.GroupStart = group_start;
  api.GroupEnd = group_end;
  api.GetErrorString = error_string;
  api.GetLastError = last_error;
  if (o.has_alltoall && o.version >= 22800) api.AlltoAll = all_to_all;
  if (o.version >= nccl_abi::kScalableVersion) api.CommInitRankScalable = init_scalable;
}

}  // namespace gpudiag
