// One rank's flight-recorder dump as gpudiag uses it: the fields of torch's layout that the
// analysis reads, typed, from the plain values a reader decoded.
//
// The layout, as torch writes it (torch/csrc/distributed/c10d/FlightRecorderDetail.hpp:
// FlightRecorder::dump_dict for the pickle, dump_json for JSON; key names are the
// DEFINE_CONSTANTs of FlightRecorder.hpp, and of NCCLUtils.hpp before 2.4):
//   version          "2.10" (a str; minor versions only add fields, says FlightRecorder.hpp)
//   pg_config        {group name: {"name", "desc", "ranks": "[0, 1, 2, 3]"}} (getPgConfig;
//                    ranks is a str, ranks_str() of TraceUtils.h, its global ranks)
//   pg_status        {str(pg_id): {"last_enqueued_collective", "last_started_collective",
//                    "last_completed_collective"}} (getPgStatus; ints, strs in JSON; -1: none)
//   entries          [{record_id, pg_id, process_group: (name, desc), collective_seq_id,
//                    p2p_seq_id, op_id, profiling_name, time_created_ns, input_sizes
//                    [[dims]...], input_dtypes ["Float"...], output_sizes, output_dtypes,
//                    state "scheduled"|"started"|"completed", time_discovered_started_ns,
//                    time_discovered_completed_ns (None, or 0 in JSON, until seen), retired,
//                    timeout_ms, is_p2p, frames, ...}] in record order (getCollectiveTrace)
//   nccl_comm_state  optional, not read
// Versions 1.x named collective_seq_id "seq_id" and had no process_group: read with those.
// An entry without the fields the analysis needs is skipped and counted in a note; a root
// that is not such a dict is a FormatError.
//
// What a dump may make gpudiag hold (docs/fr.md, "Limits"): group names and descriptions
// are cut to kMaxNameBytes where they are read, and pg_config may list at most
// kMaxGroupRanks ranks in one group and kMaxDumpRanks in all its groups; past either the
// dump is refused (a member list cut short would misplace ranks, so none is cut).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "flight_recorder/value.h"

namespace gpudiag::fr {

/// Torch names groups "0", "1", ... and describes them "default_pg", "mesh_tp": longer is cut.
inline constexpr std::size_t kMaxNameBytes = 256;
/// A job of a million ranks fits in one group twice over, and a rank's world group and three
/// more of that size in one dump (4 bytes a rank, 16 MiB).
inline constexpr std::size_t kMaxGroupRanks = std::size_t{1} << 21;
inline constexpr std::size_t kMaxDumpRanks = std::size_t{1} << 22;

/// Where a collective got on one rank. Ordered: each state implies the ones before it.
enum class State : std::uint8_t { not_scheduled, scheduled, started, completed };
const char* state_name(State s);  ///< "not_scheduled", "scheduled", "started", "completed"

/// What a collective was: its name and tensors, as its entry says. At most kMaxTensors
/// tensors of kMaxDims dimensions and dtypes are kept; `cut` says more were left out.
struct Op {
  static constexpr std::size_t kMaxTensors = 16, kMaxDims = 8;
  std::string name;  ///< profiling_name, "nccl:all_reduce"
  std::vector<std::vector<std::int64_t>> in_sizes, out_sizes;
  std::vector<std::string> in_dtypes, out_dtypes;
  bool cut = false;
  bool known() const { return !name.empty(); }
};

struct Entry {
  std::string group;       ///< process_group[0]: the group's name, pg_config's key
  std::string group_desc;  ///< process_group[1]: "default_pg", "tp_group", "undefined"
  std::int64_t pg_id = -1;
  std::int64_t record_id = -1;
  std::int64_t seq = -1;      ///< collective_seq_id
  std::int64_t p2p_seq = -1;  ///< p2p_seq_id: a send/recv's own number in its group
  bool p2p = false;           ///< is_p2p (send/recv: seq is not theirs)
  State state = State::scheduled;
  bool start_recorded = false;  ///< time_discovered_started_ns set: this rank times starts
  Op op;
};

struct GroupConfig {
  std::string desc;
  std::vector<int> ranks;  ///< global ranks, sorted
};

struct GroupStatus {
  std::int64_t enqueued = -1, started = -1, completed = -1;
};

struct RankDump {
  int rank = -1;  ///< from the file name (files.h)
  std::string path;
  std::string format;   ///< "pickle protocol 2", "json"
  std::string version;  ///< as written; empty when absent
  std::vector<Entry> entries;
  std::map<std::string, GroupConfig> groups;   ///< pg_config, by group name
  std::map<std::int64_t, GroupStatus> status;  ///< pg_status, by pg_id
  std::vector<std::string> notes;              ///< what was odd in the file, one line each
};

/// The versions whose layout gpudiag reads as it is: "2.0" to "2.10".
bool known_version(std::string_view version);

/// Reads a decoded dump. Throws FormatError when `root` is not a flight-recorder dump.
RankDump read_dump(const Value& root, int rank, std::string path, std::string format);

}  // namespace gpudiag::fr
