// What the history says (gpudiag history DIR, sweep --exclude-history N):
// hosts and GPUs by how often a verdict blamed them, and GPUs that came back
// under another host name (a board moved, or a node renamed: its faults
// follow the GPU, not the name).
//
// A host is counted once per job: the eight ranks of one check, or a launch
// and the check it ran, that all blame one host are one fault. A job is its
// id (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, the rendezvous id); a record without
// one (a run by hand) is a job of its own.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "history/folder.h"
#include "history/record.h"

namespace gpudiag::history {

struct HostTally {
  std::string host;
  int faults = 0;  ///< jobs whose verdict blamed it
  int jobs = 0;    ///< jobs that judged it at all
  std::string last_fault_time, last_reason;
};

struct GpuTally {
  std::string uuid;
  int faults = 0;  ///< jobs whose verdict blamed this GPU itself
  int jobs = 0;
  std::vector<std::string> hosts;  ///< every host it was seen under, first seen first
};

/// A GPU seen under `to` after it was seen under `from`.
struct GpuMove {
  std::string uuid, from, to, time;
};

struct Tally {
  std::vector<HostTally> hosts;  ///< most faults first, then by name
  std::vector<GpuTally> gpus;    ///< most faults first, then by UUID
  std::vector<GpuMove> moves;    ///< oldest first
  std::size_t records = 0;       ///< records counted (at or after `since`)
};

/// The tally of `records` (oldest first) from `since` on ("" all; a record's
/// time format, compared as text).
Tally tally(const std::vector<Record>& records, const std::string& since = "");

/// Hosts blamed in `n` jobs or more, with why in words: "at fault in 3 jobs
/// of the history since 2026-11-02T00:00:00Z (last 2026-12-01T10:12:00Z: rank
/// 3 broken in device: ...)".
std::vector<std::pair<std::string, std::string>> hosts_at_fault(const Tally& t, int n,
                                                                const std::string& since);

/// The report of `gpudiag history`: text, and the JSON document (schema
/// gpudiag-history-report/1, docs/json.md).
std::string tally_text(const Tally& t, const Folder& f, const std::string& since);
nlohmann::json tally_json(const Tally& t, const Folder& f, const std::string& since);

}  // namespace gpudiag::history
