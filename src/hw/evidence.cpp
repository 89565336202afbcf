// evidence.h: one read of each source, then the verdict and its two renderings.
// Text and JSON say the same things; the JSON keeps each field apart.
#include "hw/evidence.h"

#include <spdlog/spdlog.h>

#include <ctime>

#include "hw/kmsg_findings.h"

namespace gpudiag::hw {

std::uint64_t usec_since_boot() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

double boot_epoch_seconds() {
  timespec real{};
  clock_gettime(CLOCK_REALTIME, &real);
  const double now = static_cast<double>(real.tv_sec) + static_cast<double>(real.tv_nsec) / 1e9;
  return now - static_cast<double>(usec_since_boot()) / 1e6;
}

HwEvidence collect_hw_evidence(const HwSources& sources) {
  HwEvidence e;
  e.boot_epoch_s = boot_epoch_seconds();
  KmsgClassifier classifier;
  e.kernel_log = scan_kernel_log(sources.kmsg, [&](const KmsgRecord& r) { classifier.add(r); });
  if (!e.kernel_log.error.empty()) e.unreadable.push_back(e.kernel_log.error);
  e.findings = classifier.findings();
  e.dropped = classifier.dropped();
  if (sources.sysfs) {
    e.sysfs = read_sysfs(sources.root);
    for (auto& f : sysfs_state_findings(e.sysfs)) e.findings.push_back(std::move(f));
  }
  if (sources.nvml) {
    e.nvml = read_nvml_counters(sources.nvml_lib ? *sources.nvml_lib : load_nvml());
    for (auto& f : nvml_state_findings(e.nvml)) e.findings.push_back(std::move(f));
  }
  return e;
}

HwEvidence collect_hw_changes(const HwSources& sources, const SysfsSnapshot& start) {
  HwEvidence e = collect_hw_evidence(sources);
  if (sources.sysfs)
    for (auto& f : sysfs_changes(start, e.sysfs)) e.findings.push_back(std::move(f));
  return e;
}

HwEvidence collect_hw_changes(const HwSources& sources, const HwEvidence& start) {
  HwEvidence e = collect_hw_changes(sources, start.sysfs);
  if (sources.nvml)
    for (auto& f : nvml_changes(start.nvml, e.nvml)) e.findings.push_back(std::move(f));
  return e;
}

HwSources hw_sources_from_env(const Env& env) {
  HwSources s;
  if (const auto root = env.get("GPUDIAG_TEST_SYSFS_ROOT"); root && !root->empty()) {
    if (root->front() == '/' && root->size() <= 4096 && root->find('\0') == std::string::npos)
      s.root = *root;
    else
      spdlog::warn("ignoring GPUDIAG_TEST_SYSFS_ROOT: not an absolute path");
  }
  return s;
}

std::map<std::string, int> finding_counts(const HwEvidence& e) {
  std::map<std::string, int> out;
  for (const auto& f : e.findings) ++out[class_name(f.cls) + "/" + action_id(f.action)];
  return out;
}

std::vector<Finding> unfit_findings(const HwEvidence& e, std::optional<std::uint64_t> since_usec) {
  std::vector<Finding> out;
  for (const auto& f : e.findings)
    if (makes_unfit(f, since_usec)) out.push_back(f);
  return out;
}

std::string unfit_reason(const HwEvidence& e, std::optional<std::uint64_t> since_usec,
                         bool quote_counters) {
  const auto unfit = unfit_findings(e, since_usec);
  if (unfit.empty()) return "";
  Finding first = unfit.front();
  // A counter's change (untimed, its message "carrier_changes 7 -> 9").
  if (quote_counters && !first.timed && !first.message.empty())
    (first.device.empty() ? first.what : first.device) += " (" + first.message + ")";
  std::string line = finding_line(first, e.boot_epoch_s);
  if (unfit.size() > 1)
    line += " (+" + std::to_string(unfit.size() - 1) + " more hardware finding" +
            (unfit.size() == 2 ? "" : "s") + ": gpudiag info lists them)";
  return line;
}

nlohmann::json hw_evidence_json(const HwEvidence& e) {
  nlohmann::json j;
  const auto unfit = unfit_findings(e, std::nullopt);
  j["verdict"] = unfit.empty() ? "fit" : "unfit";
  j["findings"] = nlohmann::json::array();
  for (const auto& f : e.findings) {
    nlohmann::json o = {{"kind", f.kind}, {"source", f.source}, {"device", f.device},
                        {"what", f.what}, {"message", f.message}, {"class", class_name(f.cls)},
                        {"action", action_id(f.action)}, {"action_text", action_text(f.action)},
                        {"then", f.then}, {"sticky", f.sticky}, {"count", f.count},
                        {"unfit", makes_unfit(f, std::nullopt)}, {"line", finding_line(f, e.boot_epoch_s)}};
    if (f.xid >= 0) o["xid"] = f.xid;
    if (f.timed) {
      o["usec"] = f.usec, o["last_usec"] = f.last_usec;
      o["time"] = clock_time(f.usec, e.boot_epoch_s);
    }
    j["findings"].push_back(std::move(o));
  }
  j["findings_dropped"] = e.dropped;
  j["unreadable"] = e.unreadable;
  j["kernel_log"] = {{"records", e.kernel_log.records},
                     {"malformed", e.kernel_log.malformed},
                     {"overwritten", e.kernel_log.overwritten},
                     {"stopped_at_limit", e.kernel_log.stopped_at_limit},
                     {"read", e.kernel_log.error.empty()}};
  j["sysfs"] = sysfs_json(e.sysfs);
  j["nvml"] = nvml_json(e.nvml);
  return j;
}

std::vector<std::string> hw_evidence_lines(const nlohmann::json& j) {
  // Rendered from the JSON, so `info` and `info --json` cannot disagree; the
  // JSON may be a stranger's (a record re-read): every field is optional.
  std::vector<std::string> out;
  auto str = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string();
  };
  auto num = [](const nlohmann::json& o, const char* k) {
    return o.contains(k) && o[k].is_number() ? o[k].get<long long>() : -1LL;
  };
  auto flag = [](const nlohmann::json& o, const char* k) {
    return o.is_object() && o.contains(k) && o[k].is_boolean() && o[k].get<bool>();
  };
  const auto& findings = j.value("findings", nlohmann::json::array());
  std::size_t unfit = 0;
  for (const auto& f : findings) unfit += flag(f, "unfit") ? 1 : 0;
  const auto& log = j.value("kernel_log", nlohmann::json::object());
  // "none" only where the kernel log was read: unread, nothing is known.
  std::string head = unfit ? "node UNFIT: " + std::to_string(unfit) + " finding" + (unfit == 1 ? "" : "s") + " to act on"
                     : !findings.empty() ? "node fit"
                     : flag(log, "read") ? "none"
                                         : "not known (the kernel log was not read)";
  if (flag(log, "read")) head += " (kernel log: " + std::to_string(num(log, "records")) + " records read)";
  out.push_back(head);
  for (const auto& f : findings) {
    std::string tag = str(f, "class");
    if (tag == "workload") tag += ", the node is fine";
    if (tag == "node" && !flag(f, "unfit")) tag += ", counts only within a job's run";
    std::string line = tag + ": " + str(f, "line");
    if (!str(f, "then").empty()) line += "; " + str(f, "then");
    if (!str(f, "message").empty()) line += " [" + str(f, "message") + "]";
    out.push_back(line);
  }
  if (num(j, "findings_dropped") > 0) out.push_back(std::to_string(num(j, "findings_dropped")) + " more findings not kept");
  for (const auto& u : j.value("unreadable", nlohmann::json::array()))
    if (u.is_string()) out.push_back(u.get<std::string>());
  const auto& s = j.value("sysfs", nlohmann::json::object());
  for (const auto& n : s.value("nics", nlohmann::json::array()))
    out.push_back("nic " + str(n, "name") + ": " + str(n, "operstate") +
                  (num(n, "speed_mbps") > 0 ? ", " + std::to_string(num(n, "speed_mbps")) + " Mb/s" : "") +
                  (num(n, "carrier_changes") >= 0 ? ", carrier_changes " + std::to_string(num(n, "carrier_changes")) : ""));
  for (const auto& p : s.value("ib_ports", nlohmann::json::array())) {
    std::string line = "ib " + str(p, "device") + "/" + std::to_string(num(p, "port")) + ": " + str(p, "state") +
                       ", " + str(p, "rate");
    for (const auto& [k, v] : p.value("counters", nlohmann::json::object()).items())
      if (v.is_number()) line += ", " + k + " " + std::to_string(v.get<long long>());
    out.push_back(line);
  }
  for (const auto& p : s.value("pcie", nlohmann::json::array())) {
    std::string line = "pcie " + str(p, "address") + " (" + str(p, "role") + "): ";
    line += str(p, "width").empty() ? "link width not reported"
                                    : "x" + str(p, "width") + " of x" + str(p, "max_width");
    if (!str(p, "speed").empty()) line += ", " + str(p, "speed") + " of " + str(p, "max_speed");
    if (num(p, "aer_fatal") >= 0)
      line += ", AER fatal " + std::to_string(num(p, "aer_fatal")) + ", non-fatal " +
              std::to_string(num(p, "aer_nonfatal")) + ", corrected " + std::to_string(num(p, "aer_correctable"));
    out.push_back(line);
  }
  if (j.contains("nvml"))
    for (auto& line : nvml_lines(j["nvml"])) out.push_back(std::move(line));
  return out;
}

}  // namespace gpudiag::hw
