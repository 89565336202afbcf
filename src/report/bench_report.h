// gpudiag bench's output in nccl-tests' layout, so the scripts that read
// all_reduce_perf's output read gpudiag's unchanged: a `#` preamble (the
// parameters line, "# Using devices" with one line per rank), the two
// header lines, one 13-field row per size printed as soon as it is
// measured, "# Out of bounds values" and "# Avg bus bandwidth". What
// nccl-tests cannot say goes on `#` lines only, never inside the columns:
// after a row with wrong elements, which ranks saw them and the first one;
// after the table, the slowest rank of each row with its p50/p99. The same
// results as JSON (gpudiag-bench/2, docs/json.md).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/engine.h"
#include "checks/record.h"

namespace gpudiag {

struct BenchHeader {
  std::string program;  ///< nccl-tests' binary name: "all_reduce_perf"
  std::uint64_t min_bytes = 0, max_bytes = 0;
  double step_factor = 0;        ///< > 1: sizes multiply by it
  std::uint64_t step_bytes = 0;  ///< otherwise sizes grow by this
  int warmup = 0, iters = 0, check = 1, average = 1;
  bool blocking = false;
  int blocking_mode = 0;  ///< nccl-tests' -z value (0-3), for its "Blocking Enabled" line
  std::string backend, versions;  ///< "nccl", "gpudiag 0.5 | CUDA ... | NCCL 2.28.9"
  int nccl_code = 0;  ///< the NCCL loaded, as ncclGetVersion gives it (22809); 0: none
  // nccl-tests' parameters line, as given: nThread, nGpus, agg iters, graph, unalign.
  int nthreads = 1, ngpus = 1, agg = 1, graph = 0, unalign = 0;
  /// One line each: a flag nccl-tests accepts that gpudiag runs differently
  /// ("-G 10: CUDA graphs are not used; each iteration is a plain call").
  std::vector<std::string> notes;
};

/// nccl-tests' version whose layout and JSON gpudiag bench follows.
inline constexpr const char* kNcclTestsVersion = "2.19.6";

class NcclTestsJson;  // report/nccl_tests_json.h

class NcclTestsPrinter : public BenchSink {
 public:
  /// Writes to `fd` (stdout, or stderr when the JSON takes stdout).
  NcclTestsPrinter(int fd, BenchHeader header) : fd_(fd), h_(std::move(header)) {}
  /// The preamble and header lines; `table` is every rank's exchange record.
  void begin(const std::vector<std::optional<RankRecord>>& table);
  void row(const BenchRow& row) override;
  /// The footer and gpudiag's own lines; call once after the last row.
  void end();
  /// Elements found wrong in every row, out of place and in place.
  std::int64_t wrong() const { return wrong_; }
  double avg_busbw() const { return bw_count_ ? bw_sum_ / bw_count_ : 0; }
  /// The busbw of the largest size's out-of-place row (for an expectation).
  double largest_busbw() const { return largest_busbw_; }
  double largest_bytes() const { return static_cast<double>(largest_size_); }
  nlohmann::json json() const;
  /// Rows and devices also go to `nt` (-J's nccl-tests document), if set.
  void attach(NcclTestsJson* nt) { nt_ = nt; }

 private:
  NcclTestsJson* nt_ = nullptr;
  void out(const std::string& s) const;
  std::string label(int rank) const;

  int fd_;
  BenchHeader h_;
  std::vector<std::optional<RankRecord>> table_;
  std::vector<BenchRow> rows_;  ///< without per-rank detail beyond what the JSON keeps
  nlohmann::json json_rows_ = nlohmann::json::array();
  std::vector<std::string> slow_lines_;
  std::int64_t wrong_ = 0;
  double bw_sum_ = 0;
  int bw_count_ = 0;
  double largest_busbw_ = 0;
  std::uint64_t largest_size_ = 0;
};

/// nccl-tests' number cell: %.2f, else %.1f, else %.0f, else exponent, in `width`.
std::string nt_number(double value, int width);

}  // namespace gpudiag
