// gpudiag check: the phases every rank runs, and what it concludes.
//
//   device        select the GPU, allocate --mem, write a pattern and read it back
//   compute       GEMMs of fixed inputs (bf16, fp16, fp32), their checksums and
//                 rate (compute/run.h); compared at the exchange per GPU model: a
//                 rank that differs is broken in compute, a verdict on it alone
//                 (it goes on through the collectives; its peers end OK)
//   exchange      checkpoint: every rank's identity; conflicts (two ranks on one
//                 GPU, world sizes or backends that disagree) stop the job here
//   communicator  NCCL init (non-blocking, deadline, abort) or host transport
//   all-reduce    a small and a large buffer of rank-dependent values, checked
//                 exactly; then timed iterations of the large one
//   sweep         (bench) nccl-tests' measurement of one collective (bench/engine.h)
//   links         (bench --links) every pair exchanges a buffer, timed (links.h)
//   barrier       the last collective; its checkpoint is the job's final table
//
// Every rank passes every checkpoint, in order, whatever happened to it: a
// failed rank carries its reason to the others, and the others skip the
// collective work that would now hang and say whom they are waiting on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/engine.h"
#include "checks/host_transport.h"
#include "checks/record.h"
#include "plane/plane.h"
#include "util/env.h"
#include "world/discovery.h"

namespace gpudiag {

struct CheckOptions {
  std::string backend = "auto";  ///< auto | nccl | host
  std::uint64_t mem_bytes = 0;   ///< 0: 256 MiB on a GPU, 16 MiB on the host backend
  std::uint64_t small_bytes = 4096;
  std::uint64_t large_bytes = 32ull << 20;
  int iters = 5;                 ///< timed iterations of the large all-reduce
  double timeout_s = 60;         ///< how long any wait for peers may take
  int device = -1;               ///< force a CUDA ordinal
  std::string nccl_lib;          ///< --nccl-lib: the libnccl.so.2 to load ("" = search)
  /// GPUDIAG_NCCL_ROOTS (comm/nccl_roots.h): 0 auto, else the bootstrap roots asked for.
  int nccl_roots = 0;
  /// gpudiag bench: the sweep to run after the check's own all-reduce
  /// (bench/engine.h), and on rank 0 where its rows go: called with every
  /// rank's exchange record as the sweep starts.
  std::shared_ptr<const BenchPlan> bench;
  std::function<BenchSink*(const RankSlots<std::optional<RankRecord>>&)> bench_start;
  /// The compute phase's budget in seconds (compute/run.h): < 0 the
  /// backend's default (1.5 s on a GPU, 0.1 s on the host); --no-compute: off.
  double compute_seconds = -1;
  bool compute = true;
  int warmup = 2;                ///< untimed iterations (link test)
  /// gpudiag bench --links: bytes each pair exchanges (0: no link test).
  std::uint64_t link_bytes = 0;
  /// rounds: the pairs of a round at once; serial: one pair at a time;
  /// auto: serial when a host has more ranks than CPUs, else rounds.
  std::string link_schedule = "auto";
};

/// What the check needs from outside: who we are and how to reach the others.
struct CheckSetup {
  World world;
  Env env;
  std::string host;
  Plane* plane = nullptr;
  HostTransport* host_transport = nullptr;  ///< may be null if the host backend is impossible
  std::string mpi_version;                  ///< empty when not under MPI
  /// Why the rendezvous store is unauthenticated (no job secret, torchrun's
  /// agent store); empty when it is authenticated or not used.
  std::string store_unauthenticated;
};

struct CheckResult {
  RankRecord me;
  std::string store_unauthenticated;  ///< CheckSetup's, for the report
  /// The final table (records as last seen; nullopt for a rank never heard from).
  /// Complete on rank 0 only (the plane's judge; see plane/plane.h):
  /// elsewhere it holds the records this rank read, and only those are stored,
  /// so a rank's memory does not grow with the job (checks/peer_book.h).
  RankSlots<std::optional<RankRecord>> table;
  /// On a rank that read rank 0's review instead of the table: whether that
  /// review found every rank present and none failed at the last checkpoint.
  std::optional<bool> judged_all_ok;
  /// Per rank: the checkpoint it was last seen at ("" never). Stored only for
  /// ranks missing now; the others read the last checkpoint's name.
  RankSlots<std::string> last_seen;
  std::vector<std::string> warnings;  ///< version differences, discovery warnings
  std::vector<int> live;              ///< ranks present at the last checkpoint
  /// Per rank that stopped arriving: the first checkpoint it missed, and what
  /// the plane last knew of it ("pid 4242 on node2, last phase: all-reduce").
  RankSlots<std::string> missed_at, missing_note;
  /// A launcher's notice of a peer's death, when one came (Plane::peer_death).
  std::optional<std::string> death;
  /// The exchange's fingerprint comparison, as the judge sent it
  /// (world/fingerprint_compare.h comparison_json); null when there was none.
  nlohmann::json fingerprint;
  bool abandon_transport = false;     ///< a failed transfer may still be in flight: skip MPI_Finalize
};

CheckResult run_check(const CheckOptions& options, CheckSetup& setup);

}  // namespace gpudiag
