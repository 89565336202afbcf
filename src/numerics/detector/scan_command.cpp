#include "numerics/detector/scan_command.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <chrono>
#include <functional>
#include <cstring>
#include <fstream>

#include "numerics/detector/frames.h"
#include "numerics/detector/insights.h"
#include "numerics/formats/inputs.h"
#include "numerics/detector/loose_report.h"
#include "numerics/detector/scan_json.h"
#include "numerics/formats/stats_dump.h"
#include "util/error.h"
#include "util/strings.h"
#include "util/text.h"

namespace gpudiag::numerics {

namespace {


/// Opens every file; prints one line per malformed file. Returns false when any was.
bool open_all(const std::vector<std::string>& files, std::optional<DType> npy_dtype,
              std::vector<InputFile>& inputs) {
  bool ok = true;
  for (const auto& path : files) {
    try {
      inputs.push_back(open_input(path, npy_dtype));
    } catch (const Error& e) {
      std::fprintf(stderr, "gpudiag: %s\n", e.one_line().c_str());
      ok = false;
    }
  }
  return ok;
}

/// Opens each file in turn (one mapping at a time), naming every malformed
/// one on stderr (then nullopt), and says whether they are a frames dump;
/// frames dumps and loose tensors are different reports: a mix is refused.
std::optional<bool> check_all(const std::vector<std::string>& files,
                              std::optional<DType> npy_dtype) {
  std::string frames, loose;
  bool ok = true;
  for (const auto& path : files) {
    try {
      (inspect_input(path, npy_dtype) == InputKind::frames ? frames : loose) = path;
    } catch (const Error& e) {
      std::fprintf(stderr, "gpudiag: %s\n", clean_text(e.one_line()).c_str());
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  if (!frames.empty() && !loose.empty())
    throw UsageError(frames + " is a " + std::string(kFramesFormat) + " dump but " + loose +
                         " holds loose tensors",
                     "scan dumps and loose tensor files in separate runs");
  return !frames.empty();
}

std::vector<TensorView> views_of(const std::vector<const TensorInfo*>& tensors) {
  std::vector<TensorView> views;
  views.reserve(tensors.size());
  for (const auto* t : tensors) views.push_back(view_of(*t));
  return views;
}

/// In the oldest batch of the dump, the first nan/inf (in run order) is in
/// its first frame, or in a parameter (a weight already broken when the
/// batch began): whatever produced it ran before the first batch the dump kept.
void warn_if_cause_is_older(const Batch& b, const std::vector<TensorStats>& stats) {
  for (const Frame& f : b.frames)
    for (const Entry& e : f.entries) {
      if (e.kind != EntryKind::tensor || e.slot >= stats.size() ||
          !(stats[e.slot].has_nan() || stats[e.slot].has_inf()))
        continue;
      const bool parameter = !e.label.starts_with("input") && !e.label.starts_with("output");
      if (&f == &b.frames.front() || parameter)
        spdlog::warn(
            "the oldest batch of the dump (batch {}) starts with nan/inf ({} {} {}): the cause is "
            "earlier than this dump (keep_last deleted it, or the dump started late); dump from "
            "an earlier batch, or let the dumper stop at the first nan (stop_on_nan=True)",
            b.number, f.module.empty() ? "the model" : f.module, f.class_name, e.label);
      return;
    }
}

/// Progress on stderr for a scan that takes more than two seconds, only when
/// stderr is a terminal: one line rewritten in place, erased at the end.
class Progress {
 public:
  explicit Progress(std::size_t total)
      : total_(total), tty_(::isatty(STDERR_FILENO) == 1), t0_(std::chrono::steady_clock::now()) {}
  ~Progress() { clear(); }
  /// Erases the line, so the report (stdout, maybe the same terminal) is not mixed with it.
  void clear() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }
  void done(std::size_t batches, std::uint64_t bytes) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    if (!tty_ || s < 2.0) return;
    shown_ = true;
    std::fprintf(stderr, "\rgpudiag scan: batch %zu of %zu, %s in %.0f s", batches, total_,
                 human_bytes(bytes).c_str(), s);
  }

 private:
  std::size_t total_;
  bool tty_, shown_ = false;
  std::chrono::steady_clock::time_point t0_;
};

/// The statistics of batch i of a replay, scanned or read.
using StatsOf = std::function<std::vector<TensorStats>(std::size_t)>;

/// Replays batches through the reference detector (frames dumps, tensors or stats).
int replay(const ScanOptions& o, const std::vector<Batch>& batches, const StatsOf& stats_of,
           ScanJson& json, Insights& insights, std::ostream& out) {
  for (auto n : o.detector.trace_batches) {
    bool present = false;
    for (const auto& b : batches) present = present || b.number == n;
    if (!present) spdlog::warn("--trace-batches: batch {} is not in the dump", n);
  }
  Detector detector(o.detector, out);
  Progress progress(batches.size());
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const Batch& batch = batches[i];
    if (o.detector.abort_after_batch && batch.number > *o.detector.abort_after_batch) {
      detector.feed(batch, {});  // stops without scanning
      break;
    }
    const auto stats = stats_of(i);
    if (i == 0) warn_if_cause_is_older(batch, stats);
    json.add_batch(batch, stats);
    insights.add_batch(batch, stats);
    progress.clear();
    if (!detector.feed(batch, stats)) break;
    progress.done(i + 1, insights.bytes);
  }
  out.flush();
  const DetectorResult& r = detector.result();
  json.set_result(r.first.has_value(), &r);
  if (r.stop == StopReason::detected)
    spdlog::warn(
        "inf/nan detected: stopped at batch_number={} like the live detector; the frames above "
        "show the values leading up to it",
        r.batch_number);
  else if (r.stop == StopReason::aborted)
    spdlog::warn("aborting after {} batches due to --abort-after-batch={}", r.batch_number,
                 *o.detector.abort_after_batch);
  else if (r.first)
    spdlog::warn(
        "inf/nan found in traced batch {} (module {} {}, {}); see the 'has nans'/'has infs' lines",
        r.first->batch, r.first->module, r.first->class_name, r.first->label);
  return static_cast<int>(r.first ? ExitCode::broken : ExitCode::ok);
}

int scan_frames(const ScanOptions& o, const std::vector<Batch>& batches, Scanner& scanner,
                ScanJson& json, Insights& insights, std::ostream& out) {
  return replay(
      o, batches, [&](std::size_t i) { return scanner.scan(views_of(batches[i].tensors)); }, json,
      insights, out);
}

/// Loose tensor files, one at a time: each is mapped while it is scanned and
/// unmapped after, so a folder of any number of files holds one mapping (the
/// kernel's vm.max_map_count, 65530 by default, ran out at ~65k files).
int scan_loose(const std::vector<std::string>& files, const ScanOptions& o, Scanner& scanner,
               ScanJson& json, Insights& insights, std::ostream& out) {
  bool found = false;
  bool header = false;  // printed with the first file's rows: a failure before leaves stdout empty
  for (const auto& path : files) {
    const InputFile in = open_input(path, o.npy_dtype);
    const auto tensors = loose_tensors(in);
    std::vector<TensorView> views;
    for (const auto& t : tensors) views.push_back(view_of(*t.tensor));
    const auto stats = scanner.scan(views);
    if (!header) print_loose_header(out);
    header = true;
    found = print_loose_file(out, in.path(), tensors, stats) || found;
    for (std::size_t i = 0; i < tensors.size(); ++i)
      insights.add_loose(in.path() + " (" + tensors[i].label + ")", *tensors[i].tensor, stats[i]);
    json.add_loose_file(in.path(), tensors, stats);
  }
  out.flush();
  json.set_result(found, nullptr);
  return static_cast<int>(found ? ExitCode::broken : ExitCode::ok);
}

void print_summary(const Insights& in, bool frames, double seconds);

/// After a scan: the insights and summary on stderr, the JSON file.
void finish(const ScanOptions& o, ScanJson& json, const Insights& insights, int code, bool frames,
            std::chrono::steady_clock::time_point t0) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  insights.print(stderr);
  if (code == 0) print_summary(insights, frames, seconds);
  json.set_insights(insights.json());
  if (!o.json_path.empty()) json.write(o.json_path);
}

