// The options of gpudiag bench (bench_cli.h): nccl-tests' flags, each with
// its names, range and meaning as nccl-tests gives them (src/common.cu there),
// and gpudiag's own (--links, --expect-busbw, --json, ...).
#include "cli/bench_cli.h"
#include "cli/commands.h"
#include "cli/json_output.h"

namespace gpudiag::cli {

void add_bench_options(CLI::App* sub, BenchCli& o) {
  sub->add_option("OP", o.op,
                  "all_reduce (default), all_gather, reduce_scatter, broadcast, reduce, alltoall, "
                  "sendrecv; nccl-tests' binary names (all_reduce_perf ...) work too");
  sub->add_option("--backend", o.check.backend,
                  "auto: NCCL on GPUs when every rank has one, else host; nccl: device memory "
                  "through NCCL; host: host memory through MPI or TCP")
      ->check(CLI::IsMember({"auto", "nccl", "host"}))
      ->capture_default_str();
  sub->add_option("-b,--minbytes,--min", o.min_bytes, "smallest size in bytes (K/M/G suffixes)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{64} << 30))
      ->default_str("1M");
  sub->add_option(
         "-e,--maxbytes,--max", o.max_bytes,
         "largest size (sizes double from -b unless -f or -i); with --links, the link size")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{64} << 30))
      ->default_str("256M");
  sub->add_option("-f,--stepfactor", o.step_factor, "sizes multiply by this factor (above 1)")
      ->check(FiniteIn(1.0, 1024.0, "a factor"));
  sub->add_option("-i,--stepbytes", o.step_bytes, "sizes grow by this many bytes (without -f)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{64} << 30));
  sub->add_option("-n,--iters", o.check.iters, "timed iterations per size")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("-w,--warmup_iters,--warmup", o.check.warmup, "untimed iterations per size")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  sub->add_option("-c,--check", o.datacheck,
                  "checked calls per size, out of place and in place (0: no check, #wrong N/A)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  sub->add_option("-o,--op", o.redop, "reduction: sum, prod, min, max, avg or all")
      ->capture_default_str();
  sub->add_option("-d,--datatype", o.dtype,
                  "int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16 or all")
      ->capture_default_str();
  sub->add_option("-r,--root", o.root, "root of broadcast and reduce; -1: every rank in turn")
      ->check(CLI::Range(-1, 1 << 24))
      ->capture_default_str();
  sub->add_option("-z,--blocking", o.blocking,
                  "1, 2 or 3: wait for each call before the next (nccl-tests' barrier variants "
                  "are one wait here)")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  // nccl-tests' other flags: accepted with their meaning; what gpudiag runs
  // differently is said on one "# gpudiag:" line of the report (flag_notes).
  auto count = [&](const char* names, int& v, const char* what, int lo, int hi) {
    sub->add_option(names, v, what)->check(CLI::Range(lo, hi))->capture_default_str();
  };
  count("-t,--nthreads", o.nthreads, "threads per process (nccl-tests'; one here, see the note)", 1,
        1024);
  count("-g,--ngpus", o.ngpus, "GPUs per thread (nccl-tests'; one here, see the note)", 1, 1024);
  count("-m,--agg_iters", o.agg, "calls aggregated per iteration (nccl-tests')", 1, 100000);
  sub->add_option("-N,--run_cycles", o.cycles,
                  "times the sweep runs, each printed; 0: until "
                  "interrupted")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{1} << 30))
      ->capture_default_str();
  count("-p,--parallel_init", o.parallel_init, "nccl-tests' parallel init (0/1)", 0, 1);
  count("-y,--stream_null", o.stream_null, "nccl-tests' null stream (0/1)", 0, 1);
  count("-G,--cudagraph", o.graph, "CUDA graph launches (nccl-tests')", 0, 1 << 20);
  count("-C,--report_cputime", o.cputime, "report CPU time (nccl-tests', 0/1)", 0, 1);
  count("-S,--report_timestamps", o.timestamps, "timestamp column (nccl-tests', 0/1)", 0, 1);
  count("-R,--local_register", o.local_register, "buffer registration (nccl-tests', 0/1/2)", 0, 2);
  count("-x,--cta_policy", o.cta_policy, "NCCL CTA policy (nccl-tests', 0/1/2)", -1, 2);
  count("-D,--device_implementation", o.device_impl, "device API implementation (nccl-tests')", 0,
        1 << 20);
  count("-V,--device_cta_count", o.device_ctas, "device API CTAs (nccl-tests')", 1, 128);
  count("-M,--memory", o.memory, "memory usage report (nccl-tests', 0/1)", 0, 1);
  count("-u,--unalign", o.unalign, "misalign buffers by this many elements (nccl-tests')", 0,
        1 << 20);
  count("-I,--per_iter_timing", o.per_iter, "per-iteration timing (nccl-tests', 0/1)", 0, 1);
  count("-K,--per_iter_skip", o.per_iter_skip, "leading samples left out of -I's summary", 0,
        1 << 20);
  sub->add_option("-a,--average", o.average,
                  "time reported: 0 rank 0's, 1 mean over ranks, 2 min, 3 max")
      ->check(CLI::Range(0, 3))
      ->capture_default_str();
  sub->add_option("-T,--timeout", o.check.timeout_s, "seconds any wait for peers may take")
      ->check(Seconds(0.1, 86400.0))
      ->capture_default_str();
  sub->add_option("-J,--output_file", o.output_file,
                  "rank 0 writes nccl-tests' JSON to FILE (FILE.0, FILE.1... when it exists), "
                  "gpudiag's own document under \"gpudiag\" (--json writes that alone)")
      ->type_name("FILE");
  sub->add_option("--device", o.check.device, "CUDA device ordinal (default: local rank)")
      ->check(DeviceOrdinal());
  add_nccl_lib_option(sub, o.check.nccl_lib);
  sub->add_flag(
      "--links", o.links,
      "instead of the sweep: every pair of ranks exchanges -e/--link-size bytes both ways at once; "
      "a matrix of link bandwidths and the slow links, with the rank or host they share "
      "(exit 1 if any)");
  sub->add_option("--link-size", o.link_bytes,
                  "with --links: bytes each pair exchanges per iteration (the same as -e)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{4}, std::uint64_t{4} << 30))
      ->default_str("32MiB");
  sub->add_option("--link-schedule", o.check.link_schedule,
                  "rounds: the disjoint pairs of a round at once; serial: one pair at a time; "
                  "auto: serial when a host has more ranks than CPUs")
      ->check(CLI::IsMember({"auto", "rounds", "serial"}))
      ->capture_default_str();
  add_json_option(sub, o.json_path, "rank 0 writes the results (the job report if it failed)");
  sub->add_option("--prometheus", o.prometheus,
                  "rank 0 writes the results as metrics in node_exporter's textfile format "
                  "(atomically)");
  sub->add_option("--expect-busbw", o.expect_busbw,
                  "GB/s the largest size's bus bandwidth (with --links: each link) should "
                  "reach, instead of the table of GPU families (data/expected-bw); below 80% "
                  "WARN, below 50% FAIL (exit 1)")
      ->type_name("GB/s")
      ->check(FiniteIn(0.001, 1e6, "GB/s"));
}

}  // namespace gpudiag::cli
