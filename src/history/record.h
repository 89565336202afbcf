// One record of gpudiag's memory across jobs (--history DIR, GPUDIAG_HISTORY):
// what one verdict said about one host, written by launch, check or sweep
// (docs/json.md, "gpudiag-history/1"):
//
//   {"schema": "gpudiag-history/1", "time": "2026-12-02T20:31:07Z",
//    "command": "check", "host": "node7",
//    "job": {"id": "slurm-4242.0", "source": "SLURM_JOB_ID=4242 SLURM_STEP_ID=0"},
//    "verdict": "fault", "reason": "rank 3 broken in device: ...",
//    "gpus": [{"uuid": "GPU-8f2c...", "serial": "", "bus_id": "0000:3b:00.0",
//              "at_fault": true}],
//    "nics": ["ib0", "mlx5_0"]}
//
// verdict is "ok" (the host passed), "fault" (the verdict blames this host)
// or "other" (the job did not pass, for a reason that is not this host's: a
// workload error, a peer that failed, a wait that ran out).
//
// A record read back is untrusted input (any user who can write the shared
// folder wrote it, and a torn or foreign file may sit there): parse_record()
// checks every field's type and bound and refuses the record as a whole, in
// one line, rather than keep a part of it.
#pragma once

#include <cstddef>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gpudiag::history {

inline constexpr const char* kSchema = "gpudiag-history/1";
/// A record file larger than this is skipped unread: a record of 64 GPUs and
/// 64 NICs with a full reason stays well under it.
inline constexpr std::size_t kMaxRecordBytes = 64 * 1024;
inline constexpr std::size_t kMaxGpus = 64, kMaxNics = 64;
inline constexpr std::size_t kMaxTextBytes = 1024;  ///< reason, job source
inline constexpr std::size_t kMaxNameBytes = 255;   ///< host, ids, names

enum class Verdict { ok, fault, other };
const char* verdict_name(Verdict v);

struct GpuId {
  std::string uuid;       ///< "GPU-8f2c..." ("" unknown)
  std::string serial;     ///< the board's serial ("" unknown)
  std::string bus_id;     ///< "0000:3b:00.0" ("" unknown)
  bool at_fault = false;  ///< the verdict blames this GPU itself
};

struct Record {
  std::string time;     ///< UTC, "YYYY-MM-DDTHH:MM:SSZ" (sorts as text)
  std::string command;  ///< "launch", "check" or "sweep"
  std::string host;
  std::string job_id, job_source;  ///< which job ("slurm-4242.0"), and from what
  Verdict verdict = Verdict::ok;
  std::string reason;  ///< "" for ok
  std::vector<GpuId> gpus;
  std::vector<std::string> nics;
};

/// `t` as the record's "time".
std::string utc_time(std::time_t t);

/// The record as JSON (schema first). Over-long text is cut to its bound and
/// the lists to theirs, so that every record written reads back.
nlohmann::ordered_json to_json(const Record& r);

/// The record in `text`, or nullopt with `why` set to one line ("not JSON",
/// "'host' is not a string of 1-255 bytes", ...).
std::optional<Record> parse_record(const std::string& text, std::string& why);

}  // namespace gpudiag::history
