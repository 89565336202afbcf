// scan_device_tensors (scanner.h): the replica checksums, and the statistics
// when asked, of a batch of tensors that live on a GPU, for the C ABI's
// gpudiag_scan_checksums. One call is one segment table (one row per tensor,
// cuda_scan_kernel.h) copied to the device, one launch of the checksum kernel
// over all of it (and one of the statistics kernel over the same table), one
// copy of the results back and one wait against the deadline, all on the
// caller's stream after what it already queued, so a model's hundreds of
// parameters cost one round trip, not hundreds.
//
// Each device has its own buffers (a pinned table, the device table, the
// per-tensor sums and accumulators), grown to the largest batch seen and kept
// for the process, allocated in the device's primary context (DeviceScope,
// never cudaSetDevice); calls on one device take turns on them, calls on
// different devices do not wait for each other. A capturing stream is refused
// (CaptureGuard). The buffers are never freed: freeing waits for a GPU that
// may have hung, and the process's end frees them anyway.
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "gpu/cuda.h"
#include "numerics/scan/checksum.h"
#include "numerics/scan/cuda_resources.h"
#include "numerics/scan/cuda_scan_kernel.h"
#include "numerics/scan/scanner.h"

namespace gpudiag::numerics {

namespace {

using namespace cuda_scan;

class ResidentBatch {
 public:
  explicit ResidentBatch(int device)
      : gpu_(gpu_info(device).name + " (device " + std::to_string(device) + ")") {
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), gpu_,
          "cudaDeviceGetAttribute(multiprocessors)");
    std::string error;
    const int sum_per_sm = checksum_blocks_per_sm(&error), stats_per_sm = blocks_per_sm(&error);
    if (sum_per_sm <= 0 || stats_per_sm <= 0)
      check(cudaErrorInvalidDeviceFunction, gpu_,
            "finding the scan kernels for this GPU's architecture (" + error +
                "; rebuild with its CMAKE_CUDA_ARCHITECTURES)");
    sum_grid_ = std::max(1, sms * sum_per_sm);
    stats_grid_ = std::max(1, sms * stats_per_sm);
    finished_ = std::make_unique<Event>(gpu_);
  }

