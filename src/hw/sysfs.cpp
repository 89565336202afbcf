// sysfs.h: small bounded reads (a value file is a line; an AER file a few
// dozen), entries listed sorted so two reads line up, and at most a few
// hundred of each kind looked at. A file that is missing or unreadable is
// an empty value ("" or -1), never an error: many drivers lack some of them.
#include "hw/sysfs.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "util/text.h"

namespace gpudiag::hw {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kSysfsMaxEntries = 512;

std::string sysfs_read(const fs::path& p, std::size_t max = 4096) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return "";
  std::string data(max, '\0');
  f.read(data.data(), static_cast<std::streamsize>(max));
  data.resize(static_cast<std::size_t>(f.gcount()));
  while (!data.empty() && (data.back() == '\n' || data.back() == ' ')) data.pop_back();
  return clean_text(data);
}

long long sysfs_number(const fs::path& p) {
  const std::string s = sysfs_read(p, 64);
  if (s.empty() || s.size() > 19) return -1;
  long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

/// The names in `dir`, sorted, at most kSysfsMaxEntries.
std::vector<std::string> sysfs_list(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end && out.size() < kSysfsMaxEntries; it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

Finding sysfs_finding(const std::string& kind, const std::string& device, const std::string& what) {
  Finding f;
  f.kind = kind;
  f.source = "sysfs";
  f.device = device;
  f.what = what;
  return f;
}

}  // namespace

long long aer_total(const std::string& text) {
  std::istringstream in(text);
  std::string name;
  long long value = 0, sum = 0;
  bool any = false;
  for (int n = 0; n < 128 && (in >> name >> value); ++n) {
    if (name.rfind("TOTAL_", 0) == 0) return value;
    sum += value, any = true;
  }
  return any ? sum : -1;
}

SysfsSnapshot read_sysfs(const std::string& root) {
  SysfsSnapshot s;
  const fs::path sys = fs::path(root) / "sys";
  for (const auto& name : sysfs_list(sys / "class" / "net")) {
    const fs::path dir = sys / "class" / "net" / name;
    std::error_code ec;
    if (!fs::exists(dir / "device", ec)) continue;  // virtual: veth, bridges, lo, ...
    NicState n;
    n.name = clean_text(name);
    n.operstate = sysfs_read(dir / "operstate", 64);
    n.speed_mbps = sysfs_number(dir / "speed");
    n.carrier_changes = sysfs_number(dir / "carrier_changes");
    const auto dev = fs::canonical(dir / "device", ec);
    if (!ec) n.pci = clean_text(dev.filename().string());
    s.nics.push_back(std::move(n));
  }
  const fs::path ib = sys / "class" / "infiniband";
  for (const auto& dev : sysfs_list(ib)) {
    for (const auto& port : sysfs_list(ib / dev / "ports")) {
      const fs::path dir = ib / dev / "ports" / port;
      IbPortState p;
      p.device = clean_text(dev);
      p.port = std::atoi(port.c_str());
      p.state = sysfs_read(dir / "state", 64);
      p.rate = sysfs_read(dir / "rate", 64);
      for (const char* c : {"link_downed", "symbol_error", "link_error_recovery"})
        if (const long long v = sysfs_number(dir / "counters" / c); v >= 0) p.counters[c] = v;
      s.ib_ports.push_back(std::move(p));
    }
  }
  const fs::path pci = sys / "bus" / "pci" / "devices";
  for (const auto& addr : sysfs_list(pci)) {
    const fs::path dir = pci / addr;
    const std::string cls = sysfs_read(dir / "class", 16), vendor = sysfs_read(dir / "vendor", 16);
    const bool gpu = vendor == "0x10de" && (cls.rfind("0x0300", 0) == 0 || cls.rfind("0x0302", 0) == 0);
    const bool net = cls.rfind("0x02", 0) == 0;
    if (!gpu && !net) continue;
    PcieState p;
    p.address = clean_text(addr);
    p.role = gpu ? "gpu" : "network";
    p.width = sysfs_read(dir / "current_link_width", 32);
    p.max_width = sysfs_read(dir / "max_link_width", 32);
    p.speed = sysfs_read(dir / "current_link_speed", 64);
    p.max_speed = sysfs_read(dir / "max_link_speed", 64);
    p.aer_fatal = aer_total(sysfs_read(dir / "aer_dev_fatal"));
    p.aer_nonfatal = aer_total(sysfs_read(dir / "aer_dev_nonfatal"));
    p.aer_correctable = aer_total(sysfs_read(dir / "aer_dev_correctable"));
    s.pcie.push_back(std::move(p));
  }
  return s;
}

std::vector<Finding> sysfs_state_findings(const SysfsSnapshot& s) {
  std::vector<Finding> out;
  for (const auto& p : s.pcie) {
    const long long w = std::atoll(p.width.c_str()), max = std::atoll(p.max_width.c_str());
    if (w > 0 && max > 0 && w < max) {
      Finding f = sysfs_finding("pcie-link", p.address,
                                "PCIe link trained at x" + std::to_string(w) + " of x" + std::to_string(max));
      f.message = "current_link_width " + p.width + ", max_link_width " + p.max_width;
      f.then = "reseat the " + std::string(p.role == "gpu" ? "GPU" : "card") + " or have the slot checked";
      out.push_back(std::move(f));
    }
  }
  return out;
}

std::vector<Finding> sysfs_changes(const SysfsSnapshot& a, const SysfsSnapshot& b) {
  std::vector<Finding> out;
  auto moved = [](long long before, long long after) { return before >= 0 && after > before ? after - before : 0; };
  for (const auto& n : b.nics) {
    const auto it = std::find_if(a.nics.begin(), a.nics.end(), [&](const NicState& x) { return x.name == n.name; });
    if (it == a.nics.end()) continue;
    if (const long long d = moved(it->carrier_changes, n.carrier_changes)) {
      Finding f = sysfs_finding("nic-link", n.name, "network link flapped");
      f.message = "carrier_changes " + std::to_string(it->carrier_changes) + " -> " + std::to_string(n.carrier_changes);
      f.count = static_cast<std::uint64_t>((d + 1) / 2);  // a flap is two changes: down, then up
      f.cls = FindingClass::node, f.action = Action::check_cable;
      out.push_back(std::move(f));
    }
  }
  for (const auto& p : b.ib_ports) {
    const auto it = std::find_if(a.ib_ports.begin(), a.ib_ports.end(),
                                 [&](const IbPortState& x) { return x.device == p.device && x.port == p.port; });
    if (it == a.ib_ports.end()) continue;
    for (const auto& [name, after] : p.counters) {
      const auto before = it->counters.find(name);
      if (before == it->counters.end()) continue;
      const long long d = moved(before->second, after);
      if (!d) continue;
      Finding f = sysfs_finding("ib-port", p.device + "/" + std::to_string(p.port), "InfiniBand " + name + " grew");
      f.message = name + " " + std::to_string(before->second) + " -> " + std::to_string(after);
      f.count = static_cast<std::uint64_t>(d);
      f.action = Action::check_cable;
      f.cls = name == "symbol_error" ? FindingClass::notice : FindingClass::node;  // errors the link corrected
      out.push_back(std::move(f));
    }
  }
  for (const auto& p : b.pcie) {
    const auto it = std::find_if(a.pcie.begin(), a.pcie.end(), [&](const PcieState& x) { return x.address == p.address; });
    if (it == a.pcie.end()) continue;
    struct Counter { long long before, after; const char* what; FindingClass cls; Action action; };
    for (const Counter& c : {Counter{it->aer_fatal, p.aer_fatal, "PCIe fatal errors counted", FindingClass::node, Action::reboot},
                             Counter{it->aer_nonfatal, p.aer_nonfatal, "PCIe non-fatal errors counted", FindingClass::node, Action::drain},
                             Counter{it->aer_correctable, p.aer_correctable, "PCIe corrected errors counted", FindingClass::notice, Action::none}}) {
      const long long d = moved(c.before, c.after);
      if (!d) continue;
      Finding f = sysfs_finding("pcie-aer", p.address, c.what);
      f.message = std::to_string(c.before) + " -> " + std::to_string(c.after);
      f.count = static_cast<std::uint64_t>(d);
      f.cls = c.cls, f.action = c.action;
      out.push_back(std::move(f));
    }
  }
  return out;
}

nlohmann::json sysfs_json(const SysfsSnapshot& s) {
  nlohmann::json j = {{"nics", nlohmann::json::array()}, {"ib_ports", nlohmann::json::array()}, {"pcie", nlohmann::json::array()}};
  for (const auto& n : s.nics)
    j["nics"].push_back({{"name", n.name}, {"operstate", n.operstate}, {"pci", n.pci},
                         {"speed_mbps", n.speed_mbps}, {"carrier_changes", n.carrier_changes}});
  for (const auto& p : s.ib_ports)
    j["ib_ports"].push_back({{"device", p.device}, {"port", p.port}, {"state", p.state}, {"rate", p.rate}, {"counters", p.counters}});
  for (const auto& p : s.pcie)
    j["pcie"].push_back({{"address", p.address}, {"role", p.role}, {"width", p.width}, {"max_width", p.max_width},
                         {"speed", p.speed}, {"max_speed", p.max_speed}, {"aer_fatal", p.aer_fatal},
                         {"aer_nonfatal", p.aer_nonfatal}, {"aer_correctable", p.aer_correctable}});
  return j;
}

}  // namespace gpudiag::hw
