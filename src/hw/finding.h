// A piece of hardware evidence about this node, whatever read it (the kernel
// log, sysfs counters), and what to do about it. Every finding has a class:
//   workload  the application's fault (Xid 13, 31, 43, 45): noted, the node is fine
//   notice    the node is fine, but it is worth knowing (a corrected error, a
//             contained ECC error, an Xid the table does not know)
//   node      the node is unfit until the action is taken
// and one action (reset the GPU, reboot, drain and service, check the cable,
// ...). A node finding that only a GPU reset or a reboot clears is "sticky":
// it counts whenever it was logged since boot; the others (a link that went
// down, a non-fatal PCIe error) count only within the window being judged
// (a check's run), so a link flap at boot does not fail today's job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag::hw {

enum class FindingClass { workload, notice, node };
enum class Action { none, restart_app, reset_gpu, reboot, drain, check_cable, lookup };

struct Finding {
  std::string kind;     ///< "xid", "sxid", "gpu-off-bus", "gpu-init", "gsp", "nvlink", "pcie-aer",
                        ///< "host-memory", "machine-check", "nic-link", "ib-port", "pcie-link"
  std::string source;   ///< "kernel log", "sysfs"
  std::string device;   ///< "0000:3b:00" (as the driver wrote it), "eth0", "mlx5_0/1", "MC0"
  int xid = -1;         ///< Xid or SXid number, -1 otherwise
  std::string what;     ///< the headline: "Xid 79 (GPU fallen off the bus)"
  std::string message;  ///< the evidence as read (escaped, cut)
  FindingClass cls = FindingClass::notice;
  Action action = Action::none;
  std::string then;     ///< what to do if it recurs ("" none)
  bool sticky = false;
  bool timed = false;             ///< usec below is a kernel-log time
  std::uint64_t usec = 0;         ///< first seen, microseconds since boot
  std::uint64_t last_usec = 0;    ///< last seen
  std::uint64_t count = 1;        ///< records grouped into it
};

std::string class_name(FindingClass c);  ///< "workload", "notice", "node"
std::string action_id(Action a);         ///< "reset_gpu" (JSON)
std::string action_text(Action a);       ///< "reset the GPU"
std::optional<Action> parse_action(const std::string& id);
std::optional<FindingClass> parse_class(const std::string& id);

/// True when `f` makes the node unfit: a node finding, sticky, or seen at or
/// after `since_usec` (nullopt: no window, so only the sticky ones count);
/// an untimed one (a counter that moved between two reads) counts in a window.
bool makes_unfit(const Finding& f, std::optional<std::uint64_t> since_usec);

/// "HH:MM:SS" local time of `usec` after boot (boot_epoch_s: boot's Unix time).
std::string clock_time(std::uint64_t usec, double boot_epoch_s);

/// The one-line verdict: "Xid 79 (GPU fallen off the bus) on 0000:3b:00 at
/// 12:03:44: reboot the node" (the action's words; "" for `none`).
std::string finding_line(const Finding& f, double boot_epoch_s);

/// Findings that are the same thing on the same device (kind, device, xid,
/// headline) merged into one with a count and first/last times, in order of
/// first appearance; at most `max` kept (`dropped` counts the rest).
std::vector<Finding> group_findings(const std::vector<Finding>& all, std::size_t max,
                                    std::size_t* dropped = nullptr);

}  // namespace gpudiag::hw
