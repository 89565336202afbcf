// This node's hardware evidence, gathered in one call: the kernel log's
// findings (kmsg_findings.h), NVML's GPU counters (nvml_counters.h) and a
// sysfs snapshot (sysfs.h) with what it
// shows by itself, each source that could not be read as one line saying
// why. What `gpudiag info` prints and what makes each rank of `gpudiag
// check` on an unfit node say `is broken: Xid 79 (...) on ... at ...: ...`.
// A check reads twice: at its start (the kernel log since boot, a sysfs
// snapshot) and at its end (the kernel log again, and what sysfs's counters
// did in between: collect_hw_changes).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hw/finding.h"
#include "hw/kmsg.h"
#include "hw/nvml_counters.h"
#include "hw/sysfs.h"
#include "util/env.h"

namespace gpudiag::hw {

struct HwSources {
  std::string kmsg = "/dev/kmsg";
  std::string root = "/";  ///< sysfs is read under root/sys
  bool sysfs = true;
  bool nvml = true;
  /// The NVML to read (tests give a table of their own); null: the one this
  /// process loads (world/nvml.h load_nvml).
  const NvmlLibrary* nvml_lib = nullptr;
};

struct HwEvidence {
  std::vector<Finding> findings;         ///< kernel log first, then sysfs
  std::vector<std::string> unreadable;   ///< "cannot read the kernel log (/dev/kmsg): ..."
  KmsgScan kernel_log;
  std::size_t dropped = 0;               ///< findings past the budget
  double boot_epoch_s = 0;               ///< boot's Unix time, for clock times
  SysfsSnapshot sysfs;
  NvmlSnapshot nvml;
};

HwEvidence collect_hw_evidence(const HwSources& sources = {});

/// The end of a window opened by `start` (a collect_hw_evidence of the same
/// sources): the kernel log read again, and sysfs's counters compared with
/// `start.sysfs` (sysfs_changes), their changes added as untimed findings.
HwEvidence collect_hw_changes(const HwSources& sources, const SysfsSnapshot& start);
/// The same, with NVML's counters compared with `start.nvml` too.
HwEvidence collect_hw_changes(const HwSources& sources, const HwEvidence& start);

/// The sources a rank reads: /dev/kmsg and "/", unless GPUDIAG_TEST_SYSFS_ROOT
/// names another root for sysfs (for tests only: a copied tree whose counters
/// a test changes; an absolute path of at most 4096 bytes, else ignored with
/// one warning).
HwSources hw_sources_from_env(const Env& env);

/// How many findings of each "class/action" ("node/reboot", "workload/none")
/// the evidence holds: the metrics' gauge per class.
std::map<std::string, int> finding_counts(const HwEvidence& e);

/// Now, in the kernel log's clock (CLOCK_MONOTONIC, microseconds).
std::uint64_t usec_since_boot();
/// The Unix time the kernel log's clock started at.
double boot_epoch_seconds();

/// The node findings that make the node unfit (finding.h, makes_unfit).
std::vector<Finding> unfit_findings(const HwEvidence& e, std::optional<std::uint64_t> since_usec);

/// "" when fit; else the first unfit finding's line, and how many more. With
/// `quote_counters`, a counter's change is quoted after its device
/// ("network link flapped on eth0 (carrier_changes 7 -> 9): check the cable").
std::string unfit_reason(const HwEvidence& e, std::optional<std::uint64_t> since_usec,
                         bool quote_counters = false);

/// The `hardware` object of `gpudiag info --json`.
nlohmann::json hw_evidence_json(const HwEvidence& e);

/// The text lines of `gpudiag info`'s hardware section (no indentation),
/// from hw_evidence_json's object.
std::vector<std::string> hw_evidence_lines(const nlohmann::json& j);

}  // namespace gpudiag::hw
