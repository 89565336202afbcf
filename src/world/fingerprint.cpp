// Collecting a rank's fingerprint (fingerprint.h). Every read is bounded: a
// sysfs file is read up to kMaxValueChars bytes, directory listings stop at
// kMaxPorts/kMaxNics entries, names outside [A-Za-z0-9_.:-] are skipped,
// values with control bytes have them replaced, and the ld cache is read up
// to 16 MiB. The plugin names follow NCCL's own (src/plugin/*): for a kind K
// (net, tuner, profiler) NCCL_K_PLUGIN=none disables it; NCCL_K_PLUGIN=x
// tries libnccl-K-x.so, then x itself; unset, it tries libnccl-K.so. The ld
// cache is not parsed as a structure: its string table holds every cached
// library's full path, and the first path whose file name is the one sought
// is the one the loader would take (hardware-capability subdirectories aside).
#include "world/fingerprint.h"

#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "comm/nccl_api.h"
#include "gpu/cuda.h"
#include "util/secret.h"
#include "util/text.h"
#include "util/strings.h"
#include "world/nvml.h"
#include "world/pcie.h"

namespace gpudiag {

namespace fs = std::filesystem;

namespace {

/// A value as it may travel: escaped (util/text.h), at most kMaxValueChars
/// bytes of the original.
std::string clean(std::string_view v) {
  if (v.size() > kMaxValueChars) return clean_text(v.substr(0, kMaxValueChars - 3)) + "...";
  return clean_text(v);
}

bool safe_name(const std::string& n) {
  if (n.empty() || n.size() > 32 || n[0] == '.') return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
           c == '-';
  });
}

/// First line of a small file, trimmed; "" when unreadable.
std::string read_small(const fs::path& p) {
  std::ifstream f(p);
  if (!f) return "";
  std::string buf(kMaxValueChars, '\0');
  f.read(buf.data(), static_cast<std::streamsize>(buf.size()));
  buf.resize(static_cast<std::size_t>(f.gcount()));
  if (auto nl = buf.find('\n'); nl != std::string::npos) buf.resize(nl);
  return clean(trim(buf));
}

/// Sorted, safe entry names of a directory, at most `limit`.
std::vector<std::string> list_dir(const fs::path& dir, std::size_t limit) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (std::size_t seen = 0; !ec && it != end && seen < 4096; it.increment(ec), ++seen) {
    std::string n = it->path().filename().string();
    if (safe_name(n)) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::string or_unknown(const std::string& s) { return s.empty() ? "unknown" : s; }

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

/// The first full path in the ld cache whose file name is `name`.
std::string from_ld_cache(const std::string& name, const std::string& cache) {
  std::ifstream f(cache, std::ios::binary);
  if (!f || name.empty()) return "";
  constexpr std::size_t kMaxCache = 16u << 20;
  std::string data(kMaxCache, '\0');
  f.read(data.data(), static_cast<std::streamsize>(data.size()));
  data.resize(static_cast<std::size_t>(f.gcount()));
  const std::string tail = "/" + name;
  for (std::size_t pos = data.find(tail); pos != std::string::npos;
       pos = data.find(tail, pos + 1)) {
    const std::size_t end = pos + tail.size();
    if (end < data.size() && data[end] != '\0') continue;  // a longer name
    const std::size_t start = data.rfind('\0', pos);
    const std::string path = data.substr(start == std::string::npos ? 0 : start + 1,
                                         end - (start == std::string::npos ? 0 : start + 1));
    if (!path.empty() && path[0] == '/' && path.size() < 4096) return path;
  }
  return "";
}

/// NCCL's plugin of kind `kind` as the loader would find it: a path,
/// "not found" or "disabled (NCCL_K_PLUGIN=none)".
std::string plugin_field(const std::string& kind, const FingerprintSources& s,
                         const std::string& ld_path) {
  std::string var = "NCCL_" + kind + "_PLUGIN";
  std::transform(var.begin(), var.end(), var.begin(), ::toupper);
  std::vector<std::string> names;
  if (auto v = s.env.get(var); v && !v->empty()) {
    if (*v == "none") return "disabled (" + var + "=none)";
    if (v->find('/') == std::string::npos) names.push_back("libnccl-" + kind + "-" + *v + ".so");
    names.push_back(*v);
  } else {
    names.push_back("libnccl-" + kind + ".so");
  }
  for (const auto& n : names)
    if (auto p = resolve_library(n, ld_path, s.ld_cache, s.default_dirs); !p.empty()) return p;
  return "not found";
}

}  // namespace

