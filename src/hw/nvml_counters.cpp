// nvml_counters.h: reading every GPU's counters through NVML's C API (each
// call optional: a driver without it leaves the field unknown) and judging
// them. The constants are NVML's header's (nvml.h): clocks-event reasons
// nvmlClocksEventReasonHwSlowdown 0x8, ...HwThermalSlowdown 0x40,
// ...HwPowerBrakeSlowdown 0x80; nvmlNvLinkErrorCounter_t REPLAY 0, RECOVERY 1,
// CRC_FLIT 2, CRC_DATA 3.
#include "hw/nvml_counters.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "world/nvlink_topology.h"  // NvmlPciInfo
#include "world/nvml_clocks.h"     // clock_event_names

namespace gpudiag::hw {

namespace {

constexpr unsigned kMaxGpus = 64;
/// The clocks-event reasons that are the hardware's (HW slowdown, HW thermal
/// slowdown, HW power brake), named as everywhere (world/nvml_clocks.h).
constexpr unsigned long long kHeldDown = 0x8 | 0x40 | 0x80;
constexpr std::pair<int, const char*> kLinkCounters[] = {
    {0, "replay"}, {1, "recovery"}, {2, "crc_flit"}, {3, "crc_data"}};

Finding nvml_finding(const GpuCounters& g, std::string kind, std::string what, FindingClass cls,
                     Action action, std::string then, bool sticky) {
  Finding f;
  f.kind = std::move(kind);
  f.source = "NVML";
  f.device = g.device;
  f.what = std::move(what);
  f.cls = cls;
  f.action = action;
  f.then = std::move(then);
  f.sticky = sticky;
  return f;
}

GpuCounters read_gpu(const NvmlApi& a, void* dev) {
  GpuCounters g;
  if (a.pci_info) {
    NvmlPciInfo pci{};
    if (a.pci_info(dev, &pci) == kNvmlSuccess)
      g.device = kernel_bus_id(std::string(pci.bus_id, strnlen(pci.bus_id, sizeof pci.bus_id)));
  }
  unsigned long long n = 0;
  if (a.total_ecc) {
    if (a.total_ecc(dev, kNvmlUncorrected, kNvmlVolatile, &n) == kNvmlSuccess)
      g.ecc_volatile = static_cast<long long>(std::min<unsigned long long>(n, 1ull << 62));
    if (a.total_ecc(dev, kNvmlUncorrected, kNvmlAggregate, &n) == kNvmlSuccess)
      g.ecc_aggregate = static_cast<long long>(std::min<unsigned long long>(n, 1ull << 62));
  }
  int state = 0;
  if (a.retired_pending && a.retired_pending(dev, &state) == kNvmlSuccess)
    g.pages_pending = state == kNvmlEnabled ? 1 : 0;
  if (a.remapped_rows) {
    unsigned corr = 0, unc = 0, pending = 0, failed = 0;
    if (a.remapped_rows(dev, &corr, &unc, &pending, &failed) == kNvmlSuccess)
      g.rows_pending = pending ? 1 : 0, g.rows_failed = failed ? 1 : 0;
  }
  if (a.nvlink_state) {
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      if (a.nvlink_state(dev, link, &state) != kNvmlSuccess) continue;  // no such link
      ++g.links_known;
      g.links_up = std::max(g.links_up, 0) + (state == kNvmlEnabled ? 1 : 0);
      if (state != kNvmlEnabled || !a.nvlink_errors) continue;
      for (const auto& [counter, name] : kLinkCounters)
        if (a.nvlink_errors(dev, link, counter, &n) == kNvmlSuccess)
          g.link_errors[name] += static_cast<long long>(std::min<unsigned long long>(n, 1ull << 56));
    }
  }
  if (a.clock_events && a.clock_events(dev, &n) == kNvmlSuccess)
    g.clock_events = static_cast<long long>(n & 0xffffffffull);
  return g;
}

}  // namespace

