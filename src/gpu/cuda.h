// The CUDA runtime behind a plain C++ header: probing, device identity,
// device buffers and streams. Nothing here includes a CUDA header, so the rest
// of gpudiag builds and tests with a plain C++ compiler; a build without CUDA
// links cuda_stub.cpp, whose probe says so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace gpudiag {

/// What the CUDA runtime says about this machine. Never throws.
struct CudaStatus {
  bool built_with_cuda = false;
  bool usable = false;       ///< a driver answered and at least one device is visible
  int device_count = 0;
  int runtime_version = 0;   ///< e.g. 13000
  int driver_version = 0;    ///< 0 when no driver is installed
  std::string error;         ///< why not usable, with a remedy
};
CudaStatus probe_cuda();

/// 13000 -> "13.0"; 0 -> "none".
std::string cuda_version_string(int v);

struct GpuInfo {
  int ordinal = -1;
  std::string name;
  std::string pci_bus_id;    ///< "0000:1B:00.0"
  std::string uuid;          ///< "GPU-8f2c..."
  std::uint64_t total_bytes = 0;
  std::uint64_t free_bytes = 0;
  int cc_major = 0, cc_minor = 0;
};
/// Identity of device `ordinal` (after CUDA_VISIBLE_DEVICES). Throws gpudiag::Error.
GpuInfo gpu_info(int ordinal);

/// Makes `ordinal` the calling thread's current device. Throws gpudiag::Error.
void set_device(int ordinal);

/// Device memory, freed on destruction.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes);  ///< throws gpudiag::Error naming the size
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// A non-blocking CUDA stream; `handle()` is a cudaStream_t.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* handle() const { return stream_; }
  /// True once all work queued on the stream finished; throws on a CUDA error.
  bool done() const;

 private:
  void* stream_ = nullptr;
};

void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);

/// Fills `words` 32-bit words at `dst` with pattern_word(i, seed) on the device,
/// then counts the words that differ; returns that count (0 = memory healthy).
/// Synchronous; throws gpudiag::Error on a CUDA error.
std::uint64_t fill_and_verify_pattern(void* dst, std::size_t words, std::uint32_t seed);

/// The pattern the kernels write, for checking a copy on the host.
constexpr std::uint32_t pattern_word(std::uint64_t i, std::uint32_t seed) {
  return static_cast<std::uint32_t>(i * 2654435761u) ^ seed ^ static_cast<std::uint32_t>(i >> 32);
}

}  // namespace gpudiag