std::string Fingerprint::get(const std::string& key) const {
  auto it = fields.find(key);
  if (it != fields.end()) return it->second;
  return key.starts_with("env.") ? "unset" : "unknown";
}

void to_json(nlohmann::json& j, const Fingerprint& f) { j = f.fields; }

void from_json(const nlohmann::json& j, Fingerprint& f) {
  f.fields.clear();
  if (!j.is_object()) return;
  // The fixed fields first, so a flood of env.* cannot push them out.
  for (const bool env : {false, true})
    for (const auto& [k, v] : j.items()) {
      if (f.fields.size() >= kMaxFields) return;
      if (k.starts_with("env.") != env || !v.is_string() || k.empty() || k.size() > kMaxKeyChars)
        continue;
      f.fields[clean(k)] = clean(v.get_ref<const std::string&>());
    }
}

bool is_host_field(const std::string& key) {
  return key == "kernel" || key == "gpu.driver" || key == "shm" || key == "memlock" ||
         key == "iommu" || key == "rdma.ports" || key.starts_with("ib.") || key.starts_with("nic.");
}

bool is_fingerprint_env(const std::string& n) {
  if (is_secret_name(n)) return false;  // a record travels to rank 0's report
  for (const char* p : {"NCCL_", "UCX_", "FI_", "TORCH_NCCL_"})
    if (n.starts_with(p)) return true;
  if (n.starts_with("CUDA_"))  // which GPUs a rank sees is its own
    return n != "CUDA_VISIBLE_DEVICES" && n != "CUDA_MPS_PIPE_DIRECTORY" &&
           n != "CUDA_MPS_LOG_DIRECTORY";
  if (n.starts_with("OMPI_MCA_")) {
    const std::string_view rest = std::string_view(n).substr(9);
    for (const char* p : {"btl", "pml", "mtl", "osc", "oob", "coll", "opal_cuda", "smsc",
                          "mpi_cuda", "opal_common_ucx"})
      if (rest.starts_with(p)) return true;
  }
  return false;
}

std::map<std::string, std::string> read_ib_ports(const std::string& sys_root) {
  std::map<std::string, std::string> out;
  const fs::path base = fs::path(sys_root) / "class" / "infiniband";
  for (const auto& dev : list_dir(base, kMaxPorts)) {
    for (const auto& port : list_dir(base / dev / "ports", kMaxPorts)) {
      if (out.size() >= kMaxPorts) return out;
      const fs::path p = base / dev / "ports" / port;
      std::string state = read_small(p / "state");  // "4: ACTIVE"
      if (auto colon = state.find(": "); colon != std::string::npos)
        state = state.substr(colon + 2);
      out["ib." + dev + "/" + port] = or_unknown(state) + ", " +
                                      or_unknown(read_small(p / "rate")) + ", " +
                                      or_unknown(read_small(p / "link_layer"));
    }
  }
  return out;
}

std::map<std::string, std::string> read_nic_mtus(const std::string& sys_root) {
  std::map<std::string, std::string> out;
  const fs::path base = fs::path(sys_root) / "class" / "net";
  for (const auto& nic : list_dir(base, kMaxNics))
    out["nic." + nic + ".mtu"] = or_unknown(read_small(base / nic / "mtu"));
  return out;
}

std::string resolve_library(const std::string& name, const std::string& ld_library_path,
                            const std::string& ld_cache,
                            const std::vector<std::string>& default_dirs) {
  if (name.empty() || name.size() > 1024) return "";
  if (name.find('/') != std::string::npos) return is_file(name) ? name : "";
  int dirs = 0;
  for (const auto& dir : split(ld_library_path, ':')) {
    if (dir.empty() || ++dirs > 64) continue;
    if (const std::string p = dir + "/" + name; is_file(p)) return p;
  }
  if (auto p = from_ld_cache(name, ld_cache); !p.empty()) return p;
  for (const auto& dir : default_dirs)
    if (const std::string p = dir + "/" + name; is_file(p)) return p;
  return "";
}

