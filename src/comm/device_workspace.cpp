// The device workspace (see nccl.h): device buffers whose uploads and
// downloads go on the communicator's stream and are waited for there.
//
// Why not cudaMemcpy: it runs on the legacy default stream, which a
// cudaStreamNonBlocking stream (NCCL's) is not ordered after, and from
// pageable memory it may return before the copy lands. A collective could
// then read stale data ("wrong values") and a host read could miss what
// NCCL wrote. On the one stream every copy is ordered with the collectives.
#include "comm/nccl.h"
#include "gpu/cuda.h"
#include "util/error.h"

namespace gpudiag {

namespace {

/// A copy that takes longer than this is a hung GPU, not a slow one.
constexpr double kCopyTimeoutS = 60;

class DeviceWorkspace : public Workspace {
 public:
  DeviceWorkspace(const CudaOps& cuda, void* stream, std::shared_ptr<void> owner)
      : cuda_(cuda), stream_(stream), owner_(std::move(owner)) {}

  float* allocate(std::size_t count) override {
    blocks_.push_back(std::make_unique<DeviceBuffer>(count * sizeof(float)));
    return static_cast<float*>(blocks_.back()->get());
  }
  void release(float* block) override {
    std::erase_if(blocks_, [&](const auto& b) { return b->get() == block; });
  }
  void upload_bytes(void* dst, const void* src, std::size_t bytes) override {
    copy(dst, src, bytes, CudaOps::kHostToDevice, "copy to the GPU");
  }
  void download_bytes(void* dst, const void* src, std::size_t bytes) override {
    copy(dst, src, bytes, CudaOps::kDeviceToHost, "copy from the GPU");
  }

 private:
  void copy(void* dst, const void* src, std::size_t bytes, int kind, const char* what) {
    const std::string label = std::string(what) + " of " + std::to_string(bytes) + " bytes";
    const int e = cuda_.memcpy_async(dst, src, bytes, kind, stream_);
    if (e != CudaOps::kSuccess)
      throw Error(ExitCode::broken, label + " failed: " + cuda_error_text(cuda_, e),
                  "check the GPU with nvidia-smi and dmesg (Xid errors)");
    // The host buffer is the caller's: it must not be touched (download) or
    // freed (upload) before the copy is done.
    wait_stream(cuda_, stream_, label, Deadline::after_seconds(kCopyTimeoutS));
  }

  const CudaOps& cuda_;
  void* stream_;
  std::shared_ptr<void> owner_;
  std::vector<std::unique_ptr<DeviceBuffer>> blocks_;
};

}  // namespace

std::unique_ptr<Workspace> make_device_workspace(const CudaOps& cuda, void* stream,
                                                 std::shared_ptr<void> owner) {
  return std::make_unique<DeviceWorkspace>(cuda, stream, std::move(owner));
}

}  // namespace gpudiag