/// The one line a clean scan ends with, on stderr.
void print_summary(const Insights& in, bool frames, double seconds) {
  std::string line = "gpudiag scan: clean: ";
  if (frames)
    line += std::to_string(in.batches) + (in.batches == 1 ? " batch, " : " batches, ") +
            std::to_string(in.frames) + " frames, ";
  line += std::to_string(in.tensors) + (in.tensors == 1 ? " tensor" : " tensors");
  if (in.bytes == 0 && in.tensors > 0) {  // a stats dump: nothing was scanned here
    std::fprintf(stderr, "%s (statistics from the dump), no inf or nan\n", line.c_str());
    return;
  }
  line += ", " + human_bytes(in.bytes) + " in " + human_seconds(seconds);
  if (seconds >= 0.01) {
    char rate[32];
    std::snprintf(rate, sizeof rate, " (%.2f GB/s)", static_cast<double>(in.bytes) / seconds / 1e9);
    line += rate;
  }
  std::fprintf(stderr, "%s, no inf or nan\n", line.c_str());
}

/// A `gpudiag-frames-stats/1` dump: the statistics are read, not scanned.
int scan_stats(const ScanOptions& o, const std::vector<std::string>& files, std::ostream& out) {
  for (const auto& f : files)
    if (!is_stats_path(f))
      throw UsageError(f + " is a tensor file among statistics files (*.stats.json)",
                       "scan a stats dump and a tensor dump in separate runs");
  const StatsDump dump = read_stats_dump(files, o.rank);
  spdlog::info("scan: {} stats file(s), nothing to scan", files.size());
  ScanJson json("frames", "none (statistics read from a stats dump)", files, !o.json_path.empty());
  json.set_options(o.detector);
  Insights insights(o.near_limit);
  const auto t0 = std::chrono::steady_clock::now();
  const int code = replay(
      o, dump.batches, [&](std::size_t i) { return dump.stats[i]; }, json, insights, out);
  finish(o, json, insights, code, true, t0);
  return code;
}

}  // namespace

