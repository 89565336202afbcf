#include "world/info.h"

#include <unistd.h>

#include <utility>

#include "comm/mpi.h"
#include "comm/nccl_api.h"
#include "comm/nccl_env.h"
#include "gpu/cuda.h"
#include "hw/evidence.h"
#include "util/error.h"
#include "util/secret.h"
#include "util/text.h"
#include "util/strings.h"
#include "world/discovery.h"
#include "world/fingerprint.h"
#include "world/gpu_choice.h"
#include "world/host.h"

namespace gpudiag {

bool is_relevant_env(const std::string& n) {
  static const char* prefixes[] = {"NCCL_",        "CUDA_VISIBLE_DEVICES", "MASTER_",
                                   "GPUDIAG_",     "OMPI_COMM_WORLD_",     "MV2_COMM_WORLD_",
                                   "PMI_RANK",     "PMI_SIZE",             "PMIX_RANK",
                                   "MPI_LOCAL",    "SLURM_PROCID",         "SLURM_LOCALID",
                                   "SLURM_NTASKS", "SLURM_STEP_",          "SLURM_JOB_ID",
                                   "SLURM_NODEID", "TORCHELASTIC_",        "UCX_TLS",
                                   "UCX_NET_DEVICES"};
  for (const char* p : prefixes)
    if (n.starts_with(p)) return true;
  return n == "RANK" || n == "WORLD_SIZE" || n == "LOCAL_RANK" || n == "LOCAL_WORLD_SIZE" ||
         n == "GROUP_RANK";
}

namespace {

nlohmann::json gpu_json(const Env& env, int local_rank, int forced) {
  nlohmann::json g;
  auto cuda = probe_cuda();
  g["runtime"] = cuda_version_string(cuda.runtime_version);
  g["driver"] = cuda_version_string(cuda.driver_version);
  g["visible_devices"] = cuda.device_count;
  if (!cuda.usable) {
    g["error"] = cuda.error;
    return g;
  }
  try {
    auto choice = choose_gpu(local_rank, cuda.device_count, env, forced);
    auto info = gpu_info(choice.ordinal);
    g["ordinal"] = info.ordinal;
    g["name"] = info.name;
    g["pci_bus_id"] = info.pci_bus_id;
    g["uuid"] = info.uuid;
    g["memory_bytes"] = info.total_bytes;
    g["compute_capability"] = std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor);
    g["why"] = choice.why;
  } catch (const Error& e) {
    g["error"] = e.one_line();
  }
  return g;
}

}  // namespace

nlohmann::json collect_info(const Env& env, int forced_device, const std::string& nccl_lib) {
  nlohmann::json j;
  j["gpudiag"] = GPUDIAG_VERSION;
  j["host"] = short_hostname();
  j["pid"] = static_cast<int>(getpid());
  int local_rank = 0;
  try {
    auto w = discover_world(env);
    j["launcher"] = launcher_id(w.launcher);
    j["launcher_name"] = launcher_name(w.launcher);
    j["source"] = w.source;
    j["rank"] = w.rank;
    j["world_size"] = w.size;
    j["local_rank"] = w.local_rank;
    j["local_size"] = w.local_size;
    j["mpi_launched"] = w.mpi_launched();
    j["warnings"] = w.warnings;
    local_rank = w.local_rank;
  } catch (const Error& e) {
    j["launcher"] = "error";
    j["error"] = e.one_line();
  }
  // What NCCL_COMM_BLOCKING and NCCL_COMM_ID do here (comm/nccl_env.h).
  for (const auto& w : nccl_env_warnings(env)) j["warnings"].push_back(w.text);
  j["gpu"] = gpu_json(env, local_rank, forced_device);
  const NcclLibrary& nccl = load_nccl(nccl_lib);
  j["nccl"] = {{"usable", nccl.usable()},
               {"version", nccl_version_string(nccl.version)},
               {"path", nccl.path},
               {"found_by", nccl.how}};
  if (!nccl.usable()) j["nccl"]["error"] = nccl.error;
  // Several bootstrap roots need ncclCommInitRankScalable (2.23+; comm/nccl_roots.h).
  if (nccl.usable()) j["nccl"]["scalable_init"] = nccl.api->CommInitRankScalable != nullptr;
  j["mpi"] = {{"built_with", built_with_mpi()}, {"library", mpi_library_version()}};
  nlohmann::json e = nlohmann::json::object();
  for (const auto& [k, v] : env.all())
    if (is_relevant_env(k)) e[clean_text(k)] = is_secret_name(k) ? hidden_value(v) : clean_text(v);
  j["env"] = e;
  // What `gpudiag check` compares across the job (world/fingerprint.h).
  const int ordinal = j["gpu"].value("ordinal", -1);
  j["fingerprint"] = collect_fingerprint(live_sources(env, short_hostname(), ordinal, nccl_lib));
  // The kernel log's and sysfs's evidence about this node (hw/evidence.h).
  j["hardware"] = hw::hw_evidence_json(hw::collect_hw_evidence());
  return j;
}

