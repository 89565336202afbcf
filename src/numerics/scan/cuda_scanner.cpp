// The CUDA scanner's host side: the same statistics as the CPU scanner,
// computed by the one kernel of cuda_scan_kernel.cu (run on an H100: see
// docs/GPU-VALIDATION.md).
//
// Host tensors (usually views into memory-mapped files) go through a ring of
// pinned staging buffers (scan_plan.h: Ring, plan_chunks): reader threads
// fill the buffers with pread (staged_reads.h), each chunk's reads split
// among kParts of them (split_reads), while one copy stream
// moves filled buffers into device buffers and a compute stream scans them,
// each ordered after the other by events, so reading, copying and scanning
// overlap. A chunk holds many small tensors, so a batch of thousands of tiny
// activations is one launch. Per-tensor results stay on the device
// (atomics into an Accumulator array) and come back in one copy at the end.
// Every wait polls an event against a deadline (cuda_resources.h): a hung
// GPU ends the scan with TimeoutError, a CUDA error with Error(device).
// The device is the user's --gpu or the local rank's (scan_gpu.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "gpu/cuda.h"
#include "numerics/scan/cuda_resources.h"
#include "numerics/scan/cuda_scan_kernel.h"
#include "numerics/scan/scan_gpu.h"
#include "numerics/scan/scan_plan.h"
#include "numerics/scan/scanner.h"
#include "numerics/scan/staged_reads.h"
#include "util/env.h"

namespace gpudiag::numerics {

namespace {

using namespace cuda_scan;

constexpr std::size_t kChunkBytes = std::size_t{64} << 20;
constexpr std::size_t kMaxSegments = 16384;
constexpr Ring kRing{3, 2};
constexpr unsigned kReaders = 8;
/// Pieces a chunk's reads are cut into: a pread into pinned memory moves
/// about 5-10 GB/s on one thread, and the copy to the device 50 GB/s.
constexpr std::size_t kParts = 4;

class CudaScanner final : public Scanner {
 public:
  explicit CudaScanner(int device)
      : device_(device),
        info_((set_device(device), gpu_info(device))),
        gpu_(info_.name + " (device " + std::to_string(device) + ")"),
        copy_(std::make_unique<Stream>()),
        compute_(std::make_unique<Stream>()) {
    // A build without code for this GPU's architecture fails here, at
    // creation, where --device auto can still fall back to the CPU.
    std::string error;
    const int per_sm = blocks_per_sm(&error);
    if (per_sm <= 0)
      check(cudaErrorInvalidDeviceFunction, gpu_,
            "finding the scan kernel for this GPU's architecture (" + error +
                "; rebuild with its CMAKE_CUDA_ARCHITECTURES)");
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), gpu_,
          "cudaDeviceGetAttribute(multiprocessors)");
    grid_ = std::max(1, sms * per_sm);
    spdlog::debug("cuda scanner on {}: {} SMs x {} blocks of {} threads", gpu_, sms, per_sm,
                  kThreads);
    finished_ = std::make_unique<Event>(gpu_);
    resident_table_ = std::make_unique<Pinned>(2 * sizeof(Segment), gpu_);
    resident_dev_table_ = std::make_unique<DeviceBuffer>(2 * sizeof(Segment));
    reserve_results(1024);
  }

  ~CudaScanner() override {
    if (!hung_) return;
    // Work is still queued on a GPU that stopped answering, and freeing
    // device or pinned memory waits for it: that would hang the exit this
    // scanner's deadlines exist for. Leave it all to the process's end.
    for (auto& p : staging_) (void)p.release();
    for (auto& p : tables_) (void)p.release();
    for (auto& p : chunks_) (void)p.release();
    for (auto& p : dev_tables_) (void)p.release();
    for (auto* p : {&results_, &resident_dev_table_}) (void)p->release();
    for (auto* p : {&results_host_, &resident_table_}) (void)p->release();
    (void)copy_.release(), (void)compute_.release();
  }

