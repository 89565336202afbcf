// One rank's run of the check (check.h): the class that check.cpp (the
// pipeline, timing, checkpoints) and check_phases.cpp (each phase's work)
// define between them, and the constants both use. Not for use outside them.
#pragma once

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "checks/backend_choice.h"
#include "checks/check.h"
#include "checks/collective_checks.h"
#include "checks/link_run.h"
#include "checks/links.h"
#include "checks/memory_checks.h"
#include "checks/nccl_root_ids.h"
#include "checks/peer_book.h"
#include "checks/test_hook.h"
#include "checks/verdict.h"
#include "checks/watchdog.h"
#include "compute/judge.h"
#include "compute/run.h"
#include "comm/communicator.h"
#include "comm/nccl.h"
#include "gpu/cuda.h"
#include "gpu/cuda_ops.h"
#include "hw/evidence.h"
#include "hw/node_verdict.h"
#include "util/error.h"
#include "util/strings.h"
#include "world/fingerprint.h"
#include "world/gpu_choice.h"

namespace gpudiag::check_run {

/// After a rank is known missing, later checkpoints only wait this long: the
/// live ranks are all at the same point, and the missing one is not coming.
constexpr double kDegradedWaitS = 3.0;
/// The communicator's teardown: ncclCommFinalize may take 10 s (then it is
/// aborted); past this the watchdog ends the rank with its status line.
constexpr double kTeardownLimitS = 45.0;
/// --mem defaults: GPU memory is what is under test; on the host backend the
/// memory phase only proves the rank can allocate, so it stays small.
constexpr std::uint64_t kDefaultDeviceMem = 256ull << 20;
constexpr std::uint64_t kDefaultHostMem = 16ull << 20;
/// The link test's turns wait up to this many --timeout for the turn before:
/// a pair takes at most its first exchange (< --timeout) plus the greater
/// of that and --timeout / 4.
constexpr double kLinkWaitFactor = 3.0;

class CheckRun {
 public:
  CheckRun(const CheckOptions& o, CheckSetup& s)
      : opt_(o),
        setup_(s),
        plane_(*s.plane),
        watchdog_(s.host + "-" + std::to_string(s.world.local_rank)),
        test_hook_(TestHook::from_env(s.env, s.world.rank)) {
    const int n = plane_.size();
    for (int r = 0; r < n; ++r) result_.live.push_back(r);
    result_.table.resize(n);
    result_.last_seen.resize(n);
    result_.missed_at.resize(n);
    result_.missing_note.resize(n);
    auto& me = result_.me;
    me.rank = s.world.rank;
    me.world_size = s.world.size;
    me.local_rank = s.world.local_rank;
    me.host = s.host;
    me.pid = static_cast<int>(getpid());
    me.host_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
    me.launcher = launcher_id(s.world.launcher);
    me.mpi_version = s.mpi_version;
    result_.store_unauthenticated = s.store_unauthenticated;
    result_.warnings = s.world.warnings;
  }

  CheckResult run();

 private:
  RankRecord& me() { return result_.me; }

  /// Finalize or abort under the watchdog: a teardown that hangs (a known
  /// class of NCCL bug, or a hung GPU) ends the rank with its status line
  /// instead of leaving it running.
  void close_communicator();
  double wait_seconds() const {
    return degraded_ ? std::min(kDegradedWaitS, opt_.timeout_s) : opt_.timeout_s;
  }
  Deadline wait_deadline() const {
    return Deadline::after_seconds(degraded_ ? std::min(kDegradedWaitS, opt_.timeout_s)
                                             : opt_.timeout_s);
  }

  /// Runs `work` for `phase` unless this rank already stopped; records time and failure.
  void timed(const char* phase, const std::function<void()>& work);

  double watchdog_limit_s(const std::string& phase) const;

  bool links_serial() const {
    return opt_.link_schedule == "serial" || (opt_.link_schedule == "auto" && oversubscribed_);
  }

  void device();

  /// The compute phase (compute/run.h): this rank's GEMM checksums and rate.
  void compute();
  double compute_seconds() const {
    return opt_.compute_seconds >= 0 ? opt_.compute_seconds
           : on_gpu()      ? kGpuComputeSeconds
                                      : kHostComputeSeconds;
  }
  bool on_gpu() const { return result_.me.backend == "nccl"; }
  /// This rank's compute verdict from the exchange's tally (compute/judge.h).
  void judge_compute_here();
  /// After the last checkpoint: a compute verdict fails its rank, in this
  /// rank's record and in the table (every collective is behind it, so no
  /// peer was stopped by it).
  void settle_compute();

