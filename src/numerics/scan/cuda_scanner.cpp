// The CUDA scanner's host side: the same statistics as the CPU scanner,
// computed by the one kernel of cuda_scan_kernel.cu (run on an H100: see
// docs/GPU-VALIDATION.md). The class is declared in cuda_scanner_impl.h.
//
// A scan of host tensors (usually views into memory-mapped files) is planned
// in plain C++ and fed to a ring of device buffers by one of two readers:
// the windows reader (window_plan.h, cuda_window_pipeline.cpp) for tensors
// in large mappings, where the GPU and driver can register read-only host
// memory, and the pread reader (scan_plan.h, cuda_pread_pipeline.cpp) for
// the rest: small files, host memory, or everything when registering is not
// possible. A registration that fails mid-scan drains the GPU and scans
// again with pread, and the scanner keeps to pread afterwards. A chunk holds
// many small tensors, so a batch of thousands of tiny activations is one
// launch. Per-tensor results stay on the device (atomics into an Accumulator
// array) and come back in one copy at the end. Every wait polls an event
// against a deadline (cuda_resources.h): a hung GPU ends the scan with
// TimeoutError, a CUDA error with Error(device). The device is the user's
// --gpu or the local rank's (scan_gpu.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <unistd.h>

#include "numerics/scan/cuda_scanner_impl.h"
#include "numerics/scan/scan_gpu.h"
#include "util/env.h"

