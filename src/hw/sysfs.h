// The node's links as sysfs shows them, read under a root ("/" on a node, a
// copied tree in tests): each physical NIC (sys/class/net/*, those with a
// `device` link) with its operstate, speed and carrier_changes; each
// InfiniBand port (sys/class/infiniband/*/ports/*) with its state, rate and
// link_downed / symbol_error / link_error_recovery counters; each GPU and
// network PCIe function (sys/bus/pci/devices/*) with its negotiated and
// maximum link width and speed and its AER counters (aer_dev_fatal,
// aer_dev_nonfatal, aer_dev_correctable).
//
// Counters are judged only by their change between two reads (the start and
// the end of a check), never by their value: a port that flapped last month
// is not today's fault. A link trained narrower than its maximum is a notice
// (the speed is not judged: GPUs lower it on their own when idle).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hw/finding.h"

namespace gpudiag::hw {

struct NicState {
  std::string name, operstate, pci;  ///< pci: the function behind it, "" unknown
  long long speed_mbps = -1, carrier_changes = -1;
};

struct IbPortState {
  std::string device;  ///< "mlx5_0"
  int port = 0;
  std::string state, rate;  ///< "4: ACTIVE", "400 Gb/sec (4X NDR)"
  std::map<std::string, long long> counters;  ///< link_downed, symbol_error, link_error_recovery
};

struct PcieState {
  std::string address, role;  ///< "0000:3b:00.0", "gpu" | "network"
  std::string width, max_width, speed, max_speed;
  long long aer_fatal = -1, aer_nonfatal = -1, aer_correctable = -1;
};

struct SysfsSnapshot {
  std::vector<NicState> nics;
  std::vector<IbPortState> ib_ports;
  std::vector<PcieState> pcie;
};

SysfsSnapshot read_sysfs(const std::string& root = "/");

/// "TOTAL_ERR_FATAL 2" (or, without a total line, the sum of the counts) of
/// an aer_dev_* file's text; -1 when it holds no count.
long long aer_total(const std::string& text);

/// What one snapshot shows by itself: links trained narrower than they can.
std::vector<Finding> sysfs_state_findings(const SysfsSnapshot& s);

/// What changed between two reads: carrier changes, IB link_downed /
/// link_error_recovery / symbol_error, AER counts. Untimed findings (a
/// counter's change counts within the window it was read over).
std::vector<Finding> sysfs_changes(const SysfsSnapshot& start, const SysfsSnapshot& end);

nlohmann::json sysfs_json(const SysfsSnapshot& s);

}  // namespace gpudiag::hw
