// kmsg_findings.h: each record is tested against cheap substrings first and
// parsed by hand only when one matches, so a full ring buffer (tens of
// thousands of records) classifies in milliseconds. Parsers read what they
// need and give up on anything else: a line that does not have the shape is
// no finding, never a guess.
#include "hw/kmsg_findings.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "hw/xid_table.h"

namespace gpudiag::hw {

namespace {

constexpr std::size_t kKmsgFindingText = 300;

bool kmsg_pci_char(char c) { return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'; }

/// The PCI address at `at` ("PCI:" prefix dropped, at most 16 characters),
/// "" when there is none.
std::string kmsg_pci_at(const std::string& s, std::size_t at) {
  if (s.compare(at, 4, "PCI:") == 0) at += 4;
  std::size_t end = at;
  while (end < s.size() && end - at <= 16 && kmsg_pci_char(s[end])) ++end;
  std::string addr = s.substr(at, end - at);
  while (!addr.empty() && (addr.back() == '.' || addr.back() == ':')) addr.pop_back();
  return std::count(addr.begin(), addr.end(), ':') >= 1 && addr.size() >= 7 && addr.size() <= 16 ? addr : "";
}

/// The first whitespace-separated word that is a PCI address ("0000:3b:00.0").
std::string kmsg_first_pci(const std::string& s) {
  std::size_t at = 0;
  for (int words = 0; words < 6 && at < s.size(); ++words) {
    const auto end = s.find(' ', at);
    std::string w = s.substr(at, end == std::string::npos ? std::string::npos : end - at);
    while (!w.empty() && w.back() == ':') w.pop_back();
    if (std::count(w.begin(), w.end(), ':') == 2 && kmsg_pci_at(w, 0) == w) return w;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

bool kmsg_contains_ci(const std::string& s, const char* needle) {
  const std::string n(needle);
  return std::search(s.begin(), s.end(), n.begin(), n.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
         }) != s.end();
}

Finding kmsg_base(const KmsgRecord& r, const std::string& kind) {
  Finding f;
  f.kind = kind;
  f.source = "kernel log";
  f.message = r.message.substr(0, kKmsgFindingText);
  f.timed = true;
  f.usec = f.last_usec = r.usec;
  return f;
}

/// "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, text" and its SXid cousin.
std::optional<Finding> kmsg_xid(const KmsgRecord& r, std::size_t at, bool sxid) {
  const std::string& m = r.message;
  at = m.find('(', at);
  if (at == std::string::npos) return std::nullopt;
  const std::string addr = kmsg_pci_at(m, at + 1);
  auto close = m.find("): ", at);
  if (close == std::string::npos || close > at + 24) return std::nullopt;
  std::size_t p = close + 3, digits = 0;
  int xid = 0;
  while (p < m.size() && std::isdigit(static_cast<unsigned char>(m[p])) && digits < 6)
    xid = xid * 10 + (m[p++] - '0'), ++digits;
  if (digits == 0 || digits > 5) return std::nullopt;
  std::string text = p < m.size() && m[p] == ',' ? m.substr(p + 1) : "";
  // The driver's "pid=..., name=..., " (or "pid='<unknown>'") before the text.
  for (const char* key : {"pid=", "name="}) {
    while (!text.empty() && text[0] == ' ') text.erase(0, 1);
    if (text.rfind(key, 0) == 0) {
      const auto comma = text.find(", ");
      text = comma == std::string::npos ? "" : text.substr(comma + 2);
    }
  }
  while (!text.empty() && text[0] == ' ') text.erase(0, 1);
  Finding f = kmsg_base(r, sxid ? "sxid" : "xid");
  f.device = addr;
  f.xid = xid;
  f.message = text.substr(0, kKmsgFindingText);
  if (sxid) {  // NVSwitch: "Fatal" or "Non-fatal" leads the text
    const bool fatal = text.rfind("Fatal", 0) == 0;
    f.what = "SXid " + std::to_string(xid) + (fatal ? " (fatal NVSwitch error)" : " (non-fatal NVSwitch error)");
    f.cls = fatal ? FindingClass::node : FindingClass::notice;
    f.action = fatal ? Action::reboot : Action::none;
    f.sticky = fatal;
    f.then = fatal ? "service the NVSwitch tray if it recurs" : "";
    return f;
  }
  const auto entry = xid_entry(xid);
  if (!entry) {
    f.what = "Xid " + std::to_string(xid);
    f.cls = FindingClass::notice;
    f.action = Action::lookup;
    return f;
  }
  f.what = "Xid " + std::to_string(xid) + " (" + entry->name + ")";
  f.cls = entry->cls;
  f.action = entry->action;
  f.sticky = entry->sticky;
  f.then = entry->then;
  if (entry->from_message) {  // "... changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    const auto to = text.rfind(" to ");
    const std::string wanted = to == std::string::npos ? text : text.substr(to);
    if (kmsg_contains_ci(wanted, "reboot")) f.action = Action::reboot;
    else if (kmsg_contains_ci(wanted, "drain")) f.action = Action::drain;
    else if (kmsg_contains_ci(wanted, "reset")) f.action = Action::reset_gpu;
    else f.cls = FindingClass::notice, f.action = Action::none, f.sticky = false;
  }
  return f;
}

std::optional<Finding> kmsg_aer(const KmsgRecord& r, std::size_t at) {
  const std::string& m = r.message;
  const std::string sev = m.substr(at, 40);
  Finding f = kmsg_base(r, "pcie-aer");
  f.device = kmsg_first_pci(m);
  if (sev.rfind("Corrected", 0) == 0 || sev.rfind("Correctable", 0) == 0) {
    f.what = "PCIe corrected error";
    f.then = "reseat the card or cable and have the slot checked if the count keeps growing";
  } else if (kmsg_contains_ci(sev, "non-fatal")) {
    f.what = "PCIe uncorrected non-fatal error";
    f.cls = FindingClass::node;
    f.action = Action::drain;
  } else if (kmsg_contains_ci(sev, "fatal")) {
    f.what = "PCIe fatal error";
    f.cls = FindingClass::node;
    f.action = Action::reboot;
    f.sticky = true;
    f.then = "drain and service if it recurs";
  } else {
    return std::nullopt;
  }
  return f;
}

/// "EDAC MC0: 1 CE memory read error on ..." / "EDAC MC1: 2 UE ...".
std::optional<Finding> kmsg_edac(const KmsgRecord& r) {
  const std::string& m = r.message;
  const auto colon = m.find(": ");
  if (colon == std::string::npos || colon > 40) return std::nullopt;
  std::size_t p = colon + 2;
  while (p < m.size() && std::isdigit(static_cast<unsigned char>(m[p]))) ++p;
  if (p < m.size() && m[p] == ' ' && p > colon + 2) ++p;
  const std::string kind = m.substr(p, 2);
  if ((kind != "CE" && kind != "UE") || (p + 2 < m.size() && m[p + 2] != ' ')) return std::nullopt;
  Finding f = kmsg_base(r, "host-memory");
  f.device = m.substr(5, colon - 5);
  if (kind == "UE") {
    f.what = "host memory uncorrected error (EDAC)";
    f.cls = FindingClass::node;
    f.action = Action::drain;
    f.sticky = true;
  } else {
    f.what = "host memory corrected error (EDAC)";
    f.then = "replace the DIMM if the count keeps growing";
  }
  return f;
}

/// "[Hardware Error]:" lines: the summary of corrected events, a machine
/// check's status word (bit 61, UC: uncorrected), a firmware (GHES) event's
/// severity. Their many detail lines are no finding of their own.
std::optional<Finding> kmsg_mce(const KmsgRecord& r, std::size_t at) {
  const std::string rest = r.message.substr(at);
  Finding f = kmsg_base(r, "machine-check");
  bool uncorrected = false;
  if (rest.find("Machine check events logged") != std::string::npos) {
    uncorrected = false;
  } else if (const auto bank = rest.find(" Bank "); bank != std::string::npos && rest.find("Machine Check") != std::string::npos) {
    const auto colon = rest.find(": ", bank);
    unsigned long long status = 0;
    if (colon == std::string::npos || std::sscanf(rest.c_str() + colon + 2, "%16llx", &status) != 1)
      return std::nullopt;
    uncorrected = (status >> 61) & 1;
  } else if (const auto sev = rest.find("event severity: "); sev != std::string::npos) {
    const std::string s = rest.substr(sev + 16, 12);
    if (s.rfind("corrected", 0) == 0) uncorrected = false;
    else if (s.rfind("recoverable", 0) == 0 || s.rfind("fatal", 0) == 0) uncorrected = true;
    else return std::nullopt;
  } else {
    return std::nullopt;
  }
  if (uncorrected) {
    f.what = "machine check: uncorrected error";
    f.cls = FindingClass::node;
    f.action = Action::drain;
    f.sticky = true;
  } else {
    f.what = "machine check: corrected errors";
    f.then = "have the node serviced if they keep coming";
  }
  return f;
}

/// The interface a link line names: the word before "Link", less "NIC" and colons.
std::string kmsg_link_interface(const std::string& m, std::size_t at) {
  std::string pre = m.substr(0, at);
  auto trim = [&] {
    while (!pre.empty() && (pre.back() == ' ' || pre.back() == ':')) pre.pop_back();
  };
  trim();
  if (pre.size() >= 3 && pre.compare(pre.size() - 3, 3, "NIC") == 0) pre.resize(pre.size() - 3);
  trim();
  const auto sp = pre.rfind(' ');
  std::string name = sp == std::string::npos ? pre : pre.substr(sp + 1);
  if (name.empty() || name.size() > 15) return "";
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' && c != '@') return "";
  return name;
}

}  // namespace

bool is_virtual_interface(const std::string& name) {
  if (name == "lo") return true;
  for (const char* p : {"veth", "docker", "br", "virbr", "cni", "flannel", "vxlan", "tun", "tap", "cali",
                        "weave", "kube-", "genev", "dummy", "wg", "tailscale", "vnet", "nodelocaldns", "gre",
                        "sit", "ip6tnl", "ipvlan", "macvlan", "vlan"})
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

std::optional<Finding> classify_kmsg(const KmsgRecord& r) {
  if (r.facility != 0) return std::nullopt;  // written by user space, not the kernel
  const std::string& m = r.message;
  if (const auto at = m.find("NVRM: Xid ("); at != std::string::npos) return kmsg_xid(r, at, false);
  if (const auto at = m.find("SXid ("); at != std::string::npos) return kmsg_xid(r, at, true);
  const bool nvrm = m.find("NVRM: ") != std::string::npos;
  if (nvrm && m.find("fallen off the bus") != std::string::npos) {
    Finding f = kmsg_base(r, "gpu-off-bus");
    const auto gpu = m.find("GPU ");
    if (gpu != std::string::npos) f.device = kmsg_pci_at(m, m.compare(gpu + 4, 3, "at ") == 0 ? gpu + 7 : gpu + 4);
    f.what = "GPU fallen off the bus";
    f.cls = FindingClass::node, f.action = Action::reboot, f.sticky = true;
    f.then = "drain and service if it recurs";
    return f;
  }
  if (nvrm && m.find("RmInitAdapter failed") != std::string::npos) {
    Finding f = kmsg_base(r, "gpu-init");
    f.device = kmsg_first_pci(m.substr(m.find("NVRM: ") + 6));
    f.what = "GPU failed to initialise (RmInitAdapter failed)";
    f.cls = FindingClass::node, f.action = Action::reboot, f.sticky = true;
    f.then = "drain and service if it recurs";
    return f;
  }
  const bool failed = kmsg_contains_ci(m, "error") || kmsg_contains_ci(m, "fail") ||
                      kmsg_contains_ci(m, "timeout") || kmsg_contains_ci(m, "fatal");
  if (nvrm && failed && m.find("GSP") != std::string::npos) {
    Finding f = kmsg_base(r, "gsp");
    f.what = "GSP firmware error";
    f.cls = FindingClass::node, f.action = Action::reset_gpu, f.sticky = true;
    f.then = "reboot if the reset does not clear it";
    return f;
  }
  if (failed && kmsg_contains_ci(m, "nvlink") && !kmsg_contains_ci(m, "initializ") &&
      !kmsg_contains_ci(m, "registered")) {
    Finding f = kmsg_base(r, "nvlink");
    f.device = kmsg_first_pci(m);
    f.what = "NVLink error";
    f.cls = FindingClass::node, f.action = Action::reset_gpu, f.sticky = true;
    f.then = "check the NVLink/NVSwitch connection; service if it recurs";
    return f;
  }
  if (const auto at = m.find("PCIe Bus Error: severity="); at != std::string::npos) return kmsg_aer(r, at + 25);
  if (m.rfind("EDAC ", 0) == 0) return kmsg_edac(r);
  if (const auto at = m.find("[Hardware Error]: "); at != std::string::npos) return kmsg_mce(r, at + 18);
  for (const char* down : {"Link is Down", "Link down"}) {
    const auto at = m.find(down);
    if (at == std::string::npos) continue;
    const std::string nic = kmsg_link_interface(m, at);
    if (nic.empty() || is_virtual_interface(nic)) return std::nullopt;
    Finding f = kmsg_base(r, "nic-link");
    f.device = nic;
    f.what = "network link down";
    f.cls = FindingClass::node, f.action = Action::check_cable;
    return f;
  }
  return std::nullopt;
}

void KmsgClassifier::add(const KmsgRecord& r) {
  if (auto f = classify_kmsg(r)) {
    if (f->kind == "nic-link") link_down_[f->device] = all_.size();
    if (all_.size() < (1u << 16)) all_.push_back(std::move(*f));
    return;
  }
  if (r.facility != 0 || link_down_.empty()) return;
  for (const char* up : {"Link is Up", "Link up"}) {
    const auto at = r.message.find(up);
    if (at == std::string::npos) continue;
    const auto it = link_down_.find(kmsg_link_interface(r.message, at));
    if (it == link_down_.end()) return;
    Finding& down = all_[it->second];
    char after[64];
    std::snprintf(after, sizeof after, " (up again %.1f s later)",
                  r.usec >= down.usec ? static_cast<double>(r.usec - down.usec) / 1e6 : 0.0);
    if (down.message.find(" (up again") == std::string::npos) down.message += after;
    link_down_.erase(it);
    return;
  }
}

std::vector<Finding> KmsgClassifier::findings() const {
  bool off_bus_xid = false, gsp_xid = false;
  for (const auto& f : all_) {
    off_bus_xid = off_bus_xid || (f.kind == "xid" && f.xid == 79);
    gsp_xid = gsp_xid || (f.kind == "xid" && (f.xid == 119 || f.xid == 120));
  }
  std::vector<Finding> kept;
  for (const auto& f : all_)
    if (!(off_bus_xid && f.kind == "gpu-off-bus") && !(gsp_xid && f.kind == "gsp")) kept.push_back(f);
  return group_findings(kept, 256, &dropped_);
}

}  // namespace gpudiag::hw