  std::vector<TensorStats> scan(std::span<const TensorView> views) override {
    const DeviceScope scope(device_);
    make_ring();
    reserve_results(views.size());
    const StagingFiles files(views);
    const std::vector<Chunk> chunks = plan_chunks(views, files.sources(), kChunkBytes, kMaxSegments);
    check(cudaMemsetAsync(results_->get(), 0, views.size() * sizeof(Accumulator), compute()), gpu_,
          "cudaMemsetAsync(results)");
    const auto t0 = Deadline::Clock::now();
    try {
      run_pipeline(chunks, files);
      check(cudaMemcpyAsync(results_host_->get(), results_->get(), views.size() * sizeof(Accumulator),
                            cudaMemcpyDeviceToHost, compute()),
            gpu_, "cudaMemcpyAsync(results to the host)");
      check(cudaEventRecord(finished_->get(), compute()), gpu_, "cudaEventRecord");
      wait_event(finished_->get(), gpu_, "the scan's last chunk", hung_);
    } catch (...) {
      drain();
      throw;
    }
    spdlog::debug("cuda scan: {} tensors in {} chunk(s), {} file(s) read with pread, {:.3f} s",
                  views.size(), chunks.size(), files.file_count(), seconds_since(t0));
    std::vector<TensorStats> out(views.size());
    const auto* acc = results_host_->get<Accumulator>();
    for (std::size_t i = 0; i < views.size(); ++i)
      if (views[i].count > 0) out[i] = decode(acc[i], views[i].dtype, views[i].count);
    return out;
  }

  std::string describe() const override {
    return "cuda (" + info_.name + ", device " + std::to_string(device_) + ")";
  }

  /// Statistics of `n` elements of `t` already on this scanner's device at
  /// `x`, computed on the caller's stream `s` (after what was queued on it
  /// before) and waited for with the deadline. One call at a time.
  TensorStats scan_resident(const void* x, std::uint64_t n, DType t, cudaStream_t s) {
    const DeviceScope scope(device_);
    if (n == 0) return {};
    auto* table = resident_table_->get<Segment>();
    const auto addr = reinterpret_cast<std::uint64_t>(x);
    const std::uint64_t tiles = tiles_of(addr, n * dtype_size(t));
    table[0] = {addr, n, 0, 0, static_cast<std::uint8_t>(t), 0, {}};
    table[1] = {0, 0, tiles, 0, 0, 0, {}};
    auto* dev_table = static_cast<Segment*>(resident_dev_table_->get());
    check(cudaMemcpyAsync(dev_table, table, 2 * sizeof(Segment), cudaMemcpyHostToDevice, s), gpu_,
          "cudaMemcpyAsync(segment table)");
    check(cudaMemsetAsync(results_->get(), 0, sizeof(Accumulator), s), gpu_, "cudaMemsetAsync");
    launch_or_throw(dev_table, 1, tiles, s);
    check(cudaMemcpyAsync(results_host_->get(), results_->get(), sizeof(Accumulator),
                          cudaMemcpyDeviceToHost, s),
          gpu_, "cudaMemcpyAsync(result to the host)");
    check(cudaEventRecord(finished_->get(), s), gpu_, "cudaEventRecord");
    wait_event(finished_->get(), gpu_, "a scan of device memory", hung_);
    return decode(*results_host_->get<Accumulator>(), t, n);
  }

 private:
  cudaStream_t copy() const { return static_cast<cudaStream_t>(copy_->handle()); }
  cudaStream_t compute() const { return static_cast<cudaStream_t>(compute_->handle()); }
  Accumulator* results() const { return static_cast<Accumulator*>(results_->get()); }

  /// The staging ring, on the first scan of host memory only: a scanner
  /// that only scans device memory (the C library's) never holds it.
  void make_ring() {
    if (scanned_.size() == kRing.device_slots) return;  // made (a failed try left it shorter)
    staging_.clear(), tables_.clear(), copied_.clear();
    chunks_.clear(), dev_tables_.clear(), scanned_.clear();
    for (std::size_t i = 0; i < kRing.host_slots; ++i) {
      staging_.push_back(std::make_unique<Pinned>(kChunkBytes, gpu_));
      tables_.push_back(std::make_unique<Pinned>((kMaxSegments + 1) * sizeof(Segment), gpu_));
      copied_.push_back(std::make_unique<Event>(gpu_));
    }
    for (std::size_t i = 0; i < kRing.device_slots; ++i) {
      chunks_.push_back(std::make_unique<DeviceBuffer>(kChunkBytes));
      dev_tables_.push_back(std::make_unique<DeviceBuffer>((kMaxSegments + 1) * sizeof(Segment)));
      scanned_.push_back(std::make_unique<Event>(gpu_));
    }
  }

  void reserve_results(std::size_t n) {
    if (results_ && results_->bytes() >= n * sizeof(Accumulator)) return;
    n = std::max<std::size_t>(n, 1);
    results_ = std::make_unique<DeviceBuffer>(n * sizeof(Accumulator));
    results_host_ = std::make_unique<Pinned>(n * sizeof(Accumulator), gpu_);
  }

  void launch_or_throw(const Segment* table, std::uint32_t n, std::uint64_t tiles, cudaStream_t s) {
    const int grid = static_cast<int>(std::min<std::uint64_t>(grid_, tiles));
    check(static_cast<cudaError_t>(launch(table, n, tiles, results(), grid, s)), gpu_,
          "scan kernel launch");
  }

