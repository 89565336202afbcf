// gpu/cuda.h over the CUDA runtime API, linked statically (cudart_static):
// the binary needs only the driver (libcuda.so.1) at run time, and says so
// through probe_cuda() when that is missing or too old.
#include <cuda_runtime.h>

#include <cstdio>

#include "gpu/cuda.h"
#include "gpu/cuda_diagnosis.h"
#include "util/error.h"

namespace gpudiag {

namespace {

void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  std::string remedy;
  if (e == cudaErrorMemoryAllocation) remedy = "free GPU memory (nvidia-smi shows who holds it) or lower --mem";
  if (e == cudaErrorInsufficientDriver || e == cudaErrorNoDevice)
    remedy = "install an NVIDIA driver that supports CUDA " +
             cuda_version_string(CUDART_VERSION) + " and check nvidia-smi";
  if (e == cudaErrorSystemNotReady)
    remedy = "start nvidia-fabricmanager (systemctl status nvidia-fabricmanager)";
  if (remedy.empty()) remedy = "check the GPU with nvidia-smi and dmesg (Xid errors)";
  throw Error(ExitCode::broken, std::string(call) + " failed: " + cudaGetErrorName(e) + " (" +
                                    cudaGetErrorString(e) + ")",
              remedy);
}

std::string uuid_string(const cudaUUID_t& u) {
  char buf[64];
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  std::snprintf(buf, sizeof buf,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}

}  // namespace

CudaStatus probe_cuda() {
  CudaStatus s;
  s.built_with_cuda = true;
  s.runtime_version = CUDART_VERSION;  // the runtime is linked in: what it was built as
  if (cudaDriverGetVersion(&s.driver_version) != cudaSuccess) s.driver_version = 0;
  cudaError_t e = cudaGetDeviceCount(&s.device_count);
  if (e == cudaSuccess && s.device_count > 0) {
    s.usable = true;
    return s;
  }
  CudaFacts f;
  f.error = e;
  if (e != cudaSuccess) f.error_name = cudaGetErrorName(e);
  f.driver_cuda = s.driver_version;
  f.runtime_cuda = s.runtime_version;
  read_host_gpu_facts(f);
  s.error = explain_cuda_failure(f);
  s.device_count = 0;
  cudaGetLastError();  // clear the sticky error
  return s;
}

GpuInfo gpu_info(int ordinal) {
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, ordinal), "cudaGetDeviceProperties");
  GpuInfo g;
  g.ordinal = ordinal;
  g.name = p.name;
  char bus[32] = {};
  check(cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal), "cudaDeviceGetPCIBusId");
  g.pci_bus_id = bus;
  g.uuid = uuid_string(p.uuid);
  g.total_bytes = p.totalGlobalMem;
  g.cc_major = p.major;
  g.cc_minor = p.minor;
  int current = 0;
  if (cudaGetDevice(&current) == cudaSuccess && current == ordinal) {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) == cudaSuccess) g.free_bytes = free;
  }
  return g;
}

void set_device(int ordinal) { check(cudaSetDevice(ordinal), "cudaSetDevice"); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    std::size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw Error(ExitCode::broken,
                "cudaMalloc(" + std::to_string(bytes >> 20) + " MiB) failed: " + cudaGetErrorName(e) +
                    " (" + std::to_string(free >> 20) + " MiB free of " +
                    std::to_string(total >> 20) + " MiB)",
                "another process may hold the GPU (nvidia-smi), or lower --mem");
  }
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

Stream::Stream() {
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
}

Stream::~Stream() {
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

bool Stream::done() const {
  cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(stream_));
  if (e == cudaErrorNotReady) return false;
  check(e, "cudaStreamQuery");
  return true;
}

void copy_to_device(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy(host to device)");
}

void copy_to_host(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy(device to host)");
}

std::string cuda_version_string(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace gpudiag
