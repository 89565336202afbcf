// Whether an attempt's end points at this node rather than at the workload,
// so that the next round of the rendezvous may go on without it
// (round_meeting.h).
//
// A node is at fault when one of its ranks died of a signal it did not ask
// for: SIGBUS, SIGSEGV, SIGILL, SIGFPE (a fault of memory or of the machine as
// the process saw it), or SIGKILL that the launcher did not send and that no
// OOM kill explains (memory_evidence.h: the cgroup's oom_kill counter, the
// kernel's "Killed process" line; an OOM kill is the workload's). A rank that
// exited with a status, however non-zero (a Python exception, sys.exit), a
// rank killed by the launcher (after a sibling failed, a deadline), and the
// signals a process sends itself or is sent to stop (SIGABRT, SIGTERM,
// SIGINT, SIGHUP, SIGPIPE, SIGUSR1/2) are not the node's. A failed attempt
// whose node's kernel log holds node-class evidence logged since the attempt
// started (hw/kernel_note.h: an Xid 79, a GPU fallen off the bus, ...) is the
// node's too, whatever its ranks died of.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch/summary.h"

namespace gpudiag::launch {

/// Whether a rank killed by `signal` (not by the launcher) is the node's fault,
/// before any OOM evidence: SIGBUS, SIGSEGV, SIGILL, SIGFPE, SIGKILL.
bool node_signal(int signal);

/// Why this node is at fault, from its ranks' outcomes (index = local rank),
/// or nullopt. `first_rank`: the global rank of local rank 0; `host` names the
/// node; `oom_killed(local)`: whether an OOM kill explains that rank's SIGKILL.
/// "rank 5 [node-3-1] was killed by SIGBUS, a signal it did not ask for".
std::optional<std::string> node_fault(const std::vector<RankOutcome>& outcomes, int first_rank,
                                      const std::string& host,
                                      const std::function<bool(int)>& oom_killed);

/// The first of a kernel note's lines that is node-class evidence ("node: ..."),
/// as a reason: "the kernel log of HOST: Xid 79 (...) ...: reboot the node".
std::optional<std::string> node_class_evidence(const std::vector<std::string>& note_lines,
                                               const std::string& host);

/// node_class_evidence() of `kmsg` since `attempt_start_usec` (the kernel
/// log's clock, hw::usec_since_boot()).
std::optional<std::string> kernel_fault(std::uint64_t attempt_start_usec, const std::string& host,
                                        const std::string& kmsg = "/dev/kmsg");

}  // namespace gpudiag::launch