  /// Shared between the feeding thread and the readers.
  struct Progress {
    std::mutex m;
    std::condition_variable cv;
    std::vector<char> filled, queued;
    std::vector<std::size_t> parts_done;
    std::exception_ptr error;
    bool abort = false;
  };

  /// Readers fill chunks in order from a shared counter; this thread queues
  /// each filled chunk's copy and kernel. Returns once every chunk is queued.
  void run_pipeline(const std::vector<Chunk>& chunks, const StagingFiles& files) {
    Progress pr;
    pr.filled.assign(chunks.size(), 0);
    pr.queued.assign(chunks.size(), 0);
    pr.parts_done.assign(chunks.size(), 0);
    std::vector<std::vector<std::vector<StagedRead>>> parts(chunks.size());
    for (std::size_t k = 0; k < chunks.size(); ++k) parts[k] = split_reads(chunks[k].reads, kParts);
    std::atomic<std::size_t> next{0};
    auto reader = [&] {
      try {
        set_device(device_);  // its event queries run in this scanner's device context
        for (std::size_t i; (i = next.fetch_add(1)) < chunks.size() * kParts;) {
          const std::size_t k = i / kParts;
          if (!wait_slot(pr, k)) return;
          files.fill(parts[k][i % kParts], staging_[kRing.host_slot(k)]->get<std::uint8_t>());
          std::lock_guard lock(pr.m);
          if (++pr.parts_done[k] == kParts) {
            pr.filled[k] = 1;
            pr.cv.notify_all();
          }
        }
      } catch (...) {
        std::lock_guard lock(pr.m);
        if (!pr.error) pr.error = std::current_exception();
        pr.abort = true;
        pr.cv.notify_all();
      }
    };
    std::vector<std::jthread> readers;
    const auto n_readers = std::min<std::size_t>(
        {kReaders, chunks.size() * kParts, std::max(1u, std::thread::hardware_concurrency())});
    try {
      for (std::size_t r = 0; r < n_readers; ++r) readers.emplace_back(reader);
      for (std::size_t k = 0; k < chunks.size(); ++k) {
        wait_filled(pr, k);
        queue_chunk(chunks[k], k);
        std::lock_guard lock(pr.m);
        pr.queued[k] = 1;
        pr.cv.notify_all();
      }
    } catch (...) {
      {
        std::lock_guard lock(pr.m);
        pr.abort = true;
        pr.cv.notify_all();
      }
      readers.clear();  // joins: each reader stops at its next wait
      throw;
    }
  }

  /// A reader's wait before filling chunk k: the chunk that used its pinned
  /// buffer last must be queued, then its copy must finish. False: aborted.
  bool wait_slot(Progress& pr, std::size_t k) {
    const auto before = kRing.fill_waits_for(k);
    if (!before) return true;
    {
      std::unique_lock lock(pr.m);
      const auto deadline = Deadline::after_seconds(kWaitSeconds);
      if (!pr.cv.wait_until(lock, deadline.when(), [&] { return pr.abort || pr.queued[*before]; }))
        throw TimeoutError("CUDA scanner: chunk " + std::to_string(*before) +
                           " was not queued within " + std::to_string(int(kWaitSeconds)) + " s");
      if (pr.abort) return false;
    }
    wait_event(copied_[kRing.host_slot(k)]->get(), gpu_, "a 64 MiB chunk's copy to the device",
               hung_);
    return true;
  }

  void wait_filled(Progress& pr, std::size_t k) {
    std::unique_lock lock(pr.m);
    const auto deadline = Deadline::after_seconds(kWaitSeconds);
    if (!pr.cv.wait_until(lock, deadline.when(), [&] { return pr.abort || pr.filled[k]; }))
      throw TimeoutError("CUDA scanner: reading chunk " + std::to_string(k) + " (up to 64 MiB) " +
                             "did not finish within " + std::to_string(int(kWaitSeconds)) + " s",
                         "check the file system, or scan on the CPU with --device cpu");
    if (pr.error) std::rethrow_exception(pr.error);
  }

