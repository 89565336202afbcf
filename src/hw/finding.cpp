// finding.h: names, the unfit rule, the one-line verdict and grouping.
#include "hw/finding.h"

#include <ctime>
#include <map>
#include <tuple>

#include "util/text.h"

namespace gpudiag::hw {

std::string class_name(FindingClass c) {
  switch (c) {
    case FindingClass::workload: return "workload";
    case FindingClass::notice: return "notice";
    case FindingClass::node: return "node";
  }
  return "notice";
}

std::string action_id(Action a) {
  switch (a) {
    case Action::none: return "none";
    case Action::restart_app: return "restart_app";
    case Action::reset_gpu: return "reset_gpu";
    case Action::reboot: return "reboot";
    case Action::drain: return "drain";
    case Action::check_cable: return "check_cable";
    case Action::lookup: return "lookup";
  }
  return "none";
}

std::string action_text(Action a) {
  switch (a) {
    case Action::none: return "nothing to do on the node";
    case Action::restart_app: return "restart the application";
    case Action::reset_gpu: return "reset the GPU";
    case Action::reboot: return "reboot the node";
    case Action::drain: return "drain the node and have it serviced";
    case Action::check_cable: return "check the cable";
    case Action::lookup: return "look it up in NVIDIA's Xid catalogue";
  }
  return "";
}

std::optional<Action> parse_action(const std::string& id) {
  for (Action a : {Action::none, Action::restart_app, Action::reset_gpu, Action::reboot,
                   Action::drain, Action::check_cable, Action::lookup})
    if (action_id(a) == id) return a;
  return std::nullopt;
}

std::optional<FindingClass> parse_class(const std::string& id) {
  for (FindingClass c : {FindingClass::workload, FindingClass::notice, FindingClass::node})
    if (class_name(c) == id) return c;
  return std::nullopt;
}

bool makes_unfit(const Finding& f, std::optional<std::uint64_t> since_usec) {
  if (f.cls != FindingClass::node) return false;
  if (f.sticky) return true;
  if (!since_usec) return false;
  // An untimed finding is a counter's change between two reads of the window.
  return !f.timed || f.last_usec >= *since_usec;
}

std::string clock_time(std::uint64_t usec, double boot_epoch_s) {
  const std::time_t t = static_cast<std::time_t>(boot_epoch_s + static_cast<double>(usec) / 1e6);
  std::tm tm{};
  if (!localtime_r(&t, &tm)) return "??:??:??";
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

std::string finding_line(const Finding& f, double boot_epoch_s) {
  std::string line = f.what;
  if (!f.device.empty()) line += " on " + f.device;
  if (f.timed) line += " at " + clock_time(f.usec, boot_epoch_s);
  if (f.count > 1) line += " (" + std::to_string(f.count) + " times)";
  if (f.action != Action::none) line += ": " + action_text(f.action);
  return clean_text(line);
}

std::vector<Finding> group_findings(const std::vector<Finding>& all, std::size_t max,
                                    std::size_t* dropped) {
  std::vector<Finding> out;
  std::map<std::tuple<std::string, std::string, int, std::string>, std::size_t> index;
  std::size_t lost = 0, nodes = 0;  // node findings have a budget of their own:
  for (const auto& f : all) {
    const auto key = std::make_tuple(f.kind, f.device, f.xid, f.what);
    if (auto it = index.find(key); it != index.end()) {
      Finding& g = out[it->second];
      g.count += f.count;
      if (f.last_usec > g.last_usec) g.last_usec = f.last_usec;
      continue;
    }
    const bool node = f.cls == FindingClass::node;  // a flood of notices cannot hide them
    if ((node ? nodes : out.size() - nodes) >= max) {
      ++lost;
      continue;
    }
    nodes += node ? 1 : 0;
    index[key] = out.size();
    out.push_back(f);
  }
  if (dropped) *dropped = lost;
  return out;
}

}  // namespace gpudiag::hw
