// The NCCL model's state (nccl_model.h), shared by its four parts: the
// launch and group machinery (nccl_model.cpp), NCCL's entry points and its
// environment (nccl_model_api.cpp), the unique id and the bootstrap
// (nccl_model_bootstrap.cpp), and the CUDA stream, events and gate
// (nccl_model_cuda.cpp). Only those files include it.
#pragma once

#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "comm/nccl_model.h"

namespace gpudiag {

struct NcclModel::Impl {
  using Result = nccl_abi::Result;
  struct Comm {
    bool blocking = false;
    int nranks = 0;
    Result async = nccl_abi::kSuccess;  ///< comm->asyncResult
    bool launching = false;             ///< a launch (or init, finalize) thread runs
    int pending_polls = 0;              ///< polls until that thread is done
    double launch_ready_at = 0;         ///< ... and not before this host time
    bool waits_for_peers = false;       ///< pending until aborted (peers_absent)
    bool thread_live = false;           ///< a launch thread not yet joined
    bool connected = false;             ///< connected to its peers (see Group::preconnect)
    bool p2p_connected = false;         ///< before 2.23: sends/receives connected
    bool initing = false;               ///< the running thread is its init
    bool init_queued = false;           ///< its init job waits in an open group
    bool init_done = false;             ///< initTransportsRank reached (comm->intraComm0)
    bool finalize_called = false;
    bool aborted = false;                  ///< the abort flag
    bool gone = false;                     ///< destroyed or aborted: any later use is a bug
    Result outcome = nccl_abi::kSuccess;   ///< what the running thread ends with
    std::string outcome_warn;              ///< ... and the WARN it leaves
    nccl_abi::UniqueId id{};               ///< the id of the root its init checks in with
    std::string root;                      ///< ... and the bootstrap root that names
    /// ncclCommInitRankScalable: the other roots of its nId (src/bootstrap.cc:
    /// the virtual peers check in with them), and whether the peers were
    /// given other ids than this rank (NCCL_COMM_ID with nId > 1 included).
    std::vector<std::string> other_roots;
    bool ids_disagree = false;
    std::vector<double> pending;           ///< kernel times waiting for the launch
    bool coupled = false;                  ///< ... which wait for the peers' copies
    double peers_ready = 0;                ///< ... on the peers' streams by then
    Result injected = nccl_abi::kSuccess;  ///< an error the proxy will report
    std::string injected_warn;             ///< ... and its WARN, written as it surfaces
  };
  struct Event {
    bool recorded = false;
    double t = 0;
  };
  /// Work queued behind a held gate: a kernel of `us`, or an event.
  struct Held {
    double us = 0, enq = 0;
    Event* ev = nullptr;
    bool coupled = false;  ///< an NCCL kernel that waits for its peers' copies
    bool nccl = true;      ///< NCCL's work (not a copy of gpudiag's)
  };
  /// One thread's group: src/group.cc keeps ncclGroupDepth, ncclGroupError,
  /// ncclGroupCommHead and ncclAsyncJobs in __thread variables.
  struct Group {
    int depth = 0;
    Result error = nccl_abi::kSuccess;
    Comm* comm = nullptr;  ///< the one communicator whose calls joined
    std::vector<double> kernels;
    bool needs_peers = false;
    bool preconnect = false;                        ///< ncclGroupCommPreconnectHead (before 2.23)
    std::vector<Comm*> inits, finalizes, reclaims;  ///< ncclAsyncJobs
  };
  /// A bootstrap root (src/bootstrap.cc bootstrapRoot): a thread listening
  /// until every rank of its communicator checked in, then gone.
  struct Root {
    int listening = 0;   ///< roots on that address (NCCL_COMM_ID: SO_REUSEPORT)
    int collecting = 0;  ///< inits that reached it and were not all answered
  };

