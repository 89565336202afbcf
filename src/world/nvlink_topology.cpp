// A GPU's NVLinks through NVML, and the pairs of a node's GPUs (nvlink_topology.h).
#include "world/nvlink_topology.h"

#include <algorithm>
#include <cctype>

#include "util/strings.h"
#include "world/nvml.h"

namespace gpudiag {

namespace {

/// "00000000:1B:00.0" (NVML) or "0000:1B:00.0" (CUDA) -> "0000:1b:00.0".
std::string nvml_bus_id(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.size() == 16 && s.starts_with("0000")) s = s.substr(4);
  return s;
}

}  // namespace

const NvlinkApi& nvlink_api() {
  // The functions of the one NVML the process loads (world/nvml.h).
  static const NvlinkApi api = [] {
    const NvmlApi& n = load_nvml().api;
    NvlinkApi a{n.init, n.shutdown, n.handle_by_bus_id, n.nvlink_state, n.nvlink_remote_type,
                n.nvlink_remote_pci};
    if (!a.init || !a.shutdown || !a.handle_by_bus_id || !a.state || !a.remote_pci) a = {};
    return a;
  }();
  return api;
}

std::string read_nvlink_peers(const NvlinkApi& a, const std::string& bus_id) {
  if (!a.init || a.init() != 0) return "";
  void* dev = nullptr;
  std::string out;
  if (a.handle_by_bus_id(bus_id.c_str(), &dev) == 0 && dev) {
    int to_switch = 0, up = 0;
    std::map<std::string, int> to_gpu;
    for (unsigned l = 0; l < kNvlinkMaxLinks; ++l) {
      int active = 0, type = -1;
      if (a.state(dev, l, &active) != 0 || !active) continue;  // absent or down
      ++up;
      if (a.remote_type && a.remote_type(dev, l, &type) == 0 && type == kNvlinkRemoteSwitch) {
        ++to_switch;
        continue;
      }
      NvmlPciInfo pci{};
      if (a.remote_pci(dev, l, &pci) == 0) ++to_gpu[nvml_bus_id(std::string(pci.bus_id, strnlen(pci.bus_id, 32)))];
    }
    if (up == 0) out = "none";
    else if (to_switch > 0) out = "switch:" + std::to_string(to_switch);
    else
      for (const auto& [peer, n] : to_gpu)
        out += (out.empty() ? "" : ",") + peer + "=" + std::to_string(n);
  }
  a.shutdown();
  return out;
}

NvlinkPairs nvlink_pairs(const std::map<std::string, std::string>& peers) {
  NvlinkPairs p;
  if (peers.size() < 2) return p;
  std::map<std::string, std::map<std::string, int>> links;
  bool all_switched = true;
  for (const auto& [gpu_id, text] : peers) {
    const std::string gpu = nvml_bus_id(gpu_id);
    if (text.empty()) return p;  // one GPU unknown: the node is
    all_switched = all_switched && text.starts_with("switch:");
    if (text == "none" || text.starts_with("switch:")) continue;
    for (const auto& item : split(text, ',')) {
      const auto eq = item.rfind('=');
      if (eq == std::string::npos) return p;
      const auto n = parse_int(item.substr(eq + 1));
      if (!n || *n < 0) return p;
      links[gpu][item.substr(0, eq)] = static_cast<int>(*n);
    }
  }
  p.known = true;
  p.switched = all_switched;
  if (all_switched) return p;
  int fewest = -1;
  for (auto a = peers.begin(); a != peers.end(); ++a)
    for (auto b = std::next(a); b != peers.end(); ++b) {
      const std::string x = nvml_bus_id(a->first), y = nvml_bus_id(b->first);
      // Each end counts its own links up: the fewer is what the pair has.
      const int n = std::min(links[x].count(y) ? links[x][y] : 0, links[y].count(x) ? links[y][x] : 0);
      fewest = fewest < 0 ? n : std::min(fewest, n);
    }
  p.links_per_pair = std::max(fewest, 0);
  return p;
}

}  // namespace gpudiag