Fingerprint collect_fingerprint(const FingerprintSources& s) {
  Fingerprint f;
  auto& m = f.fields;
  m["host"] = or_unknown(clean(s.host));
  if (s.read_process_limits) {
    struct utsname u {};
    m["kernel"] = uname(&u) == 0 ? clean(u.release) : "unknown";
    struct rlimit rl {};
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
      m["memlock"] = "unknown";
    else
      m["memlock"] = rl.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(rl.rlim_cur);
  }
  struct statvfs sv {};
  m["shm"] = statvfs(s.shm_path.c_str(), &sv) == 0
                 ? std::to_string(static_cast<std::uint64_t>(sv.f_blocks) * sv.f_frsize)
                 : "unknown";
  const bool gpu = !s.gpu_model.empty() || !s.gpu_count.empty();
  m["gpu.model"] = gpu ? or_unknown(clean(s.gpu_model)) : "none";
  m["gpu.count"] = gpu ? or_unknown(clean(s.gpu_count)) : "none";
  m["gpu.bus_id"] = gpu ? or_unknown(clean(s.gpu_bus_id)) : "none";
  m["gpu.memory"] = gpu ? or_unknown(clean(s.gpu_memory)) : "none";
  m["gpu.driver"] = gpu ? or_unknown(clean(s.gpu_driver)) : "none";
  for (const auto& [k, v] : s.nvml)
    if (k.starts_with("gpu.")) m[k] = clean(v);
  m["iommu"] = read_iommu(s.sys_root);
  if (gpu && !s.gpu_bus_id.empty()) {
    m["gpu.iommu"] = read_gpu_iommu(s.sys_root, s.gpu_bus_id);
    m["pcie.acs"] = clean(read_gpu_acs(s.sys_root, s.gpu_bus_id));
  }
  m["nccl.path"] = s.nccl_path.empty() ? "none" : clean(s.nccl_path);
  m["nccl.version"] = s.nccl_version.empty() ? "none" : clean(s.nccl_version);
  const std::string ld_path = s.env.get_or("LD_LIBRARY_PATH", "");
  for (const char* kind : {"net", "tuner", "profiler"})
    m[std::string("plugin.") + kind] = clean(plugin_field(kind, s, ld_path));
  std::size_t envs = 0, skipped = 0;
  for (const auto& [k, v] : s.env.all()) {
    if (!is_fingerprint_env(k)) continue;
    if (envs >= kMaxEnvFields || k.size() + 4 > kMaxKeyChars) {
      ++skipped;
      continue;
    }
    m["env." + k] = clean(v);
    ++envs;
  }
  if (skipped) m["env_skipped"] = std::to_string(skipped);
  const auto ib = read_ib_ports(s.sys_root);
  for (auto& [k, v] : ib) m[k] = v;
  // Each port is compared only between hosts that have it: the count says
  // when a host lacks one the others have (a dead or unseated HCA).
  m["rdma.ports"] = std::to_string(ib.size());
  for (auto& [k, v] : read_nic_mtus(s.sys_root)) {
    if (m.size() >= kMaxFields) break;
    m[k] = v;
  }
  return f;
}

FingerprintSources live_sources(const Env& env, const std::string& host, int gpu_ordinal,
                                const std::string& nccl_lib) {
  FingerprintSources s;
  s.env = env;
  s.host = host;
  // The loader's own search (comm/nccl_loader.cpp), cached: one dlopen a
  // process, shared with the NCCL backend. Never initialised here.
  const NcclLibrary& nccl = load_nccl(nccl_lib);
  if (nccl.version > 0) {
    s.nccl_path = nccl.path;
    s.nccl_version = nccl_version_string(nccl.version);
  }
  const CudaStatus cuda = probe_cuda();
  if (!cuda.usable) return s;
  s.gpu_count = std::to_string(cuda.device_count);
  s.gpu_driver = cuda_version_string(cuda.driver_version);
  if (gpu_ordinal < 0) return s;
  try {
    const GpuInfo g = gpu_info(gpu_ordinal);
    s.gpu_model = g.name;
    s.gpu_bus_id = g.pci_bus_id;
    s.gpu_memory = std::to_string(g.total_bytes);
    // NVML, where the driver has it: absent is "unknown", never an error.
    s.nvml = read_nvml_fields(load_nvml(), g.pci_bus_id);
  } catch (const std::exception&) {
    // Absent is "unknown", never an error: the device phase reports GPU trouble.
  }
  return s;
}

}  // namespace gpudiag
