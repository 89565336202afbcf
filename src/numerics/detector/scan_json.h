// The --json document of `gpudiag scan`: every statistic of every scanned
// entry, the options and the outcome. docs/scan.md documents the schema
// ("gpudiag-scan/1"); keep the two in step.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>

#include "numerics/detector/detector.h"
#include "numerics/detector/frames.h"
#include "numerics/detector/loose_report.h"

namespace gpudiag::numerics {

class ScanJson {
 public:
  /// `mode` is "frames" or "tensors"; `scanner` the backend's description.
  /// A disabled document ignores every call (no --json: build nothing).
  ScanJson(std::string mode, std::string scanner, const std::vector<std::string>& files,
           bool enabled = true);

  void set_options(const DetectorOptions& options);
  /// `rank` >= 0: the batch is that rank's (dumps of several ranks), said in its object.
  void add_batch(const Batch& batch, std::span<const TensorStats> stats, int rank = -1);
  void add_loose_file(const std::string& path, std::span<const LooseTensor> tensors,
                      std::span<const TensorStats> stats);
  /// `result` is null in tensors mode; `found` says whether any nan/inf was seen.
  void set_result(bool found, const DetectorResult* result);
  /// What the reference report cannot tell (insights.h), under "insights".
  void set_insights(nlohmann::json insights);
  /// Any other top-level section: "ranks" (rank_scan.h), "replicas" (replica_verdict.h).
  void set_section(const std::string& key, nlohmann::ordered_json value);

  /// Writes the document to `path`, or to stdout when it is "-"; throws
  /// UsageError when the file cannot be written.
  void write(const std::string& path) const;

  const nlohmann::ordered_json& document() const { return doc_; }

 private:
  bool enabled_;
  nlohmann::ordered_json doc_;
};

/// One tensor's statistics as a JSON object (abs_min/abs_max: a number, or
/// "nan", "inf", "-inf"; null for an empty tensor).
nlohmann::ordered_json stats_json(const TensorStats& s);

}  // namespace gpudiag::numerics