std::string render_info(const nlohmann::json& j) {
  std::string out = "gpudiag " + j["gpudiag"].get<std::string>() + " on " +
                    j["host"].get<std::string>() + " (pid " + std::to_string(j["pid"].get<int>()) +
                    ")\n";
  auto line = [&](const std::string& key, const std::string& value) {  // values may be a stranger's
    out += "  " + key + std::string(key.size() < 10 ? 10 - key.size() : 1, ' ') +
           clean_text(value) + "\n";
  };
  if (j.contains("error")) {
    line("launcher", "ERROR: " + j["error"].get<std::string>());
  } else {
    line("launcher", j["launcher_name"].get<std::string>() + " via " + j["source"].get<std::string>());
    int ls = j["local_size"].get<int>();
    line("rank", std::to_string(j["rank"].get<int>()) + " of " +
                     std::to_string(j["world_size"].get<int>()) + " (local rank " +
                     std::to_string(j["local_rank"].get<int>()) + " of " +
                     (ls < 0 ? std::string("?") : std::to_string(ls)) + ")");
  }
  const auto& g = j["gpu"];
  if (g.contains("name"))
    line("gpu", std::to_string(g["ordinal"].get<int>()) + ": " + g["name"].get<std::string>() +
                    ", " + g["pci_bus_id"].get<std::string>() + ", " +
                    human_bytes(g["memory_bytes"].get<std::uint64_t>()) + ", sm_" +
                    g["compute_capability"].get<std::string>() + " (" +
                    g["why"].get<std::string>() + ")");
  else
    line("gpu", "none: " + g.value("error", std::string("?")));
  line("cuda", "runtime " + g["runtime"].get<std::string>() + ", driver " +
                   g["driver"].get<std::string>());
  const auto& n = j["nccl"];
  if (n["usable"].get<bool>()) {
    line("nccl", n["version"].get<std::string>() + " from " + n["path"].get<std::string>() +
                     " (found by " + n["found_by"].get<std::string>() + ")");
    line("", n.value("scalable_init", false)
                 ? "has ncclCommInitRankScalable: large jobs start from several bootstrap roots"
                 : "no ncclCommInitRankScalable (NCCL 2.23+): every job starts from one "
                   "bootstrap root");
  } else {
    line("nccl", "unusable: " + n["error"].get<std::string>());
  }
  const auto& m = j["mpi"];
  line("mpi", m["built_with"].get<bool>() ? m["library"].get<std::string>() : "not built in");
  bool first = true;
  for (const auto& [k, v] : j["env"].items()) {
    line(first ? "env" : "", k + "=" + v.get<std::string>());
    first = false;
  }
  if (first) line("env", "(none of NCCL_*, CUDA_VISIBLE_DEVICES, MASTER_*, launcher variables)");
  if (j.contains("fingerprint") && j["fingerprint"].is_object()) {
    const auto& f = j["fingerprint"];
    auto field = [&](const char* k) { return f.value(k, std::string("unknown")); };
    line("plugins", "net " + field("plugin.net") + ", tuner " + field("plugin.tuner") +
                        ", profiler " + field("plugin.profiler"));
    auto bytes = [&](const char* k) {
      auto n = parse_int(field(k));
      return n && *n >= 0 ? human_bytes(static_cast<std::uint64_t>(*n)) : field(k);
    };
    line("host", "kernel " + field("kernel") + ", /dev/shm " + bytes("shm") + ", memlock " +
                     bytes("memlock"));
    std::string ib;
    for (const auto& [k, v] : f.items())
      if (k.starts_with("ib.") && v.is_string()) ib += (ib.empty() ? "" : "; ") + k.substr(3) + " " + v.get<std::string>();
    line("rdma", ib.empty() ? "no InfiniBand/RoCE devices" : ib);
    line("pcie", "IOMMU " + field("iommu") +
                     (f.contains("pcie.acs") ? ", GPU's IOMMU domain " + field("gpu.iommu") +
                                                   ", ACS above the GPU " + field("pcie.acs")
                                             : ""));
    if (f.contains("gpu.nvml"))
      line("nvml", field("gpu.nvml") == "loaded"
                       ? "persistence " + field("gpu.persistence") + ", ECC " + field("gpu.ecc") +
                             ", SM clock " + field("gpu.clock.sm") + "/" +
                             field("gpu.clock.sm_max") + " MHz, memory clock " +
                             field("gpu.clock.mem") + "/" + field("gpu.clock.mem_max") +
                             " MHz, remapped rows " + field("gpu.remapped_rows") +
                             ", NVLink domain " + field("gpu.nvlink_domain") + " (bandwidth " +
                             field("gpu.nvlink_bw") + ")"
                       : field("gpu.nvml"));
    line("fingerprint", std::to_string(f.size()) + " fields (--json shows them; check compares them)");
  }
  if (j.contains("hardware") && j["hardware"].is_object()) {
    bool head = true;
    for (const auto& l : hw::hw_evidence_lines(j["hardware"])) line(std::exchange(head, false) ? "hardware" : "", l);
  }
  if (j.contains("warnings"))
    for (const auto& w : j["warnings"]) line("warning", w.get<std::string>());
  return out;
}

}  // namespace gpudiag
