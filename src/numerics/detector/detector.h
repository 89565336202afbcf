// Replays a frames dump through the reference detector's state machine and
// prints what that detector prints on stdout during the same run.
//
// The reference hooks every module's forward; each finished call is a frame.
// Per frame, in this order:
//   1. trace mode = the current batch number is one of --trace-batches; in
//      trace mode the saved frames are dropped;
//   2. the root module (empty module path) finishing ends the batch: the
//      batch number goes up by one here, before the frame is analysed;
//   3. each entry gives a line; a tensor with NaN prints "<label> has nans",
//      one with an inf "<label> has infs", at once, and sets the (sticky)
//      detected flag;
//   4. the frame is saved in a ring of --max-frames frames; in trace mode it
//      is printed and the ring emptied;
//   5. detected and not in trace mode: the report (blank line, "Detected
//      inf/nan during batch_number=N", "Last K forward frames:", the column
//      header, the saved frames, three blank lines) and the run stops;
//   6. --abort-after-batch N and the batch number now above N: the run stops.
// The first frame of every batch starts with two blank lines, the
// "*** Starting batch number=N ***" marker and the column header.
//
// One deliberate difference: the reference replaces its ring with a plain
// list when it empties it in trace mode, so after a traced batch it no longer
// bounds the frames it keeps; here --max-frames always bounds them. And one
// addition: a frame of ActivationDumper.watch() (class "watch", a tensor such
// as the loss, recorded after the root's frame) is reported in its own batch,
// "Detected inf/nan during batch_number=N" for an inf loss of batch N.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <optional>
#include <ostream>
#include <set>
#include <span>
#include <string>

#include "numerics/detector/frames.h"
#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics {

struct DetectorOptions {
  std::size_t max_frames = 21;
  std::set<std::uint64_t> trace_batches;
  std::optional<std::uint64_t> abort_after_batch;
};

/// Where the first nan/inf was seen.
struct Finding {
  std::uint64_t batch = 0;
  std::uint64_t frame = 0;
  std::string module;
  std::string class_name;
  std::string label;
  bool nan = false, inf = false;
  double time = std::numeric_limits<double>::quiet_NaN();  ///< the frame's, when the dump has it
};

enum class StopReason { end_of_dump, detected, aborted };

struct DetectorResult {
  StopReason stop = StopReason::end_of_dump;
  std::uint64_t batch_number = 0;  ///< the reference's counter when it stopped
  std::optional<Finding> first;    ///< set when any nan/inf was seen
  std::uint64_t batches_fed = 0;
  std::uint64_t frames_replayed = 0;
};

class Detector {
 public:
  Detector(DetectorOptions options, std::ostream& out) : opt_(std::move(options)), out_(out) {}

  /// Replays one batch; `stats` holds one entry per batch.tensors slot.
  /// Returns false once the replay has stopped (detection or abort); later
  /// batches are then ignored.
  bool feed(const Batch& batch, std::span<const TensorStats> stats);

  const DetectorResult& result() const { return result_; }

 private:
  std::string analyse(const Batch& batch, const Frame& frame, std::span<const TensorStats> stats);
  void save(std::string frame_text);
  void dump_saved_frames(std::uint64_t batch_number);

  DetectorOptions opt_;
  std::ostream& out_;
  std::deque<std::string> saved_;
  std::uint64_t live_batch_ = 0;  ///< the reference's batch_number
  bool detected_ = false;
  bool stopped_ = false;
  DetectorResult result_;
};

}  // namespace gpudiag::numerics