  /// Queues chunk k: its table and bytes on the copy stream (after the scan
  /// of the chunk that last used the device buffer), then the kernel on the
  /// compute stream after the copy.
  void queue_chunk(const Chunk& c, std::size_t k) {
    const std::size_t hs = kRing.host_slot(k), ds = kRing.device_slot(k);
    auto* base = static_cast<std::uint8_t*>(chunks_[ds]->get());
    auto* table = tables_[hs]->get<Segment>();
    std::uint64_t tiles = 0;
    for (std::size_t i = 0; i < c.pieces.size(); ++i) {
      const StagedPiece& p = c.pieces[i];
      const auto addr = reinterpret_cast<std::uint64_t>(base + p.staging_offset);
      table[i] = {addr, p.count, tiles, p.tensor, static_cast<std::uint8_t>(p.dtype),
                  static_cast<std::uint8_t>(p.swap), {}};
      tiles += tiles_of(addr, p.count * dtype_size(p.dtype));
    }
    table[c.pieces.size()] = {0, 0, tiles, 0, 0, 0, {}};
    if (const auto before = kRing.copy_waits_for(k))
      check(cudaStreamWaitEvent(copy(), scanned_[ds]->get(), 0), gpu_, "cudaStreamWaitEvent");
    auto* dev_table = static_cast<Segment*>(dev_tables_[ds]->get());
    check(cudaMemcpyAsync(dev_table, table, (c.pieces.size() + 1) * sizeof(Segment),
                          cudaMemcpyHostToDevice, copy()),
          gpu_, "cudaMemcpyAsync(segment table)");
    check(cudaMemcpyAsync(base, staging_[hs]->get(), c.bytes, cudaMemcpyHostToDevice, copy()), gpu_,
          "cudaMemcpyAsync(chunk to the device)");
    check(cudaEventRecord(copied_[hs]->get(), copy()), gpu_, "cudaEventRecord");
    check(cudaStreamWaitEvent(compute(), copied_[hs]->get(), 0), gpu_, "cudaStreamWaitEvent");
    launch_or_throw(dev_table, static_cast<std::uint32_t>(c.pieces.size()), tiles, compute());
    check(cudaEventRecord(scanned_[ds]->get(), compute()), gpu_, "cudaEventRecord");
  }

  /// After a failure: let queued work finish (within the deadline) before
  /// the buffers are reused or freed; if it does not, the scanner is hung.
  void drain() noexcept {
    if (hung_) return;  // a deadline already passed: do not wait again
    try {
      for (cudaStream_t s : {copy(), compute()}) {
        check(cudaEventRecord(finished_->get(), s), gpu_, "cudaEventRecord");
        wait_event(finished_->get(), gpu_, "draining the scan after an error", hung_);
      }
    } catch (...) {
    }
  }

  int device_;
  GpuInfo info_;
  std::string gpu_;  ///< "NVIDIA H100 80GB HBM3 (device 0)", for errors
  int grid_ = 1;
  // Held by pointer so a hung scanner can leak them (see the destructor).
  std::unique_ptr<Stream> copy_, compute_;
  std::vector<std::unique_ptr<Pinned>> staging_, tables_;
  std::vector<std::unique_ptr<Event>> copied_, scanned_;
  std::vector<std::unique_ptr<DeviceBuffer>> chunks_, dev_tables_;
  std::unique_ptr<Event> finished_;
  std::unique_ptr<DeviceBuffer> results_, resident_dev_table_;
  std::unique_ptr<Pinned> results_host_, resident_table_;
  std::atomic<bool> hung_{false};  ///< set by reader threads too
};

}  // namespace

TensorStats scan_device_buffer(const void* data, std::uint64_t count, DType dtype, void* stream,
                               int device) {
  // One scanner (its device buffers) per device, made on first use; calls on
  // one device take turns on its buffers, calls on different devices do not
  // wait for each other (the registry's lock is held only to find the slot).
  struct Slot {
    std::mutex m;
    std::unique_ptr<CudaScanner> scanner;
  };
  static std::mutex registry;
  static std::map<int, std::unique_ptr<Slot>> slots;
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry);
    auto& s = slots[device];
    if (!s) s = std::make_unique<Slot>();
    slot = s.get();
  }
  std::lock_guard<std::mutex> lock(slot->m);
  const DeviceScope scope(device);
  const CaptureGuard capture(static_cast<cudaStream_t>(stream), device);
  if (!slot->scanner) slot->scanner = std::make_unique<CudaScanner>(device);
  return slot->scanner->scan_resident(data, count, dtype, static_cast<cudaStream_t>(stream));
}

std::unique_ptr<Scanner> make_cuda_scanner(std::string* why_not, int ordinal) {
  const CudaStatus status = probe_cuda();
  if (!status.usable) {
    if (why_not) *why_not = status.error.empty() ? "no usable CUDA device" : status.error;
    return nullptr;
  }
  // A bad --gpu is the user's to fix, not a reason to fall back: it throws.
  const int device = choose_scan_gpu(ordinal, status.device_count, Env::from_process()).ordinal;
  try {
    const DeviceScope scope(device);
    return std::make_unique<CudaScanner>(device);
  } catch (const Error& e) {
    if (why_not) *why_not = e.one_line();
    return nullptr;
  }
}

}  // namespace gpudiag::numerics
