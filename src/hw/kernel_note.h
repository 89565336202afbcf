// What this node's kernel log says near a failure, for `gpudiag launch`'s
// failure and hang reports: the hardware findings (kmsg_findings.h) logged
// within a minute before the failure and not before the job started, and the
// kernel's OOM-kill line for the rank that died, so a rank killed by SIGKILL
// next to an Xid 79 or an OOM kill says which. Each line is quoted with its
// class (a workload Xid is the application's, a node finding the node's)
// and its action; at most a few lines, each cut, with how many more.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpudiag::hw {

struct KernelNoteWindow {
  std::uint64_t at_usec = 0;         ///< the failure, in the kernel log's clock
  std::uint64_t job_start_usec = 0;  ///< nothing before it is quoted
  double before_s = 60;              ///< how far before the failure to look
  pid_t pid = 0;                     ///< the rank that died (its OOM-kill line), 0 none
};

struct KernelNote {
  std::vector<std::string> lines;  ///< "node: Xid 79 (...) on 0000:3b:00 at 12:03:44: reboot the node"
  std::string error;               ///< why the kernel log could not be read ("" when read)
};

/// Reads `kmsg` (bounded: at most 16 MiB, 8 lines kept) for `w`'s window.
KernelNote kernel_note(const KernelNoteWindow& w, const std::string& kmsg = "/dev/kmsg");

/// The report's text: "the kernel log of <host> within a minute before it:"
/// and the lines indented; when it has none, `quiet_ok` gives "" and
/// otherwise one line saying so (or why the log could not be read).
std::string kernel_note_text(const KernelNote& n, const std::string& host, bool quiet_ok);

}  // namespace gpudiag::hw
