// gpudiag scan as a library call (scan_command.h): replica checksum files
// first (their verdict line), then the dumps: one rank's report, or every
// rank's after the line naming the first to go inf/nan (replay.h), or loose
// tensors; the insights, the summary line and the JSON at the end.
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
#include "numerics/detector/rank_scan.h"
#include "numerics/detector/replay.h"
#include "numerics/detector/replica_verdict.h"
#include "numerics/detector/scan_json.h"
#include "numerics/formats/replica_sums.h"
#include "numerics/formats/stats_dump.h"
#include "util/error.h"
#include "util/file_out.h"
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

/// The ranks among frames inputs (InputFile::rank, -1 for none), sorted.
std::vector<int> ranks_of(const std::vector<InputFile>& inputs) {
  std::vector<int> ranks;
  for (const auto& in : inputs)
    if (in.kind == InputKind::frames && std::find(ranks.begin(), ranks.end(), in.rank) == ranks.end())
      ranks.push_back(in.rank);
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

/// One rank's replay as the scan's result: exit status 1 when inf/nan was seen.
int single(const DetectorResult& r, ScanJson& json) {
  json.set_result(r.first.has_value(), &r);
  return static_cast<int>(r.first ? ExitCode::broken : ExitCode::ok);
}

/// The dumps of several ranks: the first inf/nan line, the table, each rank's report.
int several(const ScanOptions& o, const std::vector<RankDump>& dumps, ScanJson& json,
            Insights& insights, std::ostream& out) {
  const auto outcomes = replay_ranks(o.detector, o.near_limit, dumps, json, insights, out);
  const bool found = first_bad(outcomes).has_value();
  json.set_result(found, nullptr);
  return static_cast<int>(found ? ExitCode::broken : ExitCode::ok);
}

/// A tensors dump: one rank's (--rank, or a dump of one rank), or every rank's.
int scan_frames(const ScanOptions& o, const std::vector<InputFile>& inputs, Scanner& scanner,
                ScanJson& json, Insights& insights, std::ostream& out) {
  const auto ranks = ranks_of(inputs);
  auto scan_of = [&](const std::vector<Batch>& batches) -> StatsOf {
    return [&](std::size_t i) { return scanner.scan(views_of(batches[i].tensors)); };
  };
  if (o.rank >= 0 || ranks.size() <= 1) {
    if (o.rank >= 0 && std::find(ranks.begin(), ranks.end(), o.rank) == ranks.end())
      throw UsageError("--rank " + std::to_string(o.rank) + ": no dump file of that rank among those given",
                       "check --rank against the \"rank\" metadata of the files");
    const auto batches = assemble_batches(inputs, o.rank >= 0 ? o.rank : kAnyRank);
    return single(replay(o.detector, batches, scan_of(batches), json, insights, out), json);
  }
  std::vector<std::vector<Batch>> per_rank;
  for (int r : ranks) per_rank.push_back(assemble_batches(inputs, r));
  std::vector<RankDump> dumps;
  for (std::size_t k = 0; k < ranks.size(); ++k)
    dumps.push_back({ranks[k], per_rank[k], scan_of(per_rank[k])});
  return several(o, dumps, json, insights, out);
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

/// The replica comparison's JSON, when replica files were given.
using Replicas = std::optional<nlohmann::ordered_json>;

/// After a scan: the insights and summary on stderr, the JSON file (with the
/// replica comparison's section, when replica files were given too).
void finish(const ScanOptions& o, ScanJson& json, const Insights& insights, int code, bool frames,
            std::chrono::steady_clock::time_point t0, const Replicas& replicas) {
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  insights.print(stderr);
  if (code == 0) print_summary(insights, frames, seconds);
  json.set_insights(insights.json());
  if (replicas) json.set_section("replicas", *replicas);
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

/// A `gpudiag-frames-stats/1` dump: the statistics are read, not scanned;
/// one rank's (--rank, or a dump of one rank), or every rank's.
int scan_stats(const ScanOptions& o, const std::vector<std::string>& files, std::ostream& out,
               const Replicas& replicas) {
  for (const auto& f : files)
    if (!is_stats_path(f))
      throw UsageError(f + " is a tensor file among statistics files (*.stats.json)",
                       "scan a stats dump and a tensor dump in separate runs");
  const StatsDump dump = read_stats_dump(files, o.rank, true);
  spdlog::info("scan: {} stats file(s), nothing to scan", files.size());
  ScanJson json("frames", "none (statistics read from a stats dump)", files, !o.json_path.empty());
  json.set_options(o.detector);
  Insights insights(o.near_limit);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<RankDump> dumps;  // contiguous runs of batches of one rank
  for (std::size_t i = 0; i < dump.batches.size();) {
    std::size_t j = i;
    while (j < dump.batches.size() && dump.batch_rank[j] == dump.batch_rank[i]) ++j;
    const std::span<const Batch> batches(dump.batches.data() + i, j - i);
    dumps.push_back({dump.batch_rank[i], batches, [&dump, i](std::size_t k) { return dump.stats[i + k]; }});
    i = j;
  }
  const int code = dumps.size() == 1
                       ? single(replay(o.detector, dumps[0].batches, dumps[0].stats_of, json, insights, out), json)
                       : several(o, dumps, json, insights, out);
  finish(o, json, insights, code, true, t0, replicas);
  return code;
}

/// Replica checksum files (replica_verdict.h): the verdict line on `out`.
int scan_replicas(const std::vector<std::string>& files, std::ostream& out, Replicas& json) {
  nlohmann::ordered_json j;
  const bool diverged = check_replica_files(files, out, &j);
  out.flush();
  json = std::move(j);
  return static_cast<int>(diverged ? ExitCode::broken : ExitCode::ok);
}

/// Frames dumps, stats dumps or loose tensors (not replica files).
int scan_dumps(const ScanOptions& o, const std::vector<std::string>& files, std::ostream& out,
               const Replicas& replicas) {
  if (std::any_of(files.begin(), files.end(), is_stats_path)) return scan_stats(o, files, out, replicas);
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

  // --device auto times both scanners on the first 256 MiB about to be scanned.
  std::vector<TensorView> sample;
  std::unique_ptr<Scanner> scanner_for_auto;  // made while the sample's file is open
  if (o.device == ScanDevice::automatic) {
    std::vector<TensorView> first;
    if (frames) {
      const auto ranks = ranks_of(inputs);
      const auto batches = assemble_batches(inputs, o.rank >= 0 ? o.rank : ranks.front());
      if (!batches.empty()) first = views_of(batches.front().tensors);
    }
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
  if (!frames && o.rank >= 0) spdlog::warn("--rank {} applies to dumps only", o.rank);
  const int code = frames ? scan_frames(o, inputs, *scanner, json, insights, out)
                          : scan_loose(files, o, *scanner, json, insights, out);
  finish(o, json, insights, code, frames, t0, replicas);
  return code;
}

}  // namespace

int run_scan(const ScanOptions& o, std::ostream& out) {
  // Refused before the scan as the writer would refuse it (a link, a folder,
  // another user's hard link); nothing is created or opened here.
  if (!o.json_path.empty() && o.json_path != "-")
    check_file_target("--json", o.json_path, WriteMode::through);
  auto files = expand_paths(o.paths);
  // Replica checksum files first: their line goes before any dump's report.
  std::vector<std::string> replica_files;
  std::erase_if(files, [&](const std::string& f) {
    return is_replica_path(f) ? (replica_files.push_back(f), true) : false;
  });
  Replicas replicas;
  const int replica_code = replica_files.empty() ? 0 : scan_replicas(replica_files, out, replicas);
  if (files.empty()) {
    if (!o.json_path.empty()) {
      ScanJson json("replicas", "none (checksums read from replica files)", replica_files);
      json.set_section("result", {{"replicas_diverged", replica_code != 0}});
      json.set_section("replicas", *replicas);
      json.write(o.json_path);
    }
    return replica_code;
  }
  return std::max(replica_code, scan_dumps(o, files, out, replicas));
}

}  // namespace gpudiag::numerics