std::string kernel_bus_id(const std::string& id) {
  // "00000000:3B:00.0" -> "0000:3b:00": the last four digits of the domain,
  // bus and device in lower case, the function dropped.
  const auto colon = id.find(':');
  if (colon == std::string::npos || colon < 4) return id;
  std::string out = id.substr(colon - 4);
  if (const auto dot = out.rfind('.'); dot != std::string::npos) out.resize(dot);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

NvmlSnapshot read_nvml_counters(const NvmlLibrary& lib) {
  NvmlSnapshot s;
  if (!lib.loaded) {
    s.why = lib.why.empty() ? "NVML not loaded" : lib.why;
    return s;
  }
  const NvmlApi& a = lib.api;
  if (!a.device_count || !a.handle_by_index) {
    s.why = "this NVML lacks nvmlDeviceGetCount_v2 or nvmlDeviceGetHandleByIndex_v2";
    return s;
  }
  if (int rc = a.init(); rc != kNvmlSuccess) {
    s.why = "nvmlInit failed (NVML error " + std::to_string(rc) + ")";
    return s;
  }
  unsigned count = 0;
  if (int rc = a.device_count(&count); rc != kNvmlSuccess) {
    s.why = "nvmlDeviceGetCount failed (NVML error " + std::to_string(rc) + ")";
  } else {
    s.read = true;
    for (unsigned i = 0; i < std::min(count, kMaxGpus); ++i) {
      void* dev = nullptr;
      if (a.handle_by_index(i, &dev) != kNvmlSuccess || !dev) continue;
      auto g = read_gpu(a, dev);
      if (g.device.empty()) g.device = "GPU " + std::to_string(i);
      s.gpus.push_back(std::move(g));
    }
  }
  a.shutdown();
  return s;
}

std::vector<Finding> nvml_state_findings(const NvmlSnapshot& s) {
  std::vector<Finding> out;
  int most_links = 0;
  for (const auto& g : s.gpus) most_links = std::max(most_links, g.links_up);
  // All links down is only judged on a board whose other GPUs all have the
  // same links up (an HGX board): PCIe cards bridged in pairs leave a card
  // without a partner with none, by design.
  std::size_t at_most = 0;
  for (const auto& g : s.gpus) at_most += g.links_up == most_links ? 1 : 0;
  auto links_down = [&](const GpuCounters& g) {
    if (g.links_up < 0 || g.links_up >= most_links) return false;
    return g.links_up > 0 || (at_most + 1 == s.gpus.size() && at_most >= 2);
  };
  for (const auto& g : s.gpus) {
    if (g.rows_failed == 1)
      out.push_back(nvml_finding(g, "gpu-memory", "GPU memory row remapping failed", FindingClass::node,
                                 Action::drain, "the GPU has no spare rows left: replace it", true));
    if (g.rows_pending == 1)
      out.push_back(nvml_finding(g, "gpu-memory", "GPU memory rows waiting to be remapped",
                                 FindingClass::node, Action::reset_gpu,
                                 "the remapping takes effect at the reset", true));
    if (g.pages_pending == 1)
      out.push_back(nvml_finding(g, "gpu-memory", "GPU memory pages waiting to be retired",
                                 FindingClass::node, Action::reset_gpu,
                                 "the retirement takes effect at the reset", true));
    // A GPU is judged beside the node's others: NVLinks that are not there
    // by design (a PCIe card, a board without them) are down on every GPU.
    if (links_down(g)) {
      auto f = nvml_finding(g, "nvlink", "NVLink down: " + std::to_string(g.links_up) + " of " +
                                             std::to_string(most_links) + " links up",
                            FindingClass::node, Action::reset_gpu,
                            "check the NVLink and NVSwitch; service if it recurs", true);
      f.message = "another GPU of this node has " + std::to_string(most_links) + " links up";
      out.push_back(std::move(f));
    }
    if (g.clock_events > 0) {
      std::string why;
      for (const auto& name :
           clock_event_names(static_cast<unsigned long long>(g.clock_events) & kHeldDown))
        why += (why.empty() ? "" : ", ") + name;
      if (!why.empty())
        out.push_back(nvml_finding(g, "gpu-clocks", "GPU clocks held down (" + why + ")",
                                   FindingClass::notice, Action::none,
                                   "check the GPU's cooling and power if it is slow", false));
    }
  }
  return out;
}

std::vector<Finding> nvml_changes(const NvmlSnapshot& start, const NvmlSnapshot& end) {
  std::vector<Finding> out;
  for (const auto& g : end.gpus) {
    const auto was = std::find_if(start.gpus.begin(), start.gpus.end(),
                                  [&](const GpuCounters& s) { return s.device == g.device; });
    if (was == start.gpus.end()) continue;
    // A count that went down was reset in between (a GPU reset): not judged.
    if (was->ecc_volatile >= 0 && g.ecc_volatile > was->ecc_volatile) {
      auto f = nvml_finding(g, "gpu-memory", "uncorrected GPU memory error", FindingClass::node,
                            Action::reset_gpu, "service the GPU if it recurs", false);
      f.message = "volatile uncorrected ECC count " + std::to_string(was->ecc_volatile) + " -> " +
                  std::to_string(g.ecc_volatile);
      f.count = static_cast<std::uint64_t>(g.ecc_volatile - was->ecc_volatile);
      out.push_back(std::move(f));
    }
    std::string moved;
    for (const auto& [name, n] : g.link_errors)
      if (auto it = was->link_errors.find(name); it != was->link_errors.end() && n > it->second)
        moved += (moved.empty() ? "" : ", ") + name + " +" + std::to_string(n - it->second);
    if (!moved.empty()) {
      auto f = nvml_finding(g, "nvlink", "NVLink errors counted", FindingClass::notice, Action::none,
                            "check the NVLink if they keep growing", false);
      f.message = moved;
      out.push_back(std::move(f));
    }
  }
  return out;
}

nlohmann::json nvml_json(const NvmlSnapshot& s) {
  nlohmann::json j = {{"read", s.read}, {"gpus", nlohmann::json::array()}};
  if (!s.read) j["why"] = s.why;
  for (const auto& g : s.gpus)
    j["gpus"].push_back({{"device", g.device}, {"ecc_uncorrected_volatile", g.ecc_volatile},
                         {"ecc_uncorrected_aggregate", g.ecc_aggregate},
                         {"pages_pending", g.pages_pending}, {"rows_pending", g.rows_pending},
                         {"rows_failed", g.rows_failed}, {"nvlinks_up", g.links_up},
                         {"nvlinks_known", g.links_known}, {"nvlink_errors", g.link_errors},
                         {"clock_events", g.clock_events}});
  return j;
}

std::vector<std::string> nvml_lines(const nlohmann::json& j) {
  std::vector<std::string> out;
  if (!j.is_object()) return out;
  auto num = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_number_integer() ? o[k].get<long long>() : -1LL;
  };
  auto known = [](long long v) { return v < 0 ? std::string("unknown") : std::to_string(v); };
  if (!(j.contains("read") && j["read"].is_boolean() && j["read"].get<bool>())) {
    const auto why = j.contains("why") && j["why"].is_string() ? j["why"].get<std::string>() : "";
    if (!why.empty()) out.push_back("GPU counters (NVML): not read: " + why.substr(0, 300));
    return out;
  }
  for (const auto& g : j.value("gpus", nlohmann::json::array())) {
    if (!g.is_object()) continue;
    const auto dev = g.contains("device") && g["device"].is_string() ? g["device"].get<std::string>() : "?";
    std::string line = "gpu " + dev.substr(0, 64) + ": uncorrected ECC " +
                       known(num(g, "ecc_uncorrected_volatile")) + " since reset, " +
                       known(num(g, "ecc_uncorrected_aggregate")) + " lifetime";
    if (num(g, "nvlinks_known") > 0) line += ", NVLink " + known(num(g, "nvlinks_up")) + " up";
    out.push_back(line);
  }
  return out;
}

}  // namespace gpudiag::hw
