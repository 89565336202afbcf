// Insights beyond the reference report (see insights.h): a walk over each
// batch's frames in run order with the scanner's statistics, and a sampled
// look at integer tensors for float bit patterns.
#include "numerics/detector/insights.h"

#include "numerics/detector/format.h"

#include <algorithm>
#include <cmath>


namespace gpudiag::numerics {

namespace {

constexpr double kUnderflowShare = 0.01;  ///< report a frame from 1% subnormal elements
constexpr std::uint64_t kSamples = 4096;

std::uint64_t element_bits(const TensorView& v, std::uint64_t i, std::size_t size) {
  std::uint64_t bits = 0;
  for (std::size_t k = 0; k < size; ++k) {
    const std::size_t byte = v.order == ByteOrder::little ? k : size - 1 - k;
    bits |= std::uint64_t{v.data[i * size + byte]} << (8 * k);
  }
  return bits;
}

double limit_of(DType t) { return float_bits_to_double(t, float_format(t).max_finite); }

}  // namespace

std::string EntryPlace::describe() const {
  return "batch " + std::to_string(batch) + ", frame " + std::to_string(frame) + " (" +
         (module.empty() ? "the model" : module) + " " + class_name + ") " + label;
}

std::optional<DType> looks_like_float_bits(const TensorView& v) {
  const std::size_t size = dtype_size(v.dtype);
  if (is_float(v.dtype) || v.dtype == DType::BOOL || (size != 1 && size != 2) || v.count < 16)
    return std::nullopt;
  const std::uint64_t n = std::min(v.count, kSamples);
  std::uint64_t plausible = 0, negative = 0, nonzero = 0;
  for (std::uint64_t s = 0; s < n; ++s) {
    const std::uint64_t bits = element_bits(v, s * v.count / n, size);
    const std::uint64_t sign = size == 2 ? 0x8000 : 0x80;
    const std::uint64_t abs = bits & (sign - 1);
    negative += (bits & sign) != 0;
    nonzero += abs != 0;
    if (size == 2) {
      // bf16 values of activations and weights lie within 2^-40 .. 2^40: an
      // 8-bit exponent field near its bias of 127, which plain integers miss.
      const int exponent = static_cast<int>(abs >> 7);
      plausible += abs == 0 || (exponent >= 127 - 40 && exponent <= 127 + 40);
    } else {
      plausible += abs != 0x7F;  // every fp8 pattern is a number but NaN
    }
  }
  // Half of a float tensor's values are usually negative; integer data
  // (indices, counts, pixels) rarely have the top bit set in that share.
  const bool signs_mixed = negative * 5 >= n && negative * 5 <= 4 * n;
  if (nonzero * 10 < n || !signs_mixed || plausible * 100 < n * 97) return std::nullopt;
  return size == 2 ? DType::BF16 : DType::F8_E4M3;
}

void Insights::add_batch(const Batch& batch, std::span<const TensorStats> stats) {
  ++batches;
  frames += batch.frames.size();
  for (const auto* t : batch.tensors) bytes += t->data.size();
  tensors += batch.tensors.size();
  for (const Frame& f : batch.frames) {
    for (const Entry& e : f.entries) {
      if (e.kind != EntryKind::tensor || e.slot >= stats.size()) continue;
      const TensorInfo& t = *batch.tensors[e.slot];
      const TensorStats& s = stats[e.slot];
      auto place = [&] {
        return EntryPlace{batch.number, f.index, f.module, f.class_name, e.label};
      };
      if (!is_float(t.dtype)) {
        if (!hint_ && t.dtype != DType::I64 && t.dtype != DType::U64)
          if (auto like = looks_like_float_bits(view_of(t)))
            hint_ = DTypeHint{place().describe(), t.dtype, *like};
        continue;
      }
      if (s.empty()) continue;
      const double limit = limit_of(t.dtype);
      if (!near_ && std::isfinite(s.abs_max) && s.abs_max >= near_limit_ * limit)
        near_ = NearLimit{place(), t.dtype, s.abs_max, limit, {}};
      if (dtype_size(t.dtype) <= 2 && s.subnormal >= kUnderflowShare * static_cast<double>(s.count) &&
          (!underflow_ || s.subnormal * underflow_->count > underflow_->subnormal * s.count))
        underflow_ = Underflow{place(), t.dtype, s.subnormal, s.count};
    }
  }
}

void Insights::add_loose(const std::string& where, const TensorInfo& t, const TensorStats& s) {
  ++tensors;
  bytes += t.data.size();
  if (is_float(t.dtype) && !s.empty() && !near_) {  // headroom, as for a dump's frames
    const double limit = limit_of(t.dtype);
    if (std::isfinite(s.abs_max) && s.abs_max >= near_limit_ * limit)
      near_ = NearLimit{{}, t.dtype, s.abs_max, limit, where};
  }
  if (hint_ || (t.dtype != DType::I16 && t.dtype != DType::U16)) return;
  if (auto like = looks_like_float_bits(view_of(t))) hint_ = DTypeHint{where, t.dtype, *like};
}

void Insights::print(std::FILE* to) const {
  const std::string head = "gpudiag scan: " + (who_.empty() ? std::string() : who_ + ": ");
  const char* h = head.c_str();
  if (near_)
    std::fprintf(to,
                 "%sfirst %s near the %s limit (abs max >= %g of %s): %s, abs "
                 "max %s\n",
                 h, near_->where.empty() ? "frame" : "tensor",
                 std::string(dtype_name(near_->dtype)).c_str(), near_limit_,
                 format_e2(near_->limit).c_str(),
                 (near_->where.empty() ? near_->at.describe() : near_->where).c_str(),
                 format_e2(near_->abs_max).c_str());
  if (underflow_)
    std::fprintf(to,
                 "%smost underflow: %s, %.1f%% of its %llu %s elements subnormal "
                 "(precision lost near zero)\n",
                 h, underflow_->at.describe().c_str(),
                 100.0 * static_cast<double>(underflow_->subnormal) /
                     static_cast<double>(underflow_->count),
                 static_cast<unsigned long long>(underflow_->count),
                 std::string(dtype_name(underflow_->dtype)).c_str());
  if (hint_) {
    const bool fp8 = hint_->looks_like == DType::F8_E4M3;
    std::fprintf(to,
                 "%shint: %s holds %s values that look like %s bit patterns (saved "
                 "through an integer view?); read them as such with --dtype %s (.npy), or save "
                 "the tensor in its own dtype\n",
                 h, hint_->where.c_str(), std::string(dtype_name(hint_->stored)).c_str(),
                 fp8 ? "fp8" : "bf16", fp8 ? "f8_e4m3 (or f8_e5m2)" : "bf16");
  }
}

nlohmann::json Insights::json() const {
  auto place = [](const EntryPlace& p) {
    return nlohmann::json{{"batch", p.batch},
                          {"frame", p.frame},
                          {"module", p.module},
                          {"class", p.class_name},
                          {"label", p.label}};
  };
  nlohmann::json j = {{"near_limit_fraction", near_limit_}};
  j["near_limit"] = near_ ? nlohmann::json{{"at", near_->where.empty()
                                                       ? place(near_->at)
                                                       : nlohmann::json{{"where", near_->where}}},
                                           {"dtype", dtype_name(near_->dtype)},
                                           {"abs_max", near_->abs_max},
                                           {"limit", near_->limit}}
                          : nlohmann::json(nullptr);
  j["underflow"] = underflow_ ? nlohmann::json{{"at", place(underflow_->at)},
                                               {"dtype", dtype_name(underflow_->dtype)},
                                               {"subnormal", underflow_->subnormal},
                                               {"count", underflow_->count}}
                              : nlohmann::json(nullptr);
  j["dtype_hint"] = hint_ ? nlohmann::json{{"where", hint_->where},
                                           {"stored", dtype_name(hint_->stored)},
                                           {"looks_like", dtype_name(hint_->looks_like)}}
                          : nlohmann::json(nullptr);
  return j;
}

}  // namespace gpudiag::numerics
