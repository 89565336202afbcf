#include "numerics/scan_command.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstring>
#include <fstream>

#include "numerics/frames.h"
#include "numerics/insights.h"
#include "numerics/inputs.h"
#include "numerics/loose_report.h"
#include "numerics/scan_json.h"
#include "util/error.h"
#include "util/strings.h"

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

/// Frames dumps and loose tensors are different reports: refuse a mix.
bool frames_mode(const std::vector<InputFile>& inputs) {
  const InputFile* frames = nullptr;
  const InputFile* loose = nullptr;
  for (const auto& in : inputs) (in.kind == InputKind::frames ? frames : loose) = &in;
  if (frames && loose)
    throw UsageError(frames->path() + " is a " + std::string(kFramesFormat) + " dump but " +
                         loose->path() + " holds loose tensors",
                     "scan dumps and loose tensor files in separate runs");
  return frames != nullptr;
}

std::vector<TensorView> views_of(const std::vector<const TensorInfo*>& tensors) {
  std::vector<TensorView> views;
  views.reserve(tensors.size());
  for (const auto* t : tensors) views.push_back(view_of(*t));
  return views;
}

int scan_frames(const ScanOptions& o, const std::vector<InputFile>& inputs, Scanner& scanner,
                ScanJson& json, Insights& insights, std::ostream& out) {
  const std::vector<Batch> batches = assemble_batches(inputs);
  for (auto n : o.detector.trace_batches) {
    bool present = false;
    for (const auto& b : batches) present = present || b.number == n;
    if (!present) spdlog::warn("--trace-batches: batch {} is not in the dump", n);
  }
  Detector detector(o.detector, out);
  for (const auto& batch : batches) {
    if (o.detector.abort_after_batch && batch.number > *o.detector.abort_after_batch) {
      detector.feed(batch, {});  // stops without scanning
      break;
    }
    const auto views = views_of(batch.tensors);
    const auto stats = scanner.scan(views);
    json.add_batch(batch, stats);
    insights.add_batch(batch, stats);
    if (!detector.feed(batch, stats)) break;
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

int scan_loose(const std::vector<InputFile>& inputs, Scanner& scanner, ScanJson& json,
               Insights& insights, std::ostream& out) {
  bool found = false;
  print_loose_header(out);
  for (const auto& in : inputs) {
    const auto tensors = loose_tensors(in);
    std::vector<TensorView> views;
    for (const auto& t : tensors) views.push_back(view_of(*t.tensor));
    const auto stats = scanner.scan(views);
    found = print_loose_file(out, in.path(), tensors, stats) || found;
    for (std::size_t i = 0; i < tensors.size(); ++i)
      insights.add_loose(in.path() + " (" + tensors[i].label + ")", *tensors[i].tensor, stats[i]);
    json.add_loose_file(in.path(), tensors, stats);
  }
  out.flush();
  json.set_result(found, nullptr);
  return static_cast<int>(found ? ExitCode::broken : ExitCode::ok);
}

/// The one line a clean scan ends with, on stderr.
void print_summary(const Insights& in, bool frames, double seconds) {
  std::string line = "gpudiag scan: clean: ";
  if (frames)
    line += std::to_string(in.batches) + (in.batches == 1 ? " batch, " : " batches, ") +
            std::to_string(in.frames) + " frames, ";
  line += std::to_string(in.tensors) + (in.tensors == 1 ? " tensor, " : " tensors, ") +
          human_bytes(in.bytes) + " in " + human_seconds(seconds);
  if (seconds >= 0.01) {
    char rate[32];
    std::snprintf(rate, sizeof rate, " (%.2f GB/s)", static_cast<double>(in.bytes) / seconds / 1e9);
    line += rate;
  }
  std::fprintf(stderr, "%s, no inf or nan\n", line.c_str());
}

}  // namespace

int run_scan(const ScanOptions& o, std::ostream& out) {
  if (!o.json_path.empty() && !std::ofstream(o.json_path, std::ios::app))
    throw UsageError("--json " + o.json_path + ": cannot open for writing: " + std::strerror(errno),
                     "check that the directory exists and is writable");
  const auto files = expand_paths(o.paths);
  std::vector<InputFile> inputs;
  inputs.reserve(files.size());
  if (!open_all(files, o.npy_dtype, inputs)) return static_cast<int>(ExitCode::usage);
  const bool frames = frames_mode(inputs);
  if (!frames && (!o.detector.trace_batches.empty() || o.detector.abort_after_batch))
    spdlog::warn("--trace-batches and --abort-after-batch apply to frames dumps only");

  auto scanner = make_scanner(o.device, o.threads, o.gpu);
  spdlog::info("scan: {} file(s), scanner {}", files.size(), scanner->describe());
  ScanJson json(frames ? "frames" : "tensors", scanner->describe(), files, !o.json_path.empty());
  json.set_options(o.detector);
  Insights insights(o.near_limit);
  const auto t0 = std::chrono::steady_clock::now();
  const int code = frames ? scan_frames(o, inputs, *scanner, json, insights, out)
                          : scan_loose(inputs, *scanner, json, insights, out);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  insights.print(stderr);
  if (code == 0) print_summary(insights, frames, seconds);
  json.set_insights(insights.json());
  if (!o.json_path.empty()) json.write(o.json_path);
  return code;
}

}  // namespace gpudiag::numerics