  Options o;
  std::mt19937 rng;
  mutable std::recursive_mutex m;
  double host = 0, tail = 0;  ///< virtual us: the host's clock, the stream's end
  std::deque<Comm> comms;     ///< stable addresses: a handle is a Comm*
  std::deque<Event> events;
  std::string last_error;  ///< src/debug.cc ncclLastError: one for the process
  std::map<std::thread::id, Group> groups;
  std::map<std::string, Root> roots;           ///< by the id's handle bytes
  std::optional<long long> comm_blocking_env;  ///< NCCL_PARAM's cache (read once)
  int issued = 0;
  int refused = 0, kernels = 0, aborts = 0, destroys = 0, refused_destroys = 0, reclaimed = 0;
  int scalable_inits = 0;
  /// The ids the virtual peers pass to their inits (set_peer_ids); unset:
  /// the same as this rank's, as NCCL requires.
  std::optional<std::vector<nccl_abi::UniqueId>> peer_ids;
  // The stream gate (gpu/stream_gate.cu): while held, work queues behind it;
  // it ends when opened or when cap_us of device time passed since it started.
  bool gate_held = false, gate_expired = false;
  double gate_start = 0, gate_cap = 0;
  std::vector<Held> held;
  /// Options::peer_launch_us: each virtual peer's host clock (us). A peer
  /// mirrors this rank's calls; it catches up with this rank's clock where
  /// this rank's stream drains (the peers' streams drain with it).
  std::vector<double> peer_clock;
  /// A kernel that waits on the device for peers that never come (an inline
  /// launch before 2.23): the stream does not drain until it is aborted.
  Comm* stuck = nullptr;
  std::vector<Event*> stuck_events;

  static Impl* current;

  Comm* comm(nccl_abi::CommHandle h) { return reinterpret_cast<Comm*>(h); }
  Group& group() { return groups[std::this_thread::get_id()]; }
  /// From 2.23 (src/group.cc ncclGroupEndInternal) every non-blocking group
  /// goes to a thread; before, only one holding async jobs or preconnects.
  bool threaded() const { return o.version >= 22300; }
  /// ncclCommDestroy and ncclCommAbort open a group of their own (2.24-2.26,
  /// 2.28+; src/init.cc), which a refused destroy leaves open.
  bool teardown_in_group() const {
    return (o.version >= 22400 && o.version < 22700) || o.version >= 22800;
  }
  double kernel_us(std::size_t bytes) const {
    return o.kernel_latency_us + static_cast<double>(bytes) / o.bytes_per_us;
  }
  int draw() { return std::uniform_int_distribution<int>(-1, o.max_launch_polls)(rng); }
  const std::string* env(const char* name) const {
    auto it = o.env.find(name);
    return it == o.env.end() ? nullptr : &it->second;
  }

  // The stream (nccl_model_cuda.cpp).
  void to_stream(double us, bool coupled = false, double peers_ready = 0, bool nccl = true);
  /// A teardown's wait for this rank's NCCL work behind a held gate.
  void wait_for_held_work();
  /// The peers launch their copies of a collective: the host time by which
  /// all are on the peers' streams (0 without peer_launch_us).
  double peers_launch();
  /// When the last peer opens a gate this rank opens now (each ran the same
  /// batch of launches); `now` when the peers are always ready.
  double peers_open(double now) const;
  void peers_drained();
  bool gate_lapsed();
  void release(double at, bool expired);
  void unstick(Comm& c);

  // Launches and groups (nccl_model.cpp).
  void start_launch(Comm& c, std::vector<double> work, bool needs_peers, bool connects);
  bool launch_done(Comm& c);
  void finish_launch(Comm& c);
  Result poll(Comm& c);
  Result read(Comm& c);
  Result ensure_ready(Comm& c, bool refusal_becomes_state);
  Result enqueue(nccl_abi::CommHandle h, std::size_t bytes, bool p2p, bool self_p2p);
  void join(Comm& c, std::vector<double> kernels, bool p2p, bool self_p2p);
  void error_check(Result r);
  Result group_end();
  Result launch_group(Group& g);
  void abort_launch(Comm& c);
  void reclaim(Comm& c);

  // The bootstrap (nccl_model_bootstrap.cpp).
  /// The roots an init of `nid` ids checks in with, named into `c`.
  void name_roots(Comm& c, const nccl_abi::UniqueId* ids, int nid);
  /// Roots that never complete: a peer's root not listening, one root twice,
  /// or ids that differ between the ranks.
  bool roots_never_answer(const Comm& c) const;
  void start_init(Comm& c);
  Result init_inline(Comm& c);
  void init_succeeded(Comm& c);
};

/// The tables' entry points (nccl_model_api.cpp, nccl_model_cuda.cpp).
void fill_model_nccl(NcclApi& api, const NcclModel::Options& o);
CudaOps model_cuda_table();
/// ncclGetUniqueId, and the bytes of an id that name its root (nccl_model_bootstrap.cpp).
nccl_abi::Result model_get_unique_id(nccl_abi::UniqueId* id);
std::string model_handle_key(const nccl_abi::UniqueId& id);

}  // namespace gpudiag
