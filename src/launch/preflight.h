// --preflight: before each round of a rendezvous (rounds.h), every launcher
// checks its own node with gpudiag's own check, and a node the check finds
// broken or slow joins the round at fault, so the round leaves it out while
// at least MIN nodes remain (round_meeting.h), as a node whose rank died of
// SIGBUS is left out.
//
// The check is a one-node job of its own: this binary's `launch --standalone
// --nproc-per-node N --timeout T -- check --timeout T`, with its own store and
// port, so it never meets the job's store or another node's records, and a
// preflight never spends --max-restarts. Its outputs are read bounded (the
// last 16 KiB of each stream) and it is bounded twice: its launcher stops its
// ranks at T (exit 3, "stopped by --timeout"), and a launcher that does not
// end by T + kPreflightSlack is killed here, said as such.
//
// What counts against the node (preflight_fault()): the check found a rank
// broken (exit 1), a rank died of a signal (128 + it), the check did not end
// in time (3, or killed here), or it passed but judged the node slow in its
// JSON report (preflight_report.h: a rank's compute SLOW, the all-reduce's
// bus bandwidth WARN), under --preflight-slow exclude (--preflight-slow warn
// says so and admits the node). What does not: exit 0 with nothing judged
// slow (an unjudged rate, an unreadable report); and exit 2 or 4 (the
// preflight could not run: a usage or internal error, the same on every
// node, which must not leave healthy nodes out), said as a warning instead.
// The report goes to a file in a private folder of its own (mkdtemp),
// removed once read.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch/exit_status.h"
#include "launch/preflight_report.h"
#include "util/env.h"

namespace gpudiag::launch {

/// Seconds past --preflight-timeout before the preflight's own launcher is killed.
inline constexpr double kPreflightSlack = 20;

/// --preflight-slow: what a node the check judged slow gets.
enum class PreflightSlow { exclude, warn };

/// One preflight as it ran: how its launcher ended and what it said.
struct PreflightRun {
  std::optional<ExitStatus> status;  ///< nullopt: killed here at its deadline
  double timeout_s = 60;
  double seconds = 0;         ///< how long it took
  std::string launch_line;    ///< its launcher's last "gpudiag launch: " line, without the prefix
  std::string check_summary;  ///< rank 0's "summary: " line of the check, without the prefix
  PreflightReport report;     ///< what its JSON report judged slow
};

/// What a preflight says of this node.
struct PreflightVerdict {
  /// Why this node is at fault ("preflight: ..."); "" healthy or not judged.
  std::string fault;
  /// One line for this launcher to print ("preflight: ...").
  std::string line;
};

/// The verdict of `run` (pure; see above).
PreflightVerdict preflight_fault(const PreflightRun& run,
                                 PreflightSlow slow = PreflightSlow::exclude);

/// What the preflight of this node runs: the arguments after argv[0];
/// `report`, when given, is where the check writes its JSON report.
std::vector<std::string> preflight_arguments(int nproc_per_node, double timeout_s,
                                             const std::string& report = "");

/// Runs the preflight on this node (nproc ranks, at most timeout_s, plus the
/// slack) with `env` (less GPUDIAG_HISTORY: a preflight records no verdict
/// of its own) and returns how it went. Throws gpudiag::Error when it cannot
/// be started at all.
PreflightRun run_preflight(int nproc_per_node, double timeout_s, const Env& env);

/// What Rounds::set_preflight() is given: runs the preflight before round
/// `round`, says its line, and returns the node's fault ("" none).
std::function<std::string(int round)> preflight_for_rounds(
    int nproc_per_node, double timeout_s, Env env, PreflightSlow slow = PreflightSlow::exclude);

}  // namespace gpudiag::launch
