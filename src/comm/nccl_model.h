// A model of NCCL (2.28 by default, 2.14-2.22 by Options::version) and of
// the CUDA stream under it, for tests on machines without a GPU: the NcclApi
// and CudaOps tables of one rank, behaving as NCCL does on every point
// gpudiag relies on. Each rule cites where NCCL says so (NVIDIA/nccl, tag
// v2.28.9-1 unless another tag is named) beside its code in nccl_model*.cpp.
// The contract suite (nccl_contract_test.cpp) states the same rules as tests
// and runs them against this model here and against a real libnccl.so.2 on a
// GPU (scripts/gpu-check.sh); where they disagree, this model is wrong.
//
// The rank's peers are virtual: they join every call unless peers_absent is
// set, when a launch that needs them (init, a collective at 2+ ranks, any
// send/recv) stays pending until aborted. A unique id is the model's own
// (ncclGetUniqueId): an init with an id it did not issue, or one already used
// by a communicator, fails as NCCL's bootstrap fails to reach its root.
// ncclCommInitRankScalable (from 2.23) splits the ranks between its nId
// roots; the peers pass this rank's ids unless set_peer_ids says otherwise,
// and ids that differ, like a root that does not listen, leave the init
// pending until aborted. The
// environment NCCL reads (NCCL_COMM_BLOCKING, NCCL_COMM_ID) is Options::env,
// never the process's. Time is virtual too: a host clock that API calls and
// polls advance, and one stream whose kernels run back to back at
// `bytes_per_us` after `kernel_latency_us`; events take the time at which
// the stream reaches them, so an event recorded before a pending launch
// reached the stream times nothing, as on a GPU. A stream gate
// (CudaOps::gate_*) holds the stream as the real one's kernel does: work and
// events queued behind it run when it is opened or its cap of device time
// has passed.
//
// One model is current at a time (the tables are plain function pointers);
// its calls are serialised by a mutex, so an abort from another thread is
// safe. NCCL's group state is per thread, and so is the model's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/nccl_api.h"
#include "gpu/cuda_ops.h"

namespace gpudiag {

class NcclModel {
 public:
  struct Options {
    int nranks = 2;
    int rank = 0;
    /// ncclGetVersion's answer. Before 22300 (2.23) a non-blocking group is
    /// launched on the caller's thread unless it holds an init, a finalize
    /// or sends/receives to a peer not yet connected; from 22200 (2.22) a
    /// collective connects at its first use (runtime connection), before on
    /// init. ncclAlltoAll exists from 22800, ncclCommInitRankScalable from
    /// 22300.
    int version = 22809;
    /// The environment NCCL would read (getenv): NCCL_COMM_BLOCKING, NCCL_COMM_ID.
    std::map<std::string, std::string> env;
    /// The launch thread finishes after a number of polls drawn from
    /// [0, max_launch_polls]; a communicator's first launch also connects
    /// to its peers, which takes connect_polls more.
    int max_launch_polls = 6;
    int connect_polls = 200;
    int init_polls = 20;
    /// Host time (us) NCCL's launch thread takes before the kernel is on the
    /// stream (src/group.cc groupLaunchNonBlocking: a thread per launch).
    double launch_us = 0;
    /// Each virtual peer's own host time (us) per launch, peer 1 first; a
    /// peer not named takes launch_us. Empty: the peers' work is always on
    /// their streams when this rank's is (they never hold a collective up).
    /// Set, a collective kernel starts only once every peer's copy of it is
    /// on that peer's stream and past that peer's gate (docs/ARCHITECTURE.md,
    /// "The NCCL data path": a collective waits on the device for its peers).
    std::vector<double> peer_launch_us;
    /// A threaded launch ends before the call's trailing
    /// ncclCommGetAsyncError (the caller was descheduled meanwhile), so a
    /// collective at 2+ ranks returns ncclSuccess with its kernel queued.
    bool launch_ends_before_return = false;
    /// ncclAlltoAll exists (and the version has it).
    bool has_alltoall = true;
    bool peers_absent = false;
    double bytes_per_us = 1000;  ///< the virtual device: 1 GB/s per us of kernel time
    double kernel_latency_us = 8;
    std::uint32_t seed = 1;
  };

  explicit NcclModel(Options o);
  ~NcclModel();
  NcclModel(const NcclModel&) = delete;
  NcclModel& operator=(const NcclModel&) = delete;

  const NcclApi& nccl() const { return nccl_; }
  const CudaOps& cuda() const { return cuda_; }
  void* stream() const;

  /// An asynchronous error (a peer's network failing) that the next poll
  /// of ncclCommGetAsyncError reports; `last_error`, when not empty, becomes
  /// NCCL's last error (its WARN) as the error surfaces.
  void inject_async_error(nccl_abi::Result r, std::string last_error);
  /// A WARN from elsewhere in the process (another communicator, a proxy
  /// thread): NCCL's one last-error text becomes `text` (src/debug.cc).
  void warn(std::string text);
  void set_peers_absent(bool absent);
  /// The ids the virtual peers pass to their next inits, when they are not
  /// this rank's (NCCL requires the same array on every rank).
  void set_peer_ids(std::vector<nccl_abi::UniqueId> ids);

  // What was seen, for tests.
  int refused_calls() const;  ///< calls answered "previous operation" (ncclInvalidArgument)
  int kernels() const;        ///< kernels that reached the stream
  int aborts() const;
  int destroys() const;  ///< ncclCommDestroy calls, refused or not
  int refused_destroys() const;
  /// Communicators whose memory commReclaim freed (destroy, or abort of one
  /// whose init had completed).
  int reclaimed() const;
  int scalable_inits() const;  ///< ncclCommInitRankScalable calls that created a communicator
  int live_threads() const;  ///< launch threads not yet joined by a poll
  /// The calling thread's NCCL group depth (src/group.cc ncclGroupDepth).
  int group_depth() const;
  /// The kernel time the model gives a call moving `bytes` bytes (us).
  double kernel_us(std::size_t bytes) const;
  /// The host's virtual clock (us).
  double host_us() const;

  struct Impl;

 private:
  Impl* impl_;
  NcclApi nccl_;
  CudaOps cuda_;
};

}  // namespace gpudiag
