// The CUDA scanner's class, shared by its three host files:
//   - cuda_scanner.cpp: construction, scan() choosing the file reader, the
//     statistics of device memory, and queuing one chunk's table and kernel;
//   - cuda_pread_pipeline.cpp: the pread reader (reader threads fill fixed
//     parts of pinned staging buffers, a copy starts per filled part);
//   - cuda_window_pipeline.cpp: the windows reader (read-only windows of the
//     file mappings registered with cudaHostRegister, copied from by DMA).
// Both readers feed the same ring of device buffers: chunk g uses device
// buffer g % 2 and pinned table g % 3 (scan_plan.h: Ring); a copy stream
// moves bytes in, a compute stream scans them, each ordered after the other
// by events. Included only by CUDA builds' host files.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/cuda.h"
#include "numerics/scan/cuda_resources.h"
#include "numerics/scan/cuda_scan_kernel.h"
#include "numerics/scan/scan_plan.h"
#include "numerics/scan/scanner.h"
#include "numerics/scan/staged_reads.h"
#include "numerics/scan/window_plan.h"

namespace gpudiag::numerics::cuda_scan {

inline constexpr std::size_t kChunkBytes = std::size_t{64} << 20;
inline constexpr std::size_t kMaxSegments = 16384;
inline constexpr Ring kRing{3, 2};
/// Reader threads of the pread path (at most one per hardware thread): a
/// pread from the page cache moves a few GB/s on one thread, a copy to the
/// device about 50, so many reads must be in flight.
inline constexpr unsigned kMaxReaders = 16;
/// A staging buffer is read and copied in parts of this size: the copy of a
/// part starts once it is read, not once the whole chunk is.
inline constexpr std::size_t kPartBytes = std::size_t{4} << 20;
inline constexpr std::size_t kPartsPerSlot = kChunkBytes / kPartBytes;
/// The windows reader: grid cells of 128 MiB, at most 4 registered at once.
inline constexpr std::uint64_t kWindowBytes = std::uint64_t{128} << 20;
inline constexpr std::size_t kLiveWindows = 4;

/// A window could not be registered: the scan runs again on the pread path.
struct RegistrationFailed {
  std::string why;
};

class CudaScanner final : public Scanner {
 public:
  CudaScanner(int device, FileReader reader);
  ~CudaScanner() override;

  std::vector<TensorStats> scan(std::span<const TensorView> views) override;
  std::string describe() const override;
  std::string reader() const override { return last_reader_; }

  /// Statistics of `n` elements of `t` already on this scanner's device at
  /// `x`, computed on the caller's stream `s` (after what was queued on it
  /// before) and waited for with the deadline. One call at a time.
  TensorStats scan_resident(const void* x, std::uint64_t n, DType t, cudaStream_t s);

 private:
  // cuda_scanner.cpp
  cudaStream_t copy() const { return static_cast<cudaStream_t>(copy_->handle()); }
  cudaStream_t compute() const { return static_cast<cudaStream_t>(compute_->handle()); }
  Accumulator* results() const { return static_cast<Accumulator*>(results_->get()); }
  void make_ring();
  void reserve_results(std::size_t n);
  void launch_or_throw(const Segment* table, std::uint32_t n, std::uint64_t tiles, cudaStream_t s);
  std::vector<TensorStats> scan_with(std::span<const TensorView> views, bool windows);
  /// Chunk g's device buffer, and the copy stream ordered after the scan of
  /// the chunk that used it last; call before queuing any of g's bytes.
  std::uint8_t* begin_chunk(std::size_t g);
  /// After g's bytes are queued: its segment table (pieces' staging offsets
  /// are offsets in the device buffer), the copies' event, the kernel.
  void finish_chunk(std::size_t g, std::span<const StagedPiece> pieces);
  void drain() noexcept;

  // cuda_pread_pipeline.cpp: chunks numbered from `first` in the ring.
  void run_pread(const std::vector<Chunk>& chunks, const StagingFiles& files, std::size_t first);

  // cuda_window_pipeline.cpp
  /// Empty when this GPU, driver and toolkit can register read-only host
  /// memory; else why not, for the log and reader().
  std::string windows_unsupported() const;
  void run_windows(const WindowPlan& plan, std::span<const MappedRange> mappings,
                   std::size_t first);

  int device_;
  GpuInfo info_;
  std::string gpu_;  ///< "NVIDIA H100 80GB HBM3 (device 0)", for errors
  int grid_ = 1;
  /// Why the windows reader is not used ("" while it is): asked for pread,
  /// unsupported here, or a registration failed in an earlier scan.
  std::string windows_why_not_;
  std::string last_reader_;
  // Held by pointer so a hung scanner can leak them (see the destructor).
  std::unique_ptr<Stream> copy_, compute_;
  std::vector<std::unique_ptr<Pinned>> staging_, tables_;
  std::vector<std::unique_ptr<Event>> copied_, scanned_;
  std::vector<std::vector<std::unique_ptr<Event>>> part_copied_;  ///< [host slot][part]
  std::vector<std::unique_ptr<DeviceBuffer>> chunks_, dev_tables_;
  std::unique_ptr<Event> finished_;
  std::unique_ptr<DeviceBuffer> results_, resident_dev_table_;
  std::unique_ptr<Pinned> results_host_, resident_table_;
  std::atomic<bool> hung_{false};  ///< set by reader threads too
};

}  // namespace gpudiag::numerics::cuda_scan
