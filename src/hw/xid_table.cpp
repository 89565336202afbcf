// xid_table.h: the embedded JSON read into a map, checked entry by entry.
#include "hw/xid_table.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "hw/xid_table_data.h"

namespace gpudiag::hw {

std::map<int, XidEntry> parse_xid_table(const std::string& json_text) {
  const auto j = nlohmann::json::parse(json_text);
  std::map<int, XidEntry> out;
  for (const auto& row : j.at("xids")) {
    XidEntry e;
    e.xid = row.at("xid").get<int>();
    e.name = row.at("name").get<std::string>();
    const auto cls = parse_class(row.at("class").get<std::string>());
    if (!cls) throw std::runtime_error("Xid " + std::to_string(e.xid) + ": unknown class");
    e.cls = *cls;
    const std::string action = row.at("action").get<std::string>();
    if (action == "from_message") {
      e.from_message = true;
    } else if (const auto a = parse_action(action)) {
      e.action = *a;
    } else {
      throw std::runtime_error("Xid " + std::to_string(e.xid) + ": unknown action " + action);
    }
    e.sticky = row.value("sticky", false);
    e.then = row.value("then", std::string());
    if (!j.at("sources").contains(row.at("source").get<std::string>()))
      throw std::runtime_error("Xid " + std::to_string(e.xid) + ": source not cited");
    if (!out.emplace(e.xid, e).second)
      throw std::runtime_error("Xid " + std::to_string(e.xid) + " listed twice");
  }
  return out;
}

const std::map<int, XidEntry>& xid_table() {
  static const std::map<int, XidEntry> table = [] {
    std::map<int, XidEntry> t;
    for (std::size_t i = 0; i < kXidActionFiles_count; ++i)
      if (kXidActionFiles[i].text) t = parse_xid_table(kXidActionFiles[i].text);
    return t;
  }();
  return table;
}

std::optional<XidEntry> xid_entry(int xid) {
  const auto& t = xid_table();
  if (auto it = t.find(xid); it != t.end()) return it->second;
  return std::nullopt;
}

}  // namespace gpudiag::hw
