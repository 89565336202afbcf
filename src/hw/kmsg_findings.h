// Which kernel-log records are hardware evidence (finding.h), by the shapes
// the drivers print them in:
//   NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.
//   nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Fatal, Link 32 ...
//   NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.   NVRM: ... RmInitAdapter failed!
//   NVRM: ... GSP ... timeout/error/failed                 ... NVLink ... fatal/error/failed
//   nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected|Uncorrected (Non-Fatal)|... (AER)
//   EDAC MC0: 1 CE|UE memory read error on ...             mce: [Hardware Error]: ...
//   mlx5_core 0000:3b:00.0 ens1f0np0: Link down            ixgbe ... eth0: NIC Link is Down
// Only the kernel's own records (facility 0) count, only error records make
// findings: start-up lines (EDAC/MCE/AER enabled, nvidia-nvlink initialized)
// and virtual interfaces (veth, docker, bridges, tunnels, lo) never do.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hw/finding.h"
#include "hw/kmsg.h"

namespace gpudiag::hw {

/// True for names of virtual network interfaces (veth*, docker*, br*,
/// virbr*, lo, cni*, flannel*, vxlan*, tun*, tap*, ...).
bool is_virtual_interface(const std::string& name);

/// Reads records in order and keeps their findings; a link that comes back
/// up is noted on the finding of its going down.
class KmsgClassifier {
 public:
  void add(const KmsgRecord& r);
  /// Grouped (finding.h, at most 256 of each budget), with findings that a
  /// stronger one already says dropped (the bare "fallen off the bus" line
  /// beside its Xid 79, GSP lines beside Xid 119/120).
  std::vector<Finding> findings() const;
  std::size_t dropped() const { return dropped_; }

 private:
  std::vector<Finding> all_;
  std::map<std::string, std::size_t> link_down_;  ///< interface -> its last down finding
  mutable std::size_t dropped_ = 0;
};

/// The finding one record shows, nullopt for the rest (link-up lines too).
std::optional<Finding> classify_kmsg(const KmsgRecord& r);

}  // namespace gpudiag::hw
