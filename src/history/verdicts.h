// The records each command's verdict makes (record.h), one per host it judged:
//
//   check   rank 0, one per host of the job: fault when one of its ranks
//           failed on its own (broken), died or vanished (dead, gone), with
//           those ranks' GPUs marked at fault; other when its ranks were only
//           stopped by another's failure or ran out of time waiting; ok else.
//           A rank never heard from has no host to blame.
//   sweep   rank 0, one per node verdict: fault for every state but OK.
//   launch  each launcher, one for its own node at the job's end: fault when
//           an attempt found the node at fault (node_fault.h: a signal its
//           rank did not ask for, node-class evidence in the kernel log);
//           other when the job failed otherwise; ok when it succeeded.
//
// The host's GPUs and NICs, where the writer can see them: check's ranks'
// GPU UUIDs and bus ids; the launcher's node's GPUs from the NVIDIA driver's
// /proc/driver/nvidia/gpus/*/information (no CUDA context in the launcher)
// and NIC names from /sys/class/net and /sys/class/infiniband.
#pragma once

#include <string>
#include <vector>

#include "checks/check.h"
#include "history/record.h"
#include "launch/restart_policy.h"
#include "sweep/run.h"

namespace gpudiag::history {

/// Which job a record belongs to, and when it was written.
struct Stamp {
  std::string job_id, job_source;
  std::string time;  ///< utc_time()
};

/// The stamp of a verdict reached now; a job by hand ("gpudiag-by-hand") has no id.
Stamp stamp_now(const std::string& job_id, const std::string& job_source);

std::vector<Record> check_records(const CheckResult& result, const Stamp& stamp,
                                  const std::vector<std::string>& my_nics);
/// `left_out`: hosts --exclude-history kept out of the rounds. Their records
/// say "other", not a fresh fault: a verdict that did not test a host does not
/// count against it again, so its faults age out of the window.
std::vector<Record> sweep_records(
    const sweep::SweepOutcome& out, const Stamp& stamp,
    const std::vector<std::pair<std::string, std::string>>& left_out = {});
Record launch_record(const std::vector<launch::AttemptEnd>& attempts, int exit_status,
                     const std::string& host, const Stamp& stamp);

/// The GPUs the NVIDIA driver lists under `proc_root`/driver/nvidia/gpus.
std::vector<GpuId> local_gpus(const std::string& proc_root = "/proc");
/// Network and InfiniBand device names under `sys_root`/class (not "lo").
std::vector<std::string> local_nics(const std::string& sys_root = "/sys");

}  // namespace gpudiag::history
