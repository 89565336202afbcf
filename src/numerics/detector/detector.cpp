#include "numerics/detector/detector.h"

#include "numerics/detector/format.h"

namespace gpudiag::numerics {

namespace {

std::string batch_start_lines(std::uint64_t number) {
  std::string s = "\n\n";
  s += kPrefix;
  s += " *** Starting batch number=" + std::to_string(number) + " ***\n";
  s += kColumnHeader;
  s += '\n';
  return s;
}

}  // namespace

bool Detector::feed(const Batch& batch, std::span<const TensorStats> stats) {
  if (stopped_) return false;
  if (opt_.abort_after_batch && batch.number > *opt_.abort_after_batch) {
    // The live run would have stopped at the end of batch N, which this dump
    // does not contain (or contains without its root frame).
    result_.stop = StopReason::aborted;
    result_.batch_number = *opt_.abort_after_batch + 1;
    stopped_ = true;
    return false;
  }
  ++result_.batches_fed;
  live_batch_ = batch.number;
  for (std::size_t i = 0; i < batch.frames.size(); ++i) {
    const Frame& frame = batch.frames[i];
    const bool trace = opt_.trace_batches.contains(live_batch_);
    if (trace) saved_.clear();
    if (frame.module.empty()) ++live_batch_;  // the root's forward ends the batch
    std::string text = i == 0 ? batch_start_lines(batch.number) : std::string();
    text += analyse(batch, frame, stats);
    ++result_.frames_replayed;
    save(std::move(text));
    if (trace) {
      for (std::size_t k = 0; k < saved_.size(); ++k) out_ << (k ? "\n" : "") << saved_[k];
      out_ << '\n';
      saved_.clear();
    }
    // A watched tensor (the loss) belongs to its batch, though it comes after the root's frame.
    const std::uint64_t now = frame.class_name == kWatchClass ? batch.number : live_batch_;
    if (detected_ && !trace) {
      dump_saved_frames(now);
      result_.stop = StopReason::detected;
    } else if (opt_.abort_after_batch && live_batch_ > *opt_.abort_after_batch) {
      result_.stop = StopReason::aborted;
    } else {
      continue;
    }
    result_.batch_number = result_.stop == StopReason::detected ? now : live_batch_;
    stopped_ = true;
    return false;
  }
  result_.batch_number = live_batch_;
  return true;
}

std::string Detector::analyse(const Batch& batch, const Frame& frame,
                              std::span<const TensorStats> stats) {
  std::string text;
  text += kPrefix;
  text += ' ' + frame.module + ' ' + frame.class_name;
  for (const Entry& e : frame.entries) {
    text += '\n';
    if (e.kind == EntryKind::none) {
      text += placeholder_line("None", e.label);
      continue;
    }
    if (e.kind == EntryKind::not_a_tensor) {
      text += placeholder_line("not a tensor", e.label);
      continue;
    }
    const TensorStats& s = stats[e.slot];
    text += stats_line(s, e.label);
    if (s.has_nan()) out_ << e.label << " has nans\n";
    if (s.has_inf()) out_ << e.label << " has infs\n";
    if (s.has_nan() || s.has_inf()) {
      detected_ = true;
      if (!result_.first)
        result_.first = Finding{batch.number, frame.index, frame.module, frame.class_name,
                                e.label,      s.has_nan(), s.has_inf(), frame.time};
    }
  }
  return text;
}

void Detector::save(std::string frame_text) {
  saved_.push_back(std::move(frame_text));
  while (saved_.size() > opt_.max_frames) saved_.pop_front();
}

void Detector::dump_saved_frames(std::uint64_t batch_number) {
  out_ << "\nDetected inf/nan during batch_number=" << batch_number << '\n';
  out_ << "Last " << saved_.size() << " forward frames:\n";
  out_ << kColumnHeader << '\n';
  for (std::size_t k = 0; k < saved_.size(); ++k) out_ << (k ? "\n" : "") << saved_[k];
  out_ << "\n\n\n\n";
  saved_.clear();
}

}  // namespace gpudiag::numerics
