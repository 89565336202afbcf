// The job-wide comparison of fingerprints (fingerprint_compare.h). The work
// is a map per field from value to ranks: O(ranks x fields), fields bounded
// by kMaxFields a rank and kMaxCompared in all, so a peer sending odd field
// names cannot make rank 0 compare without end. The JSON for the review names
// at most kNamed differences and findings and kGroups groups each; the rest
// are counted, so the review stays far below its 64 KiB cap.
#include "world/fingerprint_compare.h"

#include <algorithm>
#include <map>
#include <set>

#include "comm/nccl_env.h"
#include "util/strings.h"
#include "world/pcie.h"

namespace gpudiag {

namespace {

constexpr std::size_t kMaxCompared = 1024;  ///< distinct fields compared
constexpr std::uint64_t kMinShm = 512ull << 20;

bool plugin_found(const std::string& v) { return !v.empty() && v[0] == '/'; }

void add_rank(ValueGroup& g, int rank, const std::string& host) {
  g.ranks.push_back(rank);
  auto it = std::lower_bound(g.hosts.begin(), g.hosts.end(), host);
  if (it == g.hosts.end() || *it != host) g.hosts.insert(it, host);
}

std::uint64_t as_bytes(const std::string& v) {
  auto n = parse_int(v);
  return n && *n > 0 ? static_cast<std::uint64_t>(*n) : 0;
}

/// Findings: values wrong on their own. `local` counts the ranks of each host.
void find_bad_values(const std::vector<RankPrint>& ps, const std::map<std::string, int>& local,
                     FingerprintComparison& out) {
  std::map<std::string, Finding> by_what;
  auto note = [&](const std::string& what, const std::string& remedy, const RankPrint& p) {
    auto& f = by_what[what];
    f.what = what;
    f.remedy = remedy;
    ValueGroup g{"", std::move(f.ranks), std::move(f.hosts), {}, 0, 0};
    add_rank(g, p.rank, p.host);
    f.ranks = std::move(g.ranks);
    f.hosts = std::move(g.hosts);
  };
  for (const auto& p : ps) {
    const auto& m = p.print->fields;
    if (auto it = m.find("env.NCCL_SOCKET_IFNAME");
        it != m.end() && out.hosts > 1 && !it->second.starts_with("^")) {
      std::string list = it->second.starts_with("=") ? it->second.substr(1) : it->second;
      for (const auto& name : split(list, ','))
        if (name.starts_with("lo") || name.starts_with("docker"))
          note("NCCL_SOCKET_IFNAME=" + it->second + " names a " +
                   (name.starts_with("lo") ? "loopback" : "docker") +
                   " interface in a job across " + std::to_string(out.hosts) + " hosts",
               "name the interface that reaches the other hosts (ip -br addr)", p);
    }
    // NCCL_COMM_BLOCKING and NCCL_COMM_ID: what they do (comm/nccl_env.h).
    Env nccl_env;
    for (const char* name : {"NCCL_COMM_BLOCKING", "NCCL_COMM_ID"})
      if (auto it = m.find(std::string("env.") + name); it != m.end())
        nccl_env.set(name, it->second);
    for (const auto& w : nccl_env_warnings(nccl_env)) note(w.text, w.remedy, p);
    bool rdma = false;
    for (const auto& [k, v] : m) {
      if (!k.starts_with("ib.")) continue;
      rdma = true;
      if (!v.starts_with("ACTIVE"))
        note("InfiniBand/RoCE port " + k.substr(3) + " is " + v.substr(0, v.find(',')),
             "check the cable and the subnet manager (ibstat), or leave the port out with "
             "NCCL_IB_HCA",
             p);
    }
    const auto host_ranks = local.count(p.host) ? local.at(p.host) : 1;
    const auto gpus = parse_int(p.print->get("gpu.count"));
    if (acs_redirects(p.print->get("pcie.acs")) && (host_ranks > 1 || (gpus && *gpus > 1)))
      note(
          "ACS redirects peer-to-peer traffic on a PCIe switch above the GPU of a multi-GPU "
          "host: GPU-to-GPU traffic goes up to the CPU's root complex (slower; with an IOMMU "
          "translating, transfers may fail or hang)",
          "disable ACS on the PCIe switches (BIOS setting, or as root at every boot: setpci -s "
          "PORT ECAP_ACS+0x6.w=0000), and on bare metal set the IOMMU to passthrough (iommu=pt)",
          p);
    const std::string rows = p.print->get("gpu.remapped_rows");
    if (rows.find(", failed") != std::string::npos)
      note("a GPU's memory row remapping failed (NVML)",
           "drain the node and have the GPU replaced (nvidia-smi -q -d ROW_REMAPPER)", p);
    else if (rows.find(", pending") != std::string::npos)
      note("a GPU has memory row remapping pending (NVML)",
           "reset the GPU (nvidia-smi -r) or reboot the node before the next job", p);
    const std::string domain = p.print->get("gpu.nvlink_domain");
    if (domain == "registering")
      note("a GPU has not finished joining its NVLink fabric (NVML fabric state): NCCL cannot "
           "use multi-node NVLink on it yet",
           "check the fabric manager (systemctl status nvidia-fabricmanager, nvidia-smi -q | "
           "grep -A4 Fabric) and start the job when the state is Completed",
           p);
    else if (domain.starts_with("failed"))
      note("a GPU failed to join its NVLink fabric (NVML: " + domain + ")",
           "check the fabric manager's log and the NVLink switch trays; drain the node if it "
           "stays failed",
           p);
    if (p.print->get("gpu.nvlink_bw") == "degraded")
      note("a GPU's NVLink fabric runs at degraded bandwidth (NVML fabric health)",
           "check the NVLink switch trays and cables (nvidia-smi nvlink -s); drain the node "
           "until repaired",
           p);
    if (p.print->get("gpu.ecc").find("after reset") != std::string::npos)
      note("a GPU's ECC mode changes at its next reset (NVML)",
           "reset the GPU (nvidia-smi -r) or reboot, so every GPU runs the mode it is set to", p);
    if (const auto shm = as_bytes(p.print->get("shm")); shm && shm < kMinShm && host_ranks > 1)
      note("/dev/shm is " + human_bytes(shm) + " for " + std::to_string(host_ranks) +
               " ranks on the host",
           "give /dev/shm at least 512 MiB (docker run --shm-size=1g, or remount it)", p);
    // NCCL's IB/RoCE transport registers (pins) memory: limited memlock
    // matters only where there are RDMA devices.
    if (const auto ml = p.print->get("memlock"); rdma && ml != "unlimited" && ml != "unknown")
      note("memlock is limited (ulimit -l: " + human_bytes(as_bytes(ml)) +
               ") on a host with RDMA devices",
           "set ulimit -l unlimited (limits.conf, or the container's --ulimit memlock=-1)", p);
  }
  for (auto& [what, f] : by_what) out.findings.push_back(std::move(f));
}

}  // namespace

/// Fields that differ by design: never compared. NCCL_DEBUG_FILE often names
/// the rank's own file, NCCL_HOSTID is a host's own (verdict.h looks at it),
/// and virtual interfaces (containers' veth pairs, bridges) are named per host.
bool compared_field(const std::string& key) {
  if (key == "host" || key == "gpu.bus_id" || key == "env_skipped" ||
      key == "env.NCCL_DEBUG_FILE" || key == "env.NCCL_HOSTID")
    return false;
  // A GPU's current clocks follow its load, its remapped rows are its own
  // history, and ACS names its own bridges: findings judge those, not equality.
  // A multi-node NVLink domain is a rack's own (jobs span racks), and its
  // fabric health is judged by a finding.
  if (key == "gpu.clock.sm" || key == "gpu.clock.mem" || key == "gpu.remapped_rows" ||
      key == "gpu.nvml" || key == "pcie.acs" || key == "gpu.nvlink_domain" ||
      key == "gpu.nvlink_bw")
    return false;
  if (key.starts_with("nic."))
    for (const char* v : {"nic.veth", "nic.cali", "nic.br-", "nic.vnet", "nic.tap", "nic.lxc",
                          "nic.docker", "nic.virbr", "nic.cni", "nic.flannel", "nic.tun"})
      if (key.starts_with(v)) return false;
  return true;
}

/// Fields read where the driver or sysfs allows: "unknown" on a rank says
/// nothing about its state, so it is left out of the comparison.
bool unknown_is_silent(const std::string& key) {
  return key == "gpu.persistence" || key == "gpu.ecc" || key == "gpu.clock.sm_max" ||
         key == "gpu.clock.mem_max" || key == "gpu.iommu";
}

/// A device's own field: a host that lacks the device has nothing to compare.
bool absent_is_silent(const std::string& key) {
  return (key.starts_with("nic.") || key.starts_with("ib."));
}

std::string field_title(const std::string& f) {
  if (f == "nccl.version") return "the NCCL version";
  if (f == "nccl.path") return "the libnccl loaded";
  if (f == "plugin.net") return "the NCCL net plugin";
  if (f == "plugin.tuner") return "the NCCL tuner plugin";
  if (f == "plugin.profiler") return "the NCCL profiler plugin";
  if (f == "gpu.driver") return "the GPU driver";
  if (f == "kernel") return "the kernel";
  if (f == "gpu.persistence") return "GPU persistence mode";
  if (f == "gpu.ecc") return "GPU ECC mode";
  if (f == "gpu.clock.sm_max") return "the GPU's maximum SM clock (MHz)";
  if (f == "gpu.clock.mem_max") return "the GPU's maximum memory clock (MHz)";
  if (f == "iommu") return "the IOMMU";
  if (f == "rdma.ports") return "the number of RDMA ports";
  if (f == "gpu.iommu") return "the GPU's IOMMU domain";
  if (f.starts_with("env.")) return f.substr(4);
  return f;
}

void classify_difference(Difference& d) {
  if (d.field == "nccl.version") {
    d.broken = true;
    d.remedy =
        "install one NCCL version on every host, or point every rank at the same "
        "libnccl.so.2 (--nccl-lib, LD_LIBRARY_PATH)";
  } else if (d.field == "plugin.net") {
    bool found = false, missing = false;
    for (const auto& g : d.groups) (plugin_found(g.value) ? found : missing) = true;
    d.broken = found && missing;
    d.remedy =
        "NCCL hangs or fails at init when only some ranks load a net plugin: install the "
        "same libnccl-net.so on every host, or set NCCL_NET_PLUGIN=none on every rank";
  } else if (d.field.starts_with("env.")) {
    d.remedy = "export the same value on every rank (or unset it everywhere)";
  } else if (d.field == "gpu.driver") {
    d.remedy = "install the same driver on every host";
  } else if (d.field == "gpu.persistence") {
    d.remedy =
        "enable persistence mode on every GPU (nvidia-smi -pm 1, or the nvidia-persistenced "
        "service): without it a GPU re-initialises when its last user exits";
  } else if (d.field == "gpu.ecc") {
    d.remedy = "set one ECC mode on every GPU (nvidia-smi -e 1), then reset the GPUs or reboot";
  } else if (d.field == "iommu" || d.field == "gpu.iommu") {
    d.remedy = "boot every host with the same IOMMU setting (iommu=pt keeps GPU P2P direct)";
  }
}

FingerprintComparison compare_fingerprints(const std::vector<RankPrint>& prints) {
  FingerprintComparison out;
  std::vector<RankPrint> ps;
  for (const auto& p : prints)
    if (p.print && !p.print->empty()) ps.push_back(p);
  std::sort(ps.begin(), ps.end(), [](auto& a, auto& b) { return a.rank < b.rank; });
  std::map<std::string, const Fingerprint*> host_print;  // lowest rank's
  std::map<std::string, int> local;
  std::set<std::string> keys;
  for (const auto& p : ps) {
    host_print.emplace(p.host, p.print);
    ++local[p.host];
    for (const auto& [k, v] : p.print->fields)
      if (compared_field(k) && (keys.size() < kMaxCompared || keys.count(k))) keys.insert(k);
  }
  out.ranks = static_cast<int>(ps.size());
  out.hosts = static_cast<int>(host_print.size());
  out.fields = static_cast<int>(keys.size());
  for (const auto& key : keys) {
    const bool host = is_host_field(key);
    std::map<std::string, ValueGroup> by_value;
    for (const auto& p : ps) {
      const Fingerprint* print = host ? host_print[p.host] : p.print;
      if (absent_is_silent(key) && !print->fields.count(key)) continue;
      const std::string v = print->get(key);
      if (v == "unknown" && unknown_is_silent(key)) continue;
      auto& g = by_value[v];
      g.value = v;
      add_rank(g, p.rank, p.host);
    }
    if (by_value.size() < 2) continue;
    Difference d{key, host, false, {}, ""};
    for (auto& [v, g] : by_value) d.groups.push_back(std::move(g));
    std::sort(d.groups.begin(), d.groups.end(),
              [](auto& a, auto& b) { return a.ranks.front() < b.ranks.front(); });
    classify_difference(d);
    out.differences.push_back(std::move(d));
  }
  std::stable_sort(out.differences.begin(), out.differences.end(),
                   [](auto& a, auto& b) { return a.broken > b.broken; });
  find_bad_values(ps, local, out);
  return out;
}

}  // namespace gpudiag
