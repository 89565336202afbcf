// Replays of one rank and of several (replay.h).
#include "numerics/detector/replay.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>

#include "util/strings.h"

namespace gpudiag::numerics {

namespace {

std::string of_rank(int rank) {
  return rank < 0 ? std::string() : "rank " + std::to_string(rank) + ": ";
}

/// In the oldest batch of the dump, the first nan/inf (in run order) is in
/// its first frame, or in a parameter (a weight already broken when the
/// batch began): whatever produced it ran before the first batch the dump kept.
void warn_if_cause_is_older(const Batch& b, const std::vector<TensorStats>& stats, int rank) {
  for (const Frame& f : b.frames)
    for (const Entry& e : f.entries) {
      if (e.kind != EntryKind::tensor || e.slot >= stats.size() ||
          !(stats[e.slot].has_nan() || stats[e.slot].has_inf()))
        continue;
      const bool parameter = !e.label.starts_with("input") && !e.label.starts_with("output") &&
                             f.class_name != kWatchClass;
      if (&f == &b.frames.front() || parameter)
        spdlog::warn(
            "{}the oldest batch of the dump (batch {}) starts with nan/inf ({} {} {}): the cause "
            "is "
            "earlier than this dump (keep_last deleted it, or the dump started late); dump from "
            "an earlier batch, or let the dumper stop at the first nan (stop_on_nan=True)",
            of_rank(rank), b.number, f.module.empty() ? "the model" : f.module, f.class_name,
            e.label);
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

}  // namespace

DetectorResult replay(const DetectorOptions& o, std::span<const Batch> batches,
                      const StatsOf& stats_of, ScanJson& json, Insights& insights,
                      std::ostream& out, int rank) {
  for (auto n : o.trace_batches) {
    bool present = false;
    for (const auto& b : batches) present = present || b.number == n;
    if (!present) spdlog::warn("{}--trace-batches: batch {} is not in the dump", of_rank(rank), n);
  }
  Detector detector(o, out);
  Progress progress(batches.size());
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const Batch& batch = batches[i];
    if (o.abort_after_batch && batch.number > *o.abort_after_batch) {
      detector.feed(batch, {});  // stops without scanning
      break;
    }
    const auto stats = stats_of(i);
    if (i == 0) warn_if_cause_is_older(batch, stats, rank);
    json.add_batch(batch, stats, rank);
    insights.add_batch(batch, stats);
    progress.clear();
    if (!detector.feed(batch, stats)) break;
    progress.done(i + 1, insights.bytes);
  }
  out.flush();
  const DetectorResult& r = detector.result();
  if (r.stop == StopReason::detected)
    spdlog::warn(
        "{}inf/nan detected: stopped at batch_number={} like the live detector; the frames above "
        "show the values leading up to it",
        of_rank(rank), r.batch_number);
  else if (r.stop == StopReason::aborted)
    spdlog::warn("{}aborting after {} batches due to --abort-after-batch={}", of_rank(rank),
                 r.batch_number, *o.abort_after_batch);
  else if (r.first)
    spdlog::warn(
        "{}inf/nan found in traced batch {} (module {} {}, {}); see the 'has nans'/'has infs' "
        "lines",
        of_rank(rank), r.first->batch, r.first->module, r.first->class_name, r.first->label);
  return r;
}

std::vector<RankOutcome> replay_ranks(const DetectorOptions& o, double near_limit,
                                      const std::vector<RankDump>& dumps, ScanJson& json,
                                      Insights& totals, std::ostream& out) {
  std::vector<RankOutcome> outcomes;
  std::vector<nlohmann::json> insights_json;
  for (const auto& d : dumps) {
    std::ostringstream report;
    Insights insights(near_limit, "rank " + std::to_string(d.rank));
    const DetectorResult r = replay(o, d.batches, d.stats_of, json, insights, report, d.rank);
    insights.print(stderr);
    insights_json.push_back(insights.json());
    totals.batches += insights.batches, totals.frames += insights.frames;
    totals.tensors += insights.tensors, totals.bytes += insights.bytes;
    outcomes.push_back({d.rank, r, d.batches.size(), report.str()});
  }
  print_rank_table(out, outcomes);
  for (const auto& r : outcomes) out << "\n--- rank " << r.rank << " ---\n" << r.report;
  out.flush();
  auto table = rank_table_json(outcomes);
  for (std::size_t i = 0; i < outcomes.size(); ++i)
    table["ranks"][i]["insights"] = insights_json[i];
  json.set_section("ranks", std::move(table));
  return outcomes;
}

}  // namespace gpudiag::numerics