int run_scan(const ScanOptions& o, std::ostream& out) {
  if (!o.json_path.empty() && o.json_path != "-" && !std::ofstream(o.json_path, std::ios::app))
    throw UsageError("--json " + o.json_path + ": cannot open for writing: " + std::strerror(errno),
                     "check that the directory exists and is writable");
  const auto files = expand_paths(o.paths);
  if (std::any_of(files.begin(), files.end(), is_stats_path)) return scan_stats(o, files, out);
  if (o.rank >= 0) spdlog::warn("--rank {} applies to stats dumps only", o.rank);
  // Every file is checked first (each malformed one named), one mapping at a
  // time; a frames dump is then kept open whole (its batches span its files),
  // loose files are opened again one by one as they are scanned.
  std::vector<InputFile> inputs;
  const auto kind = check_all(files, o.npy_dtype);
  if (!kind) return static_cast<int>(ExitCode::usage);
  const bool frames = *kind;
  if (frames && !open_all(files, o.npy_dtype, inputs)) return static_cast<int>(ExitCode::usage);
  if (!frames && (!o.detector.trace_batches.empty() || o.detector.abort_after_batch))
    spdlog::warn("--trace-batches and --abort-after-batch apply to frames dumps only");

  std::vector<Batch> batches;
  if (frames) batches = assemble_batches(inputs);
  // --device auto times both scanners on the first 256 MiB about to be scanned.
  std::vector<TensorView> sample;
  std::unique_ptr<Scanner> scanner_for_auto;  // made while the sample's file is open
  if (o.device == ScanDevice::automatic) {
    std::vector<TensorView> first;
    if (frames && !batches.empty()) first = views_of(batches.front().tensors);
    std::optional<InputFile> first_loose;
    if (!frames && !files.empty()) {
      first_loose.emplace(open_input(files.front(), o.npy_dtype));
      for (const auto& t : loose_tensors(*first_loose)) first.push_back(view_of(*t.tensor));
    }
    sample = sample_of(first, kAutoSampleBytes);
    scanner_for_auto = make_scanner(o.device, o.threads, o.gpu, sample);
  }
  auto scanner = scanner_for_auto ? std::move(scanner_for_auto)
                                  : make_scanner(o.device, o.threads, o.gpu, sample);
  spdlog::info("scan: {} file(s), scanner {}", files.size(), scanner->describe());
  ScanJson json(frames ? "frames" : "tensors", scanner->describe(), files, !o.json_path.empty());
  json.set_options(o.detector);
  Insights insights(o.near_limit);
  const auto t0 = std::chrono::steady_clock::now();
  const int code = frames ? scan_frames(o, batches, *scanner, json, insights, out)
                          : scan_loose(files, o, *scanner, json, insights, out);
  finish(o, json, insights, code, frames, t0);
  return code;
}

}  // namespace gpudiag::numerics
