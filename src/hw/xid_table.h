// What to do about each NVIDIA Xid: the table in data/xid-actions.json (its
// sources are cited there), parsed once. An Xid the table does not list is a
// notice ("look it up"), never a reason to call a node unfit: the table, not
// a guess, decides what fails a node.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "hw/finding.h"

namespace gpudiag::hw {

struct XidEntry {
  int xid = 0;
  std::string name;  ///< "GPU fallen off the bus"
  FindingClass cls = FindingClass::notice;
  Action action = Action::lookup;
  bool from_message = false;  ///< Xid 154: the driver's line names the action
  bool sticky = false;
  std::string then;
};

/// Parses the table's JSON text; throws std::runtime_error naming what is wrong.
std::map<int, XidEntry> parse_xid_table(const std::string& json_text);

/// The compiled-in table.
const std::map<int, XidEntry>& xid_table();

std::optional<XidEntry> xid_entry(int xid);

}  // namespace gpudiag::hw