  /// The second read of the node's hardware evidence, at the end of the
  /// check: kernel-log findings logged since the check started (a link that
  /// flapped, an Xid) and sysfs counters that moved since device() read them
  /// (carrier_changes of a physical NIC, InfiniBand link_downed, AER counts)
  /// fail the rank with the evidence and its action (hw/evidence.h).
  void hardware();

  /// This rank's part of the node's verdict: its counts, and `is broken`
  /// when the node is unfit.
  void judge_hardware(const hw::NodeVerdict& v);

  /// Publishes this rank's record and decides whether it can go on. Rank 0
  /// (the plane's judge) reviews the whole table; the others read its review
  /// and the few records they need (see plane.h), or, when rank 0 is missing,
  /// every record and review it themselves.
  void checkpoint(const char* name, const std::function<void()>& extra_review);

  /// This rank's failure was a wait on peers: a timeout, or a wait given up
  /// because a peer reported failing (every backend says "abandoned: ").
  bool waited_on_peers() const {
    return result_.me.timed_out || result_.me.reason.find("abandoned: ") != std::string::npos;
  }

  static bool is_collective(const std::string& phase) {
    for (const char* p : {"communicator", "all-reduce", "sweep", "links", "barrier"})
      if (phase == p) return true;
    return false;
  }

  /// This rank's fingerprint, for the exchange's comparison. Never fails the
  /// rank: what cannot be read is "unknown".
  void fingerprint();

  void after_exchange() {
    if (!review_.conflicts.empty()) me().fail("exchange", one_line(review_.conflicts));
    for (auto& w : review_.warnings) result_.warnings.push_back(w);
    judge_compute_here();
  }

  /// This checkpoint's records, decoded (nullopt for the missing and the
  /// records this rank did not read).
  static std::vector<std::optional<RankRecord>> decoded(const Gathered& g);

  /// The judge's review; this rank's own when there was no judge (then the
  /// plane read every record).
  CheckpointReview read_review(const Gathered& g, bool exchange);

  /// The table as it was, for the labels of ranks now missing.
  std::function<const RankRecord*(int)> table_lookup() const;

  /// "rank 3 [node2-1]" from what this rank knows, or the judge's label.
  std::string label_of(int r) const;

  /// The records this rank reads at the exchange besides the digest: rank 0's
  /// (its NCCL id; other roots' come in the review), its host/tcp ring
  /// neighbours and halving partners, or every rank's for the link test's mesh.
  std::vector<int> exchange_needs() const;

  void communicator();

  void all_reduce();

  void time_large(float* buf, std::size_t n);

  /// gpudiag bench's measurement (bench/engine.h). Peers start each size
  /// together (the engine's barrier), so a slow rank shows in everyone's times.
  void sweep();

  /// The link test (link_run.h).
  void links() {
    LinkRun run{*comm_,         *workspace_,    me(),           plane_.size(),
                opt_.iters,     opt_.warmup,    opt_.timeout_s, opt_.link_bytes,
                links_serial(), kLinkWaitFactor};
    run_link_test(run);
  }

  const CheckOptions& opt_;
  CheckSetup& setup_;
  Plane& plane_;
  Watchdog watchdog_;
  TestHook test_hook_;
  CheckResult result_;
  bool degraded_ = false;
  CheckpointReview review_;      ///< the last checkpoint's, from the judge
  hw::HwSources hw_sources_;     ///< where device() and hardware() read
  hw::HwEvidence hw_start_;      ///< sysfs and NVML as device() read them
  std::uint64_t hw_since_ = 0;   ///< the check's start in the kernel log's clock
  bool hw_reader_ = true;        ///< this rank read the node at the start (hw_start_ is its)
  bool oversubscribed_ = false;  ///< from the exchange's review
  /// The GPU's stream and the barrier's scratch float, shared by the
  /// workspace and the communicator (each keeps it alive).
  struct DeviceContext {
    Stream stream;
    DeviceBuffer scratch{sizeof(float)};
  };
  std::shared_ptr<DeviceContext> device_;
  std::unique_ptr<Workspace> workspace_;
  std::unique_ptr<Communicator> comm_;
};

}  // namespace gpudiag::check_run
