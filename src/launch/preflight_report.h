// --preflight's reading of the check's own JSON report (gpudiag-check/1,
// docs/json.md): the slowness the check judged on this node. A check that
// passes (exit status 0) may still have warned that a rank computes below
// 80% of its model's median (compute SLOW) or that the all-reduce's bus
// bandwidth is below 80% of the hardware's figure (WARN); the preflight
// counts those against the node, in the check's own numbers.
//
// Only what the check judged counts: a rank's compute verdict `slow` where
// the document and the rank both say the rate was judged (never on the host
// backend, never where ranks outnumber CPUs), and `expected_busbw.verdict`
// `WARN` (on the host backend it is `not applicable`). The document comes
// from outside this process: it is read bounded (kPreflightReportMax bytes,
// a regular file, no symlink) and validated field by field; a missing,
// oversized or malformed document is "not judged", never a fault.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::launch {

/// The largest check document read (a one-node check: a few KiB a rank).
inline constexpr std::size_t kPreflightReportMax = 1024 * 1024;

/// What the check's report says of this node's speed.
struct PreflightReport {
  bool judged = false;            ///< a valid gpudiag-check/1 document was read
  std::string not_judged;         ///< why not ("" when judged, or never asked)
  std::vector<std::string> slow;  ///< the check's slow findings (at most a few)
};

/// Judges the text of a check document (pure).
PreflightReport preflight_report_from_text(std::string_view text);

/// Reads the document at `path` (bounded, see above) and judges it.
PreflightReport read_preflight_report(const std::string& path);

}  // namespace gpudiag::launch
