// The compute phase's repetitions (run.h): each precision gets a third of the
// budget in wall time, timed by its own clock (CUDA events on a GPU, the
// steady clock on the CPU), and its checksum is the first repetition's.
#include "compute/run.h"

#include <chrono>
#include <fstream>
#include <functional>

#include "compute/arith.h"
#include "compute/known.h"
#include "gpu/compute_gemm.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

using compute::Precision;
using Clock = std::chrono::steady_clock;

/// Repeats `once` (the GEMM's seconds, its checksum) until `budget_s` of wall
/// time passed, twice at least; notes a repetition that differs.
ComputePart repeat(Precision p, int n, double budget_s,
                   const std::function<double(std::uint64_t&)>& once, ComputeRecord& rec) {
  ComputePart part;
  part.name = std::string(compute::precision_name(p)) + " GEMM";
  const auto t0 = Clock::now();
  std::uint64_t first = 0;
  for (;;) {
    std::uint64_t sum = 0;
    part.seconds += once(sum);
    part.flops += 2.0 * n * n * static_cast<double>(n);
    if (++part.repeats == 1) first = sum;
    if (sum != first && rec.judged.empty()) {
      rec.judged = "unstable";
      rec.finding = "compute result changed between repetitions on this " +
                    std::string(rec.device == "gpu" ? "GPU" : "CPU") + " (" + part.name + ", checksum " +
                    compute::hex64(first) + " at the first repetition, " + compute::hex64(sum) +
                    " at repetition " + std::to_string(part.repeats) + ")";
    }
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    if (part.repeats >= 2 && wall >= budget_s) break;
  }
  part.checksum = compute::hex64(first);
  return part;
}

}  // namespace

ComputeRecord run_compute(const ComputeOptions& o) {
  ComputeRecord rec;
  rec.model = o.model;
  rec.device = o.gpu ? "gpu" : "host";
  // The key of the known checksums (compute/known.h): the arithmetic's
  // version, and on a GPU the driver's release; the default size only.
  if (o.n == 0) rec.kernel = compute::kComputeKernelVersion;
  if (o.gpu) rec.driver = nvidia_driver_release();
  const int n = o.n > 0 ? o.n : o.gpu ? kGpuComputeN : kHostComputeN;
  const auto t0 = Clock::now();
  for (Precision p : {Precision::bf16, Precision::fp16, Precision::fp32}) {
    std::function<double(std::uint64_t&)> once;
    std::unique_ptr<GpuGemm> gpu;
    if (o.gpu) {
      gpu = make_gpu_gemm(p, n);
      once = [&](std::uint64_t& sum) { return gpu->run(sum, o.flip, o.deadline); };
    } else {
      once = [&](std::uint64_t& sum) {
        const auto s = Clock::now();
        auto c = compute::cpu_gemm(p, n);
        const double seconds = std::chrono::duration<double>(Clock::now() - s).count();
        if (o.flip) compute::flip_bit(c.data(), n);
        sum = compute::checksum(c.data(), c.size());
        return seconds;
      };
    }
    rec.parts.push_back(repeat(p, n, o.seconds / 3, once, rec));
  }
  double flops = 0, seconds = 0;
  for (const auto& part : rec.parts) flops += part.flops, seconds += part.seconds;
  rec.tflops = seconds > 0 ? flops / seconds / 1e12 : 0;
  rec.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return rec;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0)
      if (auto colon = line.find(':'); colon != std::string::npos) {
        const std::string name(trim(std::string_view(line).substr(colon + 1)));
        if (!name.empty()) return "CPU " + name;
      }
  return "CPU";
}

}  // namespace gpudiag
