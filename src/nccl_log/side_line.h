// Lines a job's log carries beside NCCL's own that say a collective failed: PyTorch's
// ProcessGroupNCCL watchdog (timeouts, the sequence numbers each rank had reached, the process
// taken down) and NCCL's diagnostics report (NCCL DIAG, NCCL 2.31+).
//
// PyTorch logs through c10/glog, so a line reads "[rank0]:[E1218 20:27:21.426415540
// ProcessGroupNCCL.cpp:629] [Rank 0] MESSAGE" (torch 2.2+ puts "[rankN]:" in front), "[E
// ProcessGroupNCCL.cpp:458] [Rank 0] MESSAGE" (1.x-2.1), with launcher prefixes before it as
// any log line may have (line.h). The rank in the message is the rank in its process group,
// named by "[Rank N]" (1.x-2.2, and WorkNCCL's lines in every version), "[PG 3 Rank 4]" (2.3)
// or "[PG ID 0 PG GUID 0(default_pg) Rank 1]" (2.4+). The messages, as ProcessGroupNCCL.cpp
// writes them (pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp, the function
// named):
//
//   timeout          WorkNCCL::checkTimeout (1.x: ncclCommWatchdogInternal): "Watchdog caught
//                    collective operation timeout: WorkNCCL(SeqNum=42, OpType=BROADCAST,
//                    NumelIn=.., NumelOut=.., Timeout(ms)=600000) ran for 600081 milliseconds
//                    before timing out." (older 1.x: "TensorShape=[..]" in place of the Numel
//                    fields, or no SeqNum)
//   blocking_timeout WorkNCCL::synchronizeInternal: "Work WorkNCCL(...) timed out in blocking
//                    wait (NCCL_BLOCKING_WAIT=1)."
//   seq_status       2.3+ watchdogHandler / workCleanupLoop: "Timeout at NCCL work: 42, last
//                    enqueued NCCL work: 42, last completed NCCL work: 41." (2.3-2.5),
//                    "Exception (either an error or timeout) detected by watchdog at work: 42,
//                    ..." (2.4-2.6), "Work timeout is detected by watchdog at work: ..." and
//                    "NCCL error is detected by watchdog at work: ..." (2.7+); the heartbeat
//                    monitor's "Received a dump signal due to a collective timeout from rank 7
//                    ... Last enqueued NCCL work: 41, last completed NCCL work: 41." (2.5+, on
//                    ranks that did not time out themselves); and the INFO line "NCCL Work update
//                    periodically: last enqueued NCCL work: ..., last completed ..." (2.4+)
//   failed           WorkNCCL::handleException: "Some NCCL operations have failed or timed out.
//                    Due to the asynchronous nature of CUDA kernels, ..."
//   teardown         the same function: "To avoid data inconsistency, we are taking the entire
//                    process down." (older 1.x handleNCCLGuard: one line, "... To avoid this
//                    inconsistency, we are taking the entire process down.")
//   watchdog_error   ncclCommWatchdog: "NCCL watchdog thread terminated with exception: WHAT"
//                    (1.x-2.2), "Process group watchdog thread terminated with exception: WHAT"
//                    (2.3+); WHAT is the timeout above, a CUDA error or an NCCL error
//   heartbeat        heartbeatMonitor: "NCCL monitor thread timeout", "monitoring thread detects
//                    no heartbeat" (2.2), "Heartbeat monitor timed out!", "ProcessGroupNCCL's
//                    watchdog got stuck for N seconds" (2.3+): the watchdog itself hung
//
// NCCL's diagnostics (NVIDIA/nccl src/diagnostics.cc ncclRunDiagnostics, src/diagnostics/p2p.cc
// ncclDiagP2pReport, src/diagnostics/ib_write_bw.cc) print "NCCL DIAG [OK] ...", "NCCL DIAG
// [INFO] ..." and framing lines to rank 0's standard output, with no host part.
//
// Lines that merely mention these words are not matched: "NCCL watchdog thread started!",
// "terminated normally", "(Watchdog caught exception: driver shutting down", the TIMEOUT(ms) of
// "ProcessGroupNCCL initialization options" are healthy INFO lines.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpudiag::nccl_log {

enum class SideKind {
  timeout,
  blocking_timeout,
  seq_status,
  failed,
  teardown,
  watchdog_error,
  heartbeat,
  diag,
};

/// Where a seq_status line comes from: the watchdog's error path (the rank's own failure at
/// work `at`), a flight-recorder dump asked for by another rank, or the periodic INFO update.
enum class StatusSource { error, dump, periodic };

struct SideLine {
  SideKind kind = SideKind::timeout;
  std::string launcher;    ///< launcher prefix as written ("[rank3]:"), empty when none
  int launcher_rank = -1;  ///< the rank that prefix names
  int rank = -1;           ///< "[Rank N]": the rank in its process group
  std::string pg;          ///< "[PG 3 ...]" / "[PG ID 3 ...]" -> "3"; empty when not printed
  std::string pg_desc;     ///< "PG GUID 0(default_pg)" -> "default_pg"
  long long seq = -1;      ///< SeqNum=, or "at work: N" / "Timeout at NCCL work: N"
  std::string op;          ///< OpType=
  long long timeout_ms = -1, ran_ms = -1;
  bool has_status = false;  ///< enqueued/completed read (either may be -1: none yet)
  long long enqueued = -1, completed = -1;
  StatusSource source = StatusSource::error;
  bool diag_issue = false;  ///< "NCCL DIAG [INFO] ...": a check failed or could not complete
  std::string detail;       ///< watchdog_error: WHAT; diag: the text after "NCCL DIAG "
};

/// Parses a line that is not an NCCL log line; nullopt when it is none of the above.
std::optional<SideLine> parse_side_line(std::string_view raw);

/// True when a timeout's or watchdog error's text is a collective timeout.
bool is_timeout_text(std::string_view text);

}  // namespace gpudiag::nccl_log
