// What the reference detector's report cannot tell, gathered while a frames
// dump is scanned and printed on stderr after the report (which stays the
// reference's, byte for byte) and in the JSON:
//   - headroom: the first frame (in run order) whose largest finite |x|
//     reaches a fraction (--near-limit, 0.5 by default) of its dtype's
//     largest finite value (fp16 65504, bf16 3.39e38, fp8 e4m3 448, e5m2
//     57344): where the values approached the limit, before they passed it;
//   - underflow: the frame of a 16- or 8-bit float dtype with the largest
//     share of subnormal elements (precision lost near zero), when at least
//     1% of its elements are subnormal;
//   - a dtype hint: an integer tensor whose values look like float bit
//     patterns (bf16 saved through an int16 view, fp8 through uint8), with
//     the --dtype to read it as such;
//   - the totals for the summary line of a clean scan.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "numerics/detector/frames.h"
#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics {

/// Where an entry is: batch, frame, module, class and the entry's label.
struct EntryPlace {
  std::uint64_t batch = 0;
  std::uint64_t frame = 0;
  std::string module, class_name, label;
  /// "batch 3, frame 17 (encoder.block.2 T5Block) output"
  std::string describe() const;
};

struct NearLimit {
  EntryPlace at;
  DType dtype = DType::F16;
  double abs_max = 0, limit = 0;
  std::string where;  ///< loose tensors: the file and tensor name (then `at` is unset)
};

struct Underflow {
  EntryPlace at;
  DType dtype = DType::F16;
  std::uint64_t subnormal = 0, count = 0;
};

struct DTypeHint {
  std::string where;  ///< the entry's place, or the file and tensor name
  DType stored = DType::I16, looks_like = DType::BF16;
};

/// True, with the float dtype they look like, when the integer elements of
/// `v` look like float bit patterns: 16-bit ones as bf16 or fp16, 8-bit ones
/// as fp8 (only asked of frames dumps, where an integer activation is odd).
std::optional<DType> looks_like_float_bits(const TensorView& v);

class Insights {
 public:
  explicit Insights(double near_limit = 0.5, std::string who = {})
      : near_limit_(near_limit), who_(std::move(who)) {}

  /// One scanned batch; `stats` holds one entry per batch.tensors slot.
  void add_batch(const Batch& batch, std::span<const TensorStats> stats);
  /// A loose tensor (not in a frames dump): only the dtype hint and totals.
  void add_loose(const std::string& where, const TensorInfo& tensor, const TensorStats& stats);

  /// The lines for stderr ("gpudiag scan: ...", "gpudiag scan: rank 2: ..." for a
  /// `who` of "rank 2"), nothing when there is nothing to say.
  void print(std::FILE* to) const;
  nlohmann::json json() const;

  std::uint64_t batches = 0, frames = 0, tensors = 0, bytes = 0;

 private:
  double near_limit_;
  std::string who_;
  std::optional<NearLimit> near_;
  std::optional<Underflow> underflow_;
  std::optional<DTypeHint> hint_;
};

}  // namespace gpudiag::numerics
