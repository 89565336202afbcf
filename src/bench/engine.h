// The bench's measurement loop, nccl-tests' way, on any Communicator.
//
// For every case (operation, type, reduction, root) and size: warm-up calls,
// a barrier, `iters` calls timed back to back (Communicator::run_timed: on
// NCCL between CUDA events on the stream, on the host backends by the
// monotonic clock), the same in place; then, unless checking is off, one
// call of each kind on the pattern of bench/pattern.h, downloaded and
// checked element by element. No store traffic happens inside a timed
// window: the ranks' results (mean, p50 and p99 per iteration, wrong
// counts, the first wrong element) are all-gathered over the communicator
// itself after each size, so rank 0 can print the row at once (that is the
// progress) and name the slowest rank and where data went wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/collective.h"
#include "comm/communicator.h"
#include "util/deadline.h"

namespace gpudiag {

struct BenchPlan {
  Coll coll = Coll::all_reduce;
  std::vector<DType> types{DType::float32};
  std::vector<RedOp> ops{RedOp::sum};
  std::vector<int> roots{0};  ///< broadcast and reduce; others print root -1
  std::vector<std::uint64_t> sizes;
  int iters = 20, warmup = 2;
  int check = 1;           ///< -c: checked calls per size (0: no check, "N/A")
  bool blocking = false;   ///< -z: wait for each call before the next
  int average = 1;         ///< -a: 0 rank 0's time, 1 mean over ranks, 2 min, 3 max
  /// -N: the sweep runs this many times, each cycle printed (nccl-tests' run_cycles).
  std::int64_t cycles = 1;
  /// -I 1: every rank's time of every iteration reaches rank 0 (BenchRow::
  /// iter_us), for nccl-tests' per-iteration JSON; bounded by kMaxIterValues.
  bool per_iter = false;
  /// Test-only (GPUDIAG_TEST_CORRUPT=RANK): this rank sends zeros in the
  /// checked calls, so the others' results miss its contribution.
  int corrupt_rank = -1;
};

/// One half of a row (out-of-place or in-place), as nccl-tests prints it.
struct BenchHalf {
  double time_us = 0, algbw = 0, busbw = 0;
  std::int64_t wrong = -1;  ///< -1: not checked (N/A)
};

/// What one rank measured and found for one row.
struct RankMeasure {
  double mean_s[2] = {0, 0}, p50_s[2] = {0, 0}, p99_s[2] = {0, 0};  ///< [0] out of place
  std::int64_t wrong[2] = {0, 0};
  std::string first_wrong;  ///< "element 17 of the in-place result: expected 12, got 9 (...)"
};

struct BenchRow {
  Coll coll = Coll::all_reduce;
  DType type = DType::float32;
  std::string redop;  ///< "sum" ... or "none"
  int root = -1;
  std::uint64_t size = 0, count = 0;
  BenchHalf half[2];  ///< [0] out of place, [1] in place
  std::vector<RankMeasure> ranks;  ///< per rank (rank 0 only)
  /// With BenchPlan::per_iter: [half][rank][iteration], microseconds (rank 0 only).
  std::vector<std::vector<float>> iter_us[2];
  /// Why some rank's figures include launch time (Communicator::ungated():
  /// its timing gate expired, or it had none); "" when every rank's were gated.
  std::string ungated;
};

/// The most per-iteration values (ranks x iterations x 2) -I gathers per row:
/// 16 M floats, 64 MiB, on rank 0 and in each rank's workspace.
inline constexpr std::uint64_t kMaxIterValues = std::uint64_t{16} << 20;

/// Whether -I's gather fits kMaxIterValues for `nranks` ranks of `iters` iterations.
inline bool per_iter_fits(int nranks, int iters) {
  return static_cast<std::uint64_t>(nranks) * static_cast<std::uint64_t>(iters) * 2 <=
         kMaxIterValues;
}

/// Where rank 0's rows go as they are measured.
class BenchSink {
 public:
  virtual ~BenchSink() = default;
  virtual void row(const BenchRow& row) = 0;
};

struct BenchContext {
  Communicator& comm;
  Workspace& workspace;
  int rank = 0, nranks = 1;
  double timeout_s = 60;  ///< each wait for peers
  BenchSink* sink = nullptr;  ///< rank 0's; null elsewhere
};

/// GPUDIAG_TEST_CORRUPT's rank (see BenchPlan::corrupt_rank); -1 when unset
/// or not a number.
int test_corrupt_rank(const std::optional<std::string>& value);

/// Runs the plan; throws what the communicator throws. Rows go to the sink.
void run_bench(const BenchPlan& plan, const BenchContext& ctx);

}  // namespace gpudiag
