// What to try after an NCCL error: the likely causes in order, read from the
// result code and NCCL's own last-error text (which names the failing
// syscall or transport), plus this host's /dev/shm size. NCCL's last error
// is the process's, not the communicator's: a text unchanged since before
// the failing call is quoted as possibly stale and left out of the remedy.
//
// ncclSystemError covers very different faults: a /dev/shm too small for
// the shared-memory transport (Docker's default is 64 MB) fails as a system
// error too, and a firewall remedy would send the user the wrong way.
#include <sys/statvfs.h>

#include <algorithm>
#include <cctype>

#include "comm/nccl.h"
#include "util/strings.h"

namespace gpudiag {

namespace {

bool mentions(const std::string& text, std::initializer_list<const char*> words) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* w : words)
    if (lower.find(w) != std::string::npos) return true;
  return false;
}

/// Below this, /dev/shm is worth naming: NCCL's shared-memory buffers for a
/// node of 8 GPUs take several hundred MB.
constexpr std::uint64_t kSmallShm = 512ull << 20;

}  // namespace

std::uint64_t dev_shm_bytes() {
  struct statvfs s {};
  if (statvfs("/dev/shm", &s) != 0) return 0;
  return static_cast<std::uint64_t>(s.f_blocks) * s.f_frsize;
}

std::string nccl_remedy(int result, const std::string& last_error, std::uint64_t shm) {
  const std::string shm_note =
      shm > 0 && shm < kSmallShm ? " (/dev/shm here is " + human_bytes(shm) + ")" : "";
  const bool shm_error = mentions(last_error, {"/dev/shm", "shared memory", "shm"});
  if (shm_error)
    return "/dev/shm is too small or full" + shm_note +
           ": run the container with --shm-size=1g or --ipc=host; NCCL_SHM_DISABLE=1 confirms it";
  switch (result) {
    case nccl_abi::kSystemError:
    case nccl_abi::kRemoteError: {
      std::string r;
      if (mentions(last_error, {"connect", "socket", "timed out", "refused", "unreachable"}))
        r = "a peer could not be reached: set NCCL_SOCKET_IFNAME to the interface the hosts "
            "share, and check firewalls between them";
      else if (mentions(last_error, {"ibv_", "infiniband", "mlx5", "roce"}))
        r = "an InfiniBand/RoCE error: check the ports (ibstat), NCCL_IB_HCA, and the subnet "
            "manager; NCCL_IB_DISABLE=1 tells whether the socket path works";
      else
        r = "a system call failed: rerun with --nccl-debug info to see which; then check "
            "/dev/shm" + shm_note + ", NCCL_SOCKET_IFNAME and firewalls between the hosts";
      return r;
    }
    case nccl_abi::kUnhandledCudaError:
      return "a CUDA call inside NCCL failed: check the GPU with nvidia-smi and dmesg (Xid "
             "errors); on an NVSwitch system check that nvidia-fabricmanager is running";
    case nccl_abi::kInvalidUsage:
      return "two ranks on one GPU, or world sizes that differ between ranks";
    case nccl_abi::kInternalError:
      return "rerun with --nccl-debug info; an internal NCCL error is often a plugin "
             "(NCCL_NET_PLUGIN) or an NCCL version that differs between ranks";
    default:
      return "rerun with --nccl-debug info to see NCCL's own explanation";
  }
}

std::string nccl_last_error_now(const NcclApi& nccl) {
  const char* t = nccl.GetLastError ? nccl.GetLastError(nullptr) : nullptr;
  return t ? t : "";
}

NcclLastError nccl_last_error(const NcclApi& nccl, const std::string& before) {
  NcclLastError out;
  out.text = nccl_last_error_now(nccl);
  out.fresh = !out.text.empty() && out.text != before;
  return out;
}

std::string nccl_failure_text(const NcclApi& nccl, int result, const NcclLastError& last) {
  const char* s =
      nccl.GetErrorString ? nccl.GetErrorString(static_cast<nccl_abi::Result>(result)) : nullptr;
  std::string out = s ? s : "NCCL error " + std::to_string(result);
  if (last.text.empty()) return out;
  if (last.fresh) return out + ": " + last.text;
  return out +
         " (NCCL's last error (process-wide), unchanged since before this call, so perhaps "
         "another failure's: " +
         last.text + ")";
}

std::string nccl_failure_remedy(int result, const NcclLastError& last) {
  return nccl_remedy(result, last.fresh ? last.text : "", dev_shm_bytes());
}

}  // namespace gpudiag
