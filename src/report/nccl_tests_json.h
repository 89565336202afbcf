// `gpudiag bench -J FILE`: nccl-tests' own JSON (2.19, JSON_FILE_VERSION 3,
// src/util.cu there), key for key, so its consumers and its analyser
// (tools/analyze_perf_json.py) read gpudiag's file unchanged:
//
//   version, start_time, args, env, nccl_version,
//   config {nthreads, ngpus, minimum_bytes, maximum_bytes, step_factor |
//           step_bytes, warmup_iters, iterations, aggregated_iterations,
//           validation, graph, blocking_collectives, per_iter_timing,
//           per_iter_skip, parallel_init,
//           devices [{rank, group, pid, hostname, device, device_hex, device_info}]},
//   results [{size, count, type, redop, root, out_of_place {time, alg_bw,
//             bus_bw, nwrong}, out_of_place_per_iter {...} (with -I),
//             in_place {...}, in_place_per_iter {...}, actual_iterations,
//             experiment_name}],
//   out_of_bounds {count, okay}, average_bus_bandwidth {bandwidth, okay},
//   errors [], end_time
//
// with nccl-tests' types as its writer makes them (booleans as the strings
// "true"/"false", root as the printed "%6i" text, nan as the string "nan").
// What gpudiag adds (slowest rank per size, the expected-bandwidth verdict,
// the fingerprint: its own bench document, docs/json.md) is under one more
// key, "gpudiag". Environment variables that hold secrets are shown as
// "NAME=(set, N bytes, not shown)" (util/secret.h). The file is never
// overwritten: as nccl-tests does, FILE exists -> FILE.0, FILE.1, ...
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/engine.h"
#include "checks/record.h"
#include "report/bench_report.h"

namespace gpudiag {

class NcclTestsJson {
 public:
  NcclTestsJson(const BenchHeader& header, bool per_iter, int per_iter_skip);
  /// Rank 0's records, for the devices list.
  void set_devices(const std::vector<std::optional<RankRecord>>& table);
  void add_row(const BenchRow& row);
  /// The whole document; `gpudiag` is gpudiag's own bench document, `args`
  /// the command line.
  nlohmann::ordered_json document(std::int64_t wrong, double avg_busbw,
                                  const nlohmann::json& gpudiag,
                                  const std::vector<std::string>& args) const;

 private:
  BenchHeader h_;
  bool per_iter_;
  int skip_;
  std::string start_time_;
  nlohmann::ordered_json devices_ = nlohmann::ordered_json::array();
  nlohmann::ordered_json results_ = nlohmann::ordered_json::array();
};

/// nccl-tests' per-iteration block of one half: `times[rank][iteration]`
/// (microseconds); times_us is the max over ranks per iteration, the
/// statistics skip the first `skip` iterations, per_process_max_times_us
/// only with more than one rank (src/util.cu writePerIterReport).
nlohmann::ordered_json per_iter_json(const std::vector<std::vector<float>>& times, int skip);

/// Writes `text` to `path`, or, when it exists, to the first of path.0,
/// path.1, ... that does not (nccl-tests' "wx" probing); returns the path
/// written, or nullopt with `error` set.
std::optional<std::string> write_new_file(const std::string& path, const std::string& text,
                                          std::string& error);

}  // namespace gpudiag
