// sysfs readers for the GPU's PCIe path (pcie.h). The GPU's device directory
// /sys/bus/pci/devices/<bus id> is a link into /sys/devices/pci<dom:bus>/...,
// whose path names every bridge from the root port down: the first PCI
// address is the root port, the ones after it up to the GPU are switch ports.
// ACS is found by walking the extended capability list at offset 0x100 of a
// bridge's config space (PCIe base spec: 32-bit headers, ID in bits 0-15,
// next offset in bits 20-31; ACS is ID 0x000D, its control register at +6).
#include "world/pcie.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <system_error>
#include <vector>

namespace gpudiag {

namespace fs = std::filesystem;

namespace {

constexpr std::uint16_t kAcsCapId = 0x000D;
constexpr std::size_t kExtStart = 0x100, kConfigMax = 4096;

bool pci_address(const std::string& name) {
  static const std::regex re("[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]");
  return std::regex_match(name, re);
}

std::string read_file(const fs::path& p, std::size_t max) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return "";
  std::string data(max, '\0');
  f.read(data.data(), static_cast<std::streamsize>(max));
  data.resize(static_cast<std::size_t>(f.gcount()));
  return data;
}

std::uint32_t le32(std::string_view s, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

/// The GPU's device directory with its links resolved, "" when absent.
fs::path device_path(const std::string& sys_root, const std::string& bus_id) {
  std::string id = bus_id;
  std::transform(id.begin(), id.end(), id.begin(), ::tolower);
  if (id.size() > 12 && id.find(':') == 8) id = id.substr(4);  // CUDA: 00000000:18:00.0
  std::error_code ec;
  auto p = fs::canonical(fs::path(sys_root) / "bus" / "pci" / "devices" / id, ec);
  return ec ? fs::path() : p;
}

}  // namespace

std::string read_iommu(const std::string& sys_root) {
  std::error_code ec;
  for (const char* dir : {"kernel/iommu_groups", "class/iommu"}) {
    fs::directory_iterator it(fs::path(sys_root) / dir, ec);
    if (!ec && it != fs::directory_iterator()) return "on";
  }
  return "off";
}

std::string read_gpu_iommu(const std::string& sys_root, const std::string& bus_id) {
  const fs::path dev = device_path(sys_root, bus_id);
  if (dev.empty()) return "unknown";
  std::error_code ec;
  if (!fs::exists(dev / "iommu_group", ec)) return "off";
  std::string type = read_file(dev / "iommu_group" / "type", 64);
  type.erase(std::find_if(type.begin(), type.end(), [](char c) { return c == '\n'; }), type.end());
  if (type == "identity") return "passthrough";
  if (type.empty()) return "unknown";
  return "translated (" + type + ")";
}

std::string acs_control(std::string_view config) {
  if (config.size() < kExtStart + 8) return "unknown";
  std::size_t at = kExtStart;
  for (int hops = 0; hops < 64 && at >= kExtStart && at + 8 <= config.size(); ++hops) {
    const std::uint32_t header = le32(config, at);
    if (header == 0 || header == 0xffffffffu) break;
    if ((header & 0xffff) == kAcsCapId) {
      const unsigned ctl = le32(config, at + 4) >> 16;
      static const char* bits[] = {"SrcValid",    "TransBlk",   "ReqRedir",   "CmplRedir",
                                   "UpstreamFwd", "EgressCtrl", "DirectTrans"};
      std::string out;
      for (int b = 0; b < 7; ++b)
        if (ctl & (1u << b)) out += std::string(out.empty() ? "" : ",") + bits[b];
      return out;
    }
    at = header >> 20;
  }
  return "no ACS";
}

std::string read_gpu_acs(const std::string& sys_root, const std::string& bus_id) {
  const fs::path dev = device_path(sys_root, bus_id);
  if (dev.empty()) return "unknown (no such PCI device in sysfs)";
  std::vector<fs::path> bridges;  // from the root port down, the GPU excluded
  for (fs::path p = dev.parent_path(); pci_address(p.filename().string()); p = p.parent_path())
    bridges.insert(bridges.begin(), p);
  if (bridges.size() < 2) return "no PCIe switch above the GPU";
  std::vector<std::string> on;
  int readable = 0;
  for (std::size_t i = 1; i < bridges.size(); ++i) {  // [0] is the root port
    const std::string ctl = acs_control(read_file(bridges[i] / "config", kConfigMax));
    if (ctl == "unknown") continue;
    ++readable;
    if (ctl != "no ACS" && !ctl.empty())
      on.push_back(bridges[i].filename().string() + " (" + ctl + ")");
  }
  const std::size_t ports = bridges.size() - 1;
  if (!on.empty()) {
    std::string s = "enabled on ";
    for (std::size_t i = 0; i < on.size(); ++i) s += (i ? "; " : "") + on[i];
    return s;
  }
  if (readable < static_cast<int>(bridges.size() - 1))
    return "unknown (the switch ports' config space is readable by root only)";
  return "disabled (" + std::to_string(ports) + " switch port" + (ports == 1 ? "" : "s") + ")";
}

bool acs_redirects(const std::string& value) {
  if (!value.starts_with("enabled")) return false;
  for (const char* bit : {"ReqRedir", "CmplRedir", "EgressCtrl"})
    if (value.find(bit) != std::string::npos) return true;
  return false;
}

}  // namespace gpudiag
