// memory_evidence.h: /proc/self/cgroup's v2 path, its memory.events, and the
// kernel log through /dev/kmsg (hw/kmsg.h: non-blocking, at most 4 MiB read).
#include "launch/memory_evidence.h"

#include <fstream>
#include <sstream>

#include "hw/kmsg.h"
#include "util/text.h"

namespace gpudiag::launch {

namespace {

/// The v2 cgroup folder of this process ("" when not on the unified hierarchy).
std::string cgroup_dir(const std::string& proc, const std::string& sys) {
  std::ifstream f(proc + "/self/cgroup");
  std::string line;
  for (int n = 0; n < 64 && std::getline(f, line); ++n)
    if (line.rfind("0::", 0) == 0) return sys + "/fs/cgroup" + line.substr(3);
  return "";
}

/// The kernel log's last line about killing `pid` for memory ("" none), read
/// by the shared reader (hw/kmsg.h) with at most 4 MiB taken.
std::string kernel_oom_line(pid_t pid) {
  const std::string want = "Killed process " + std::to_string(pid) + " ";
  std::string found;
  hw::KmsgLimits limits;
  limits.max_read_bytes = 4u << 20;
  hw::scan_kernel_log(
      "/dev/kmsg",
      [&](const hw::KmsgRecord& r) {
        if (r.message.find(want) != std::string::npos) found = r.message;
      },
      limits);
  return clean_text(found.substr(0, 300));
}

}  // namespace

long oom_kill_count(const std::string& proc_root, const std::string& sys_root) {
  const std::string dir = cgroup_dir(proc_root, sys_root);
  if (dir.empty()) return -1;
  std::ifstream f(dir + "/memory.events");
  std::string key;
  long value = 0;
  for (int n = 0; n < 32 && (f >> key >> value); ++n)
    if (key == "oom_kill") return value;
  return -1;
}

std::string sigkill_memory_note(pid_t pid, long at_start, const std::string& proc_root,
                                const std::string& sys_root) {
  const long now = oom_kill_count(proc_root, sys_root);
  std::string note;
  if (now >= 0 && at_start >= 0 && now > at_start)
    note = "the memory cgroup counted " + std::to_string(now - at_start) + " OOM kill" +
           (now - at_start == 1 ? "" : "s") + " since the job started (memory.events): out of "
           "memory, most likely";
  else if (now >= 0)
    note = "no OOM kill was counted in the memory cgroup (memory.events): killed by someone, "
           "or by an OOM killer outside this cgroup";
  else
    note = "the memory cgroup's counters are not readable here";
  if (const std::string line = kernel_oom_line(pid); !line.empty())
    note += "; the kernel log says: " + line;
  return note;
}

bool oom_kill_seen(pid_t pid, long at_start, const std::string& proc_root,
                   const std::string& sys_root) {
  const long now = oom_kill_count(proc_root, sys_root);
  if (now >= 0 && at_start >= 0 && now > at_start) return true;
  return pid > 0 && !kernel_oom_line(pid).empty();
}

}  // namespace gpudiag::launch
