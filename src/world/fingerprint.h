// A rank's fingerprint: what should agree across a job and often does not
// (issue 16): the kernel, the GPU and its driver, the libnccl that is loaded,
// the NCCL plugins NCCL would load, the transport environment (NCCL_*, CUDA_*,
// UCX_*, FI_*, OMPI_MCA_* transports, TORCH_NCCL_*), InfiniBand/RoCE ports,
// NIC MTUs, the /dev/shm size and the memlock limit, the GPU's persistence
// mode, ECC mode and clocks (NVML, world/nvml.h), the IOMMU and PCIe ACS
// above the GPU (world/pcie.h).
//
// A fingerprint is a flat map of short field names to short strings, so that
// comparing two is comparing maps (world/fingerprint_compare.h) and a peer's
// fingerprint can be read defensively: from_json never throws, keeps at most
// kMaxFields fields and truncates every value. Readers take their roots
// (sysfs, the ld cache, /dev/shm) as parameters so tests feed captured trees;
// anything that cannot be read is "unknown", never an error.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "util/env.h"

namespace gpudiag {

inline constexpr std::size_t kMaxFields = 256;     ///< per fingerprint
inline constexpr std::size_t kMaxEnvFields = 128;  ///< environment variables kept
inline constexpr std::size_t kMaxKeyChars = 96;
inline constexpr std::size_t kMaxValueChars = 256;
inline constexpr std::size_t kMaxPorts = 32;  ///< InfiniBand/RoCE ports
inline constexpr std::size_t kMaxNics = 64;

struct Fingerprint {
  /// "kernel" -> "6.1.0-18-amd64", "env.NCCL_SOCKET_IFNAME" -> "eth0",
  /// "plugin.net" -> "/opt/x/libnccl-net.so" or "not found", ...
  std::map<std::string, std::string> fields;
  bool empty() const { return fields.empty(); }
  /// "unknown" (or "unset" for env.*) when the field is absent.
  std::string get(const std::string& key) const;
};

void to_json(nlohmann::json& j, const Fingerprint& f);
/// Never throws: keeps the string fields it can, bounded (a peer's record).
void from_json(const nlohmann::json& j, Fingerprint& f);

/// Fields that are the host's (compared between hosts); the rest are the
/// rank's own (compared between ranks).
bool is_host_field(const std::string& key);

/// Environment variables that belong in a fingerprint (the per-rank ones,
/// such as CUDA_VISIBLE_DEVICES, do not).
bool is_fingerprint_env(const std::string& name);

/// "name: state, rate, link layer" per InfiniBand/RoCE port under
/// `sys_root`/class/infiniband: key "ib.mlx5_0/1", value "ACTIVE, 200 Gb/sec
/// (4X HDR), InfiniBand". Empty when there are none.
std::map<std::string, std::string> read_ib_ports(const std::string& sys_root);

/// NIC name -> MTU under `sys_root`/class/net (key "nic.eth0.mtu").
std::map<std::string, std::string> read_nic_mtus(const std::string& sys_root);

/// Where the dynamic loader would find `name`: a name with a '/' as is (if
/// it exists), else LD_LIBRARY_PATH, the ld cache file, then `default_dirs`.
/// "" when not found.
std::string resolve_library(const std::string& name, const std::string& ld_library_path,
                            const std::string& ld_cache,
                            const std::vector<std::string>& default_dirs);

/// What collect_fingerprint reads, with the real machine's places as defaults.
struct FingerprintSources {
  Env env;
  std::string sys_root = "/sys";
  std::string ld_cache = "/etc/ld.so.cache";
  std::string shm_path = "/dev/shm";
  std::vector<std::string> default_dirs = {"/lib64", "/usr/lib64", "/lib", "/usr/lib"};
  std::string host;
  std::string nccl_path, nccl_version;  ///< the loaded libnccl ("" none)
  /// The GPU, where CUDA is usable ("" = none).
  std::string gpu_model, gpu_count, gpu_bus_id, gpu_memory, gpu_driver;
  bool read_process_limits = true;  ///< kernel (uname), memlock (getrlimit)
  /// The GPU's NVML fields (world/nvml.h read_nvml_fields); empty: not read.
  std::map<std::string, std::string> nvml;
};

Fingerprint collect_fingerprint(const FingerprintSources& s);

/// The real sources of this process: probes CUDA (GPU `gpu_ordinal`, -1 none
/// chosen) and the libnccl that load_nccl(nccl_lib) loads (once a process,
/// shared with the NCCL backend; never initialised).
FingerprintSources live_sources(const Env& env, const std::string& host, int gpu_ordinal,
                                const std::string& nccl_lib);

}  // namespace gpudiag
