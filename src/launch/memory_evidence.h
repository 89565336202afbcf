// What a rank killed by SIGKILL leaves as evidence of running out of memory
// (for ML jobs the usual SIGKILL is the kernel's OOM killer, or the cgroup's):
// the oom_kill count of the launcher's cgroup (cgroup v2 memory.events; the
// ranks share it) and, when the kernel log is readable, its last "Killed
// process PID" line for that pid. Bounded reads; nothing found is said so.
#pragma once

#include <sys/types.h>

#include <string>

namespace gpudiag::launch {

/// Snapshot of the cgroup's oom_kill counter (-1 when unreadable), taken at
/// the start of an attempt and compared after a SIGKILL.
long oom_kill_count(const std::string& proc_root = "/proc", const std::string& sys_root = "/sys");

/// One clause for a rank killed by SIGKILL: "the memory cgroup counted 1 OOM
/// kill since the job started; the kernel log says: Out of memory: Killed
/// process 4242 (python3) ..." or "no OOM kill was counted (memory.events)".
std::string sigkill_memory_note(pid_t pid, long oom_kills_at_start,
                                const std::string& proc_root = "/proc",
                                const std::string& sys_root = "/sys");

/// Whether an OOM kill explains a SIGKILL: the cgroup counted one since the
/// attempt started, or the kernel log names `pid` (0: not asked) as killed.
bool oom_kill_seen(pid_t pid, long oom_kills_at_start, const std::string& proc_root = "/proc",
                   const std::string& sys_root = "/sys");

}  // namespace gpudiag::launch