namespace gpudiag::numerics {

namespace cuda_scan {

CudaScanner::CudaScanner(int device, FileReader reader)
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
  windows_why_not_ = reader == FileReader::pread ? "pread was asked for" : windows_unsupported();
  spdlog::debug("cuda scanner on {}: {} SMs x {} blocks of {} threads; file reader: {}", gpu_, sms,
                per_sm, kThreads,
                windows_why_not_.empty() ? "windows of the mappings" : "pread (" + windows_why_not_ + ")");
  finished_ = std::make_unique<Event>(gpu_);
  resident_table_ = std::make_unique<Pinned>(2 * sizeof(Segment), gpu_);
  resident_dev_table_ = std::make_unique<DeviceBuffer>(2 * sizeof(Segment));
  reserve_results(1024);
}

CudaScanner::~CudaScanner() {
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

std::vector<TensorStats> CudaScanner::scan(std::span<const TensorView> views) {
  const DeviceScope scope(device_);
  make_ring();
  reserve_results(views.size());
  if (!windows_why_not_.empty()) return scan_with(views, false);
  try {
    return scan_with(views, true);
  } catch (const RegistrationFailed& f) {
    windows_why_not_ = f.why;
    spdlog::debug("cuda scan: {}; scanning again with pread (and from now on)", f.why);
    return scan_with(views, false);
  }
}

std::vector<TensorStats> CudaScanner::scan_with(std::span<const TensorView> views, bool windows) {
  const StagingFiles files(views);
  WindowPlan wplan;
  MappedSources mapped;
  if (windows) {
    mapped = find_mapped_sources(views);
    WindowLimits limits;
    limits.chunk_bytes = kChunkBytes, limits.max_segments = kMaxSegments;
    limits.window_bytes = kWindowBytes, limits.live_windows = kLiveWindows;
    limits.page_bytes = static_cast<std::uint64_t>(std::max(1L, ::sysconf(_SC_PAGESIZE)));
    wplan = plan_windows(views, mapped.sources, mapped.mappings, limits);
  } else {
    for (std::size_t i = 0; i < views.size(); ++i)
      if (views[i].count > 0) wplan.pread_views.push_back(static_cast<std::uint32_t>(i));
  }
  const std::vector<Chunk> chunks =
      plan_chunks(views, files.sources(), wplan.pread_views, kChunkBytes, kMaxSegments);
  check(cudaMemsetAsync(results_->get(), 0, views.size() * sizeof(Accumulator), compute()), gpu_,
        "cudaMemsetAsync(results)");
  const auto t0 = Deadline::Clock::now();
  try {
    run_pread(chunks, files, 0);
    if (!wplan.chunks.empty()) run_windows(wplan, mapped.mappings, chunks.size());
    check(cudaMemcpyAsync(results_host_->get(), results_->get(), views.size() * sizeof(Accumulator),
                          cudaMemcpyDeviceToHost, compute()),
          gpu_, "cudaMemcpyAsync(results to the host)");
    check(cudaEventRecord(finished_->get(), compute()), gpu_, "cudaEventRecord");
    wait_event(finished_->get(), gpu_, "the scan's last chunk", hung_);
  } catch (...) {
    drain();
    throw;
  }
  const std::size_t by_windows = views.size() - wplan.pread_views.size();
  if (windows)
    last_reader_ = "windows: " + std::to_string(wplan.windows.size()) + " window(s) of " +
                   std::to_string(mapped.mappings.size()) + " mapping(s) registered, " +
                   std::to_string(wplan.chunks.size()) + " chunk(s); " +
                   std::to_string(wplan.pread_views.size()) + " tensor(s) by pread (" +
                   std::to_string(chunks.size()) + " chunk(s))";
  else
    last_reader_ = "pread: " + std::to_string(chunks.size()) + " chunk(s), " +
                   std::to_string(files.file_count()) + " file(s) (windows not used: " +
                   windows_why_not_ + ")";
  spdlog::debug("cuda scan: {} tensors ({} by windows), {:.3f} s; {}", views.size(),
                windows ? by_windows : 0, seconds_since(t0), last_reader_);
  std::vector<TensorStats> out(views.size());
  const auto* acc = results_host_->get<Accumulator>();
  for (std::size_t i = 0; i < views.size(); ++i)
    if (views[i].count > 0) out[i] = decode(acc[i], views[i].dtype, views[i].count);
  return out;
}

std::string CudaScanner::describe() const {
  return "cuda (" + info_.name + ", device " + std::to_string(device_) + ")";
}

TensorStats CudaScanner::scan_resident(const void* x, std::uint64_t n, DType t, cudaStream_t s) {
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

/// The staging ring, on the first scan of host memory only: a scanner
/// that only scans device memory (the C library's) never holds it.
void CudaScanner::make_ring() {
  if (scanned_.size() == kRing.device_slots) return;  // made (a failed try left it shorter)
  staging_.clear(), tables_.clear(), copied_.clear(), part_copied_.clear();
  chunks_.clear(), dev_tables_.clear(), scanned_.clear();
  for (std::size_t i = 0; i < kRing.host_slots; ++i) {
    staging_.push_back(std::make_unique<Pinned>(kChunkBytes, gpu_));
    tables_.push_back(std::make_unique<Pinned>((kMaxSegments + 1) * sizeof(Segment), gpu_));
    copied_.push_back(std::make_unique<Event>(gpu_));
    part_copied_.emplace_back();
    for (std::size_t p = 0; p < kPartsPerSlot; ++p)
      part_copied_.back().push_back(std::make_unique<Event>(gpu_));
  }
  for (std::size_t i = 0; i < kRing.device_slots; ++i) {
    chunks_.push_back(std::make_unique<DeviceBuffer>(kChunkBytes));
    dev_tables_.push_back(std::make_unique<DeviceBuffer>((kMaxSegments + 1) * sizeof(Segment)));
    scanned_.push_back(std::make_unique<Event>(gpu_));
  }
}

void CudaScanner::reserve_results(std::size_t n) {
  if (results_ && results_->bytes() >= n * sizeof(Accumulator)) return;
  n = std::max<std::size_t>(n, 1);
  results_ = std::make_unique<DeviceBuffer>(n * sizeof(Accumulator));
  results_host_ = std::make_unique<Pinned>(n * sizeof(Accumulator), gpu_);
}

void CudaScanner::launch_or_throw(const Segment* table, std::uint32_t n, std::uint64_t tiles,
                                  cudaStream_t s) {
  const int grid = static_cast<int>(std::min<std::uint64_t>(grid_, tiles));
  check(static_cast<cudaError_t>(launch(table, n, tiles, results(), grid, s)), gpu_,
        "scan kernel launch");
}

std::uint8_t* CudaScanner::begin_chunk(std::size_t g) {
  if (kRing.copy_waits_for(g))
    check(cudaStreamWaitEvent(copy(), scanned_[kRing.device_slot(g)]->get(), 0), gpu_,
          "cudaStreamWaitEvent");
  return static_cast<std::uint8_t*>(chunks_[kRing.device_slot(g)]->get());
}

void CudaScanner::finish_chunk(std::size_t g, std::span<const StagedPiece> pieces) {
  const std::size_t hs = kRing.host_slot(g), ds = kRing.device_slot(g);
  // The pinned table was last copied by chunk g - 3: wait for that copy
  // (long done in practice) before writing over it.
  wait_event(copied_[hs]->get(), gpu_, "a chunk's copy to the device", hung_);
  auto* base = static_cast<std::uint8_t*>(chunks_[ds]->get());
  auto* table = tables_[hs]->get<Segment>();
  std::uint64_t tiles = 0;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const StagedPiece& p = pieces[i];
    const auto addr = reinterpret_cast<std::uint64_t>(base + p.staging_offset);
    table[i] = {addr, p.count, tiles, p.tensor, static_cast<std::uint8_t>(p.dtype),
                static_cast<std::uint8_t>(p.swap), {}};
    tiles += tiles_of(addr, p.count * dtype_size(p.dtype));
  }
  table[pieces.size()] = {0, 0, tiles, 0, 0, 0, {}};
  auto* dev_table = static_cast<Segment*>(dev_tables_[ds]->get());
  check(cudaMemcpyAsync(dev_table, table, (pieces.size() + 1) * sizeof(Segment),
                        cudaMemcpyHostToDevice, copy()),
        gpu_, "cudaMemcpyAsync(segment table)");
  check(cudaEventRecord(copied_[hs]->get(), copy()), gpu_, "cudaEventRecord");
  check(cudaStreamWaitEvent(compute(), copied_[hs]->get(), 0), gpu_, "cudaStreamWaitEvent");
  launch_or_throw(dev_table, static_cast<std::uint32_t>(pieces.size()), tiles, compute());
  check(cudaEventRecord(scanned_[ds]->get(), compute()), gpu_, "cudaEventRecord");
}

/// After a failure: let queued work finish (within the deadline) before
/// the buffers are reused or freed; if it does not, the scanner is hung.
void CudaScanner::drain() noexcept {
  if (hung_) return;  // a deadline already passed: do not wait again
  try {
    for (cudaStream_t s : {copy(), compute()}) {
      check(cudaEventRecord(finished_->get(), s), gpu_, "cudaEventRecord");
      wait_event(finished_->get(), gpu_, "draining the scan after an error", hung_);
    }
  } catch (...) {
  }
}

}  // namespace cuda_scan

using namespace cuda_scan;

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
  if (!slot->scanner) slot->scanner = std::make_unique<CudaScanner>(device, FileReader::pread);
  return slot->scanner->scan_resident(data, count, dtype, static_cast<cudaStream_t>(stream));
}

std::unique_ptr<Scanner> make_cuda_scanner(std::string* why_not, int ordinal, FileReader reader) {
  const CudaStatus status = probe_cuda();
  if (!status.usable) {
    if (why_not) *why_not = status.error.empty() ? "no usable CUDA device" : status.error;
    return nullptr;
  }
  // A bad --gpu is the user's to fix, not a reason to fall back: it throws.
  const int device = choose_scan_gpu(ordinal, status.device_count, Env::from_process()).ordinal;
  try {
    const DeviceScope scope(device);
    return std::make_unique<CudaScanner>(device, reader);
  } catch (const Error& e) {
    if (why_not) *why_not = e.one_line();
    return nullptr;
  }
}

}  // namespace gpudiag::numerics
