// The scanner seam: turns tensor views into TensorStats. The CPU backend
// (threads + vectorised loops) is always built; the CUDA backend (CUB
// reductions in cuda_scanner.cu) only when the toolkit is found, and this
// header stays plain C++ either way.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "numerics/scan/tensor.h"
#include "numerics/scan/tensor_stats.h"

namespace gpudiag::numerics {

class Scanner {
 public:
  virtual ~Scanner() = default;
  /// Statistics of each view, in the same order. Views may point anywhere in
  /// host memory (memory-mapped files); a backend copies what it needs.
  virtual std::vector<TensorStats> scan(std::span<const TensorView> tensors) = 0;
  /// One line for logs and JSON: "cpu (8 threads)", "cuda (NVIDIA H100 ...)".
  virtual std::string describe() const = 0;
  /// How the last scan brought file bytes in, for logs and benches ("windows:
  /// ...", "pread: ..."); empty for a backend that reads the mapping itself.
  virtual std::string reader() const { return {}; }
};

enum class ScanDevice { cpu, cuda, automatic };

/// `threads` == 0: one per hardware thread.
std::unique_ptr<Scanner> make_cpu_scanner(unsigned threads);

/// The CPU scanner's work as a call: for each view, its statistics into
/// stats[i] when `stats` is not null, and its replica checksum (checksum.h)
/// into checksums[i] when `checksums` is not null, both in one pass over the
/// memory; `threads` == 0: one per hardware thread.
void scan_host(std::span<const TensorView> tensors, unsigned threads, TensorStats* stats,
               std::uint64_t* checksums);

/// How the CUDA scanner brings tensors of mapped files to the GPU
/// (docs/scan.md): `windows` registers read-only windows of the mapping
/// (cudaHostRegister) and copies from the page cache by DMA where the GPU and
/// driver allow it, falling back to `pread` (reader threads into pinned
/// buffers, then a copy) where they do not; `pread` always reads.
enum class FileReader { windows, pread };

/// The CUDA scanner on device `gpu` (-1: the local rank's, see scan_gpu.h),
/// or nullptr with `*why_not` set when this build has no CUDA or no usable
/// device is visible. Throws UsageError when `gpu` is not a visible device.
std::unique_ptr<Scanner> make_cuda_scanner(std::string* why_not, int gpu = -1,
                                           FileReader reader = FileReader::windows);

/// Statistics of `count` elements of `dtype` in device memory of CUDA device
/// `device`, computed on `stream` (a cudaStream_t; null: the legacy default
/// stream) after what is already queued there, waited for with a deadline.
/// Throws Error (a CUDA error, no such device, a build without CUDA) or
/// TimeoutError. For the C ABI (capi/gpudiag/scan.h).
TensorStats scan_device_buffer(const void* data, std::uint64_t count, DType dtype, void* stream,
                               int device);

/// Replica checksums (checksum.h) into checksums[i], and statistics into
/// stats[i] when `stats` is not null, of tensors in device memory of CUDA
/// device `device` (each view's data a device address, little-endian): one
/// launch of the checksum kernel for the whole batch (and one of the
/// statistics kernel), on `stream` after what is queued there, waited for with
/// a deadline. Throws as scan_device_buffer does. For the C ABI.
void scan_device_tensors(std::span<const TensorView> tensors, void* stream, int device,
                         TensorStats* stats, std::uint64_t* checksums);

/// --device auto's measurement: at most four 64 MiB chunks of the data, each
/// scanner warmed up on the first 16 MiB first; below 64 MiB nothing is
/// timed and the CPU scans (a GPU's set-up would outweigh the scan).
inline constexpr std::uint64_t kAutoSampleBytes = std::uint64_t{256} << 20;
inline constexpr std::uint64_t kAutoWarmBytes = std::uint64_t{16} << 20;
inline constexpr std::uint64_t kAutoMinBytes = std::uint64_t{64} << 20;

/// cpu, cuda (UsageError when unavailable), or automatic: the CPU when no
/// GPU is usable or `sample` is under kAutoMinBytes, else whichever of the
/// two scans `sample` faster (both are timed on it after a warm-up;
/// scan_plan.h: choose_by_rates), said at info level. `gpu` as for
/// make_cuda_scanner; the CPU ignores it.
std::unique_ptr<Scanner> make_scanner(ScanDevice device, unsigned threads, int gpu = -1,
                                      std::span<const TensorView> sample = {});

/// The first `max_bytes` of `views` (the last view cut short), for
/// make_scanner's measurement.
std::vector<TensorView> sample_of(std::span<const TensorView> views, std::uint64_t max_bytes);

}  // namespace gpudiag::numerics