  void run(std::span<const TensorView> t, cudaStream_t s, TensorStats* stats,
           std::uint64_t* checksums) {
    if (hung_)
      throw Error(ExitCode::device, "CUDA scanner on " + gpu_ + ": an earlier scan hung",
                  "check the GPU with nvidia-smi and dmesg");
    const std::size_t n = t.size();
    reserve(n);
    auto* table = table_->get<Segment>();
    std::uint64_t tiles = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const auto addr = reinterpret_cast<std::uint64_t>(t[i].data);
      table[i] = {addr,
                  t[i].count,
                  tiles,
                  static_cast<std::uint32_t>(i),
                  static_cast<std::uint8_t>(t[i].dtype),
                  0,
                  {}};
      tiles += tiles_of(addr, t[i].count * dtype_size(t[i].dtype));
    }
    table[n] = {0, 0, tiles, 0, 0, 0, {}};
    auto* dev_table = static_cast<Segment*>(dev_table_->get());
    check(cudaMemcpyAsync(dev_table, table, (n + 1) * sizeof(Segment), cudaMemcpyHostToDevice, s),
          gpu_, "cudaMemcpyAsync(segment table)");
    const auto segments = static_cast<std::uint32_t>(n);
    if (checksums) {
      check(cudaMemsetAsync(sums_->get(), 0, n * sizeof(std::uint64_t), s), gpu_,
            "cudaMemsetAsync");
      const int grid = static_cast<int>(std::min<std::uint64_t>(sum_grid_, tiles));
      check(static_cast<cudaError_t>(launch_checksum(
                dev_table, segments, tiles, static_cast<std::uint64_t*>(sums_->get()), grid, s)),
            gpu_, "checksum kernel launch");
      check(cudaMemcpyAsync(sums_host_->get(), sums_->get(), n * sizeof(std::uint64_t),
                            cudaMemcpyDeviceToHost, s),
            gpu_, "cudaMemcpyAsync(checksums to the host)");
    }
    if (stats) {
      check(cudaMemsetAsync(acc_->get(), 0, n * sizeof(Accumulator), s), gpu_, "cudaMemsetAsync");
      const int grid = static_cast<int>(std::min<std::uint64_t>(stats_grid_, tiles));
      check(static_cast<cudaError_t>(launch(dev_table, segments, tiles,
                                            static_cast<Accumulator*>(acc_->get()), grid, s)),
            gpu_, "scan kernel launch");
      check(cudaMemcpyAsync(acc_host_->get(), acc_->get(), n * sizeof(Accumulator),
                            cudaMemcpyDeviceToHost, s),
            gpu_, "cudaMemcpyAsync(statistics to the host)");
    }
    check(cudaEventRecord(finished_->get(), s), gpu_, "cudaEventRecord");
    wait_event(finished_->get(), gpu_, "checksums of " + std::to_string(n) + " tensors", hung_);
    for (std::size_t i = 0; i < n; ++i) {
      if (checksums)
        checksums[i] = checksum_finish(sums_host_->get<std::uint64_t>()[i],
                                       t[i].count * dtype_size(t[i].dtype));
      if (stats)
        stats[i] = t[i].count ? decode(acc_host_->get<Accumulator>()[i], t[i].dtype, t[i].count)
                              : TensorStats{};
    }
  }

 private:
  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    const std::size_t c = std::max<std::size_t>(n, 2 * capacity_);
    table_ = std::make_unique<Pinned>((c + 1) * sizeof(Segment), gpu_);
    dev_table_ = std::make_unique<DeviceBuffer>((c + 1) * sizeof(Segment));
    sums_ = std::make_unique<DeviceBuffer>(c * sizeof(std::uint64_t));
    sums_host_ = std::make_unique<Pinned>(c * sizeof(std::uint64_t), gpu_);
    acc_ = std::make_unique<DeviceBuffer>(c * sizeof(Accumulator));
    acc_host_ = std::make_unique<Pinned>(c * sizeof(Accumulator), gpu_);
    capacity_ = c;
  }

  std::string gpu_;
  int sum_grid_ = 1, stats_grid_ = 1;
  std::size_t capacity_ = 0;
  std::unique_ptr<Pinned> table_, sums_host_, acc_host_;
  std::unique_ptr<DeviceBuffer> dev_table_, sums_, acc_;
  std::unique_ptr<Event> finished_;
  std::atomic<bool> hung_{false};
};

}  // namespace

void scan_device_tensors(std::span<const TensorView> tensors, void* stream, int device,
                         TensorStats* stats, std::uint64_t* checksums) {
  if (tensors.size() >= (std::uint64_t{1} << 32))
    throw UsageError("a batch of " + std::to_string(tensors.size()) + " tensors is too large",
                     "checksum at most 2^32 - 1 tensors per call");
  struct Slot {
    std::mutex m;
    ResidentBatch* batch = nullptr;  // never freed (see the header comment)
  };
  static std::mutex registry;
  static auto* slots = new std::map<int, std::unique_ptr<Slot>>;
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry);
    auto& s = (*slots)[device];
    if (!s) s = std::make_unique<Slot>();
    slot = s.get();
  }
  std::lock_guard<std::mutex> lock(slot->m);
  const DeviceScope scope(device);
  const CaptureGuard capture(static_cast<cudaStream_t>(stream), device);
  if (!slot->batch) slot->batch = new ResidentBatch(device);
  if (!tensors.empty())
    slot->batch->run(tensors, static_cast<cudaStream_t>(stream), stats, checksums);
}

}  // namespace gpudiag::numerics
