// This node's hardware evidence, gathered in one call: the kernel log's
// findings (kmsg_findings.h) and a sysfs snapshot (sysfs.h) with what it
// shows by itself, each source that could not be read as one line saying
// why. What `gpudiag info` prints and what makes each rank of `gpudiag
// check` on an unfit node say `is broken: Xid 79 (...) on ... at ...: ...`.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hw/finding.h"
#include "hw/kmsg.h"
#include "hw/sysfs.h"

namespace gpudiag::hw {

struct HwSources {
  std::string kmsg = "/dev/kmsg";
  std::string root = "/";  ///< sysfs is read under root/sys
  bool sysfs = true;
};

struct HwEvidence {
  std::vector<Finding> findings;         ///< kernel log first, then sysfs
  std::vector<std::string> unreadable;   ///< "cannot read the kernel log (/dev/kmsg): ..."
  KmsgScan kernel_log;
  std::size_t dropped = 0;               ///< findings past the budget
  double boot_epoch_s = 0;               ///< boot's Unix time, for clock times
  SysfsSnapshot sysfs;
};

HwEvidence collect_hw_evidence(const HwSources& sources = {});

/// Now, in the kernel log's clock (CLOCK_MONOTONIC, microseconds).
std::uint64_t usec_since_boot();
/// The Unix time the kernel log's clock started at.
double boot_epoch_seconds();

/// The node findings that make the node unfit (finding.h, makes_unfit).
std::vector<Finding> unfit_findings(const HwEvidence& e, std::optional<std::uint64_t> since_usec);

/// "" when fit; else the first unfit finding's line, and how many more.
std::string unfit_reason(const HwEvidence& e, std::optional<std::uint64_t> since_usec);

/// The `hardware` object of `gpudiag info --json`.
nlohmann::json hw_evidence_json(const HwEvidence& e);

/// The text lines of `gpudiag info`'s hardware section (no indentation),
/// from hw_evidence_json's object.
std::vector<std::string> hw_evidence_lines(const nlohmann::json& j);

}  // namespace gpudiag::hw
