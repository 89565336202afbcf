// explain_cuda_failure(): see cuda_diagnosis.h. Error codes are cudaError_t
// values, stable across CUDA releases, written here as numbers so the file
// builds without CUDA and its tests run anywhere.
#include "gpu/cuda_diagnosis.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

namespace gpudiag {

namespace {

constexpr int kInitializationError = 3;
constexpr int kInsufficientDriver = 35;
constexpr int kDevicesUnavailable = 46;
constexpr int kNoDevice = 100;
constexpr int kSystemNotReady = 802;
constexpr int kSystemDriverMismatch = 803;
constexpr int kCompatNotSupported = 804;

std::string version(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string fabric_manager_hint(const CudaFacts& f) {
  return "start nvidia-fabricmanager (systemctl status nvidia-fabricmanager; its version must "
         "match the driver's" +
         (f.driver_release.empty() ? std::string() : " " + f.driver_release) + ")";
}

std::string driver_name(const CudaFacts& f) {
  return "the NVIDIA driver" + (f.driver_release.empty() ? std::string() : " " + f.driver_release);
}

}  // namespace

std::string min_driver_for(int cuda_major) {
  switch (cuda_major) {
    case 11: return "450";
    case 12: return "525";
    case 13: return "580";
    default: return "";
  }
}

std::string explain_cuda_failure(const CudaFacts& f) {
  const std::string code = f.error_name.empty() ? "" : " (" + f.error_name + ")";
  const int built_major = f.runtime_cuda / 1000;
  if (f.driver_cuda == 0)
    return "no NVIDIA driver: libcuda.so.1 not found" + code +
           (f.device_nodes ? std::string(", although /dev/nvidia0 exists") : std::string()) +
           "; try: " +
           (f.device_nodes ? "in a container, start it with the NVIDIA container toolkit (--gpus "
                             "all) so the driver's libraries are mounted; else "
                           : "") +
           "install the NVIDIA driver and check nvidia-smi";
  if (f.error == kInsufficientDriver || f.driver_cuda / 1000 < built_major) {
    const std::string need = min_driver_for(built_major);
    return driver_name(f) + " supports CUDA " + version(f.driver_cuda) +
           ", but this gpudiag was built with CUDA " + version(f.runtime_cuda) + ", which needs " +
           (need.empty() ? "a newer driver" : "driver " + need + " or newer") + code +
           "; try: build gpudiag with a CUDA " + std::to_string(f.driver_cuda / 1000) +
           ".x toolkit (CUDA_HOME=/usr/local/cuda-" + version(f.driver_cuda) +
           " scripts/build.sh), or install the cuda-compat-" + std::to_string(built_major) +
           " forward-compatibility package and put its lib folder on LD_LIBRARY_PATH";
  }
  switch (f.error) {
    case kSystemNotReady:
      return "the GPUs' NVSwitch fabric is not initialised" + code + "; try: " +
             fabric_manager_hint(f) + ", then nvidia-smi -q | grep -A2 -i fabric";
    case kSystemDriverMismatch:
      return "the driver's kernel module and its user-space library differ" + code +
             "; try: reboot after the driver upgrade, or compare cat /proc/driver/nvidia/version "
             "with the libcuda.so on LD_LIBRARY_PATH";
    case kCompatNotSupported:
      return "the CUDA forward-compatibility package on LD_LIBRARY_PATH does not support this "
             "GPU" + code +
             "; try: remove cuda-compat from LD_LIBRARY_PATH and build gpudiag with the CUDA "
             "toolkit the driver supports";
    case kDevicesUnavailable:
      return "the GPUs are busy or held in exclusive-process mode" + code +
             "; try: nvidia-smi shows which process holds them; nvidia-smi -q -d COMPUTE shows "
             "the compute mode";
    case kNoDevice:
    case 0:
      return "no CUDA device visible (" + f.visible + ")" + code +
             "; try: check that the job was given GPUs (srun --gpus-per-task, docker --gpus), "
             "that CUDA_VISIBLE_DEVICES is not empty, and nvidia-smi" +
             (f.nvswitch ? "; on this NVSwitch node also " + fabric_manager_hint(f) : "");
    default:
      break;
  }
  // Initialisation errors with no better code: on an NVSwitch node the
  // fabric manager is the usual cause, then the driver's own log.
  std::string hints;
  if (f.nvswitch) hints = fabric_manager_hint(f) + "; then ";
  hints += "look for Xid or NVRM errors in dmesg, and check nvidia-smi";
  return std::string(f.error == kInitializationError ? "CUDA could not initialise"
                                                     : "CUDA failed to start") +
         code + "; try: " + hints;
}

void read_host_gpu_facts(CudaFacts& f) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::ifstream v("/proc/driver/nvidia/version");
  std::string line;
  if (v && std::getline(v, line)) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"((\d{3,}\.\d+(\.\d+)?))"))) f.driver_release = m[1];
  }
  f.device_nodes = fs::exists("/dev/nvidia0", ec);
  f.nvswitch = fs::exists("/dev/nvidia-nvswitchctl", ec) ||
               (fs::is_directory("/proc/driver/nvidia-nvswitch/devices", ec) &&
                !fs::is_empty("/proc/driver/nvidia-nvswitch/devices", ec));
  const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
  f.visible = cvd ? "CUDA_VISIBLE_DEVICES=" + std::string(cvd) : "CUDA_VISIBLE_DEVICES unset";
}

}  // namespace gpudiag
