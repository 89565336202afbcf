// gpudiag bench's options, as parsed (bench.cpp runs them; bench_options.cpp
// declares them: nccl-tests' flags with their names and meanings, and
// gpudiag's own).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checks/check.h"

namespace gpudiag::cli {

struct BenchCli {
  /// The check's phases bench runs before its measurement; not the compute
  /// phase (check's known-answer GEMMs): bench measures the network.
  CheckOptions check = [] {
    CheckOptions c;
    c.compute = false;
    return c;
  }();
  std::uint64_t min_bytes = 1ull << 20, max_bytes = 256ull << 20;
  std::string json_path;
  std::string prometheus;  ///< --prometheus PATH (report/prom_reports.h)
  bool links = false;
  std::uint64_t link_bytes = 32ull << 20;
  double step_factor = 0;         ///< -f: sizes multiply by this (0: not given)
  std::uint64_t step_bytes = 0;   ///< -i: sizes grow by this when -f is not given
  std::string op = "all_reduce";  ///< the positional OP
  std::string dtype = "float", redop = "sum";
  int root = 0, datacheck = 1, blocking = 0, average = 1;
  std::string output_file;             ///< -J
  std::optional<double> expect_busbw;  ///< GB/s; else the table (report/expected_bw.h)
  // Which flags the command line gave, filled in after parsing.
  bool max_given = false, link_size_given = false;
  std::vector<std::string> sweep_only_given;  ///< sweep flags, which --links rejects
  std::vector<std::string> links_only_given;  ///< link-test flags, which the sweep rejects
  // nccl-tests' other flags (src/common.cu there), as given.
  int nthreads = 1, ngpus = 1, agg = 1, parallel_init = 0, stream_null = 0, graph = 0;
  int cputime = 0, timestamps = 0, local_register = 0, cta_policy = -1, device_impl = 0;
  int device_ctas = 16, memory = 0, unalign = 0, per_iter = 0, per_iter_skip = 0;
  std::int64_t cycles = 1;
};

/// Declares every option of `gpudiag bench` on `sub`, into `o`.
void add_bench_options(CLI::App* sub, BenchCli& o);

}  // namespace gpudiag::cli
