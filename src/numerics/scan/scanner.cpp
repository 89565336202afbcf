// make_scanner: the backend the user asked for, or for --device auto the one
// that measured faster on the data about to be scanned (scan_plan.h:
// choose_by_rates). Both scanners scan the same sample, the CPU from the
// mapping, the GPU through its whole path (pread into pinned memory, copy,
// kernel), and the faster one scans everything; without a usable GPU auto is
// the CPU without measuring.
#include "numerics/scan/scanner.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "numerics/scan/scan_plan.h"
#include "util/deadline.h"
#include "util/error.h"
#include "util/strings.h"

namespace gpudiag::numerics {

namespace {

std::uint64_t bytes_of(std::span<const TensorView> views) {
  std::uint64_t n = 0;
  for (const auto& v : views) n += v.count * dtype_size(v.dtype);
  return n;
}

/// Bytes per second of `s` scanning `sample`, by the wall clock.
double rate_of(Scanner& s, std::span<const TensorView> sample, std::uint64_t bytes) {
  const auto t0 = Deadline::Clock::now();
  (void)s.scan(sample);
  return static_cast<double>(bytes) / std::max(seconds_since(t0), 1e-9);
}

}  // namespace

std::vector<TensorView> sample_of(std::span<const TensorView> views, std::uint64_t max_bytes) {
  std::vector<TensorView> out;
  std::uint64_t left = max_bytes;
  for (const auto& v : views) {
    if (left == 0) break;
    const std::uint64_t es = dtype_size(v.dtype);
    TensorView t = v;
    t.count = std::min(v.count, left / es);
    if (t.count == 0) break;
    out.push_back(t);
    left -= t.count * es;
  }
  return out;
}

std::unique_ptr<Scanner> make_scanner(ScanDevice device, unsigned threads, int gpu,
                                      std::span<const TensorView> sample) {
  if (device == ScanDevice::cpu) return make_cpu_scanner(threads);
  std::string why_not;
  auto cuda = make_cuda_scanner(&why_not, gpu);
  if (device == ScanDevice::cuda) {
    if (!cuda) throw UsageError("--device cuda: " + why_not, "use --device cpu or --device auto");
    return cuda;
  }
  auto cpu = make_cpu_scanner(threads);
  if (!cuda) {
    spdlog::info("scan: --device auto: using the CPU scanner: {}", why_not);
    return cpu;
  }
  const std::uint64_t bytes = bytes_of(sample);
  if (bytes < kAutoMinBytes) {
    spdlog::info("scan: --device auto: {} of tensor data to measure on, less than {}: using the "
                 "CPU scanner (a GPU's set-up would outweigh the scan)",
                 human_bytes(bytes), human_bytes(kAutoMinBytes));
    return cpu;
  }
  // Each scanner once on a piece first: the GPU's pinned ring, its module and
  // the first pages are set-up, not the rate the rest of the scan will see.
  const auto warm = sample_of(sample, kAutoWarmBytes);
  (void)cpu->scan(warm);
  (void)cuda->scan(warm);
  const double cpu_rate = rate_of(*cpu, sample, bytes);
  const double gpu_rate = rate_of(*cuda, sample, bytes);
  const AutoChoice choice = choose_by_rates(cpu_rate, gpu_rate, bytes);
  spdlog::info("scan: --device auto: {} ({})", choice.why, cuda->describe());
  if (choice.gpu) return cuda;
  return cpu;
}

}  // namespace gpudiag::numerics
