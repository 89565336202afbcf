// What NCCL's RAS said about a job, typed: the summary gpudiag keeps of its reply to
// `VERBOSE STATUS`, read from either form RAS prints (parse_text, parse_json).
//
// RAS names processes by the IP address of their RAS socket and their pid, and ranks by
// their rank in each communicator (a communicator is named by its hash, 16 hex digits as
// the text prints it). The text form names a rank or process only when it is an outlier
// (src/ras/client_support.cc rasCountIsOutlier: one alone always; in VERBOSE, fewer than
// half of the communicator), so a group may carry a count and no names; the JSON form
// (NCCL 2.28.7 and later) lists every rank, and the groups are derived here by NCCL's own
// rules. Every string in it came from a socket: writers escape it (util/text.h).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag::ras {

/// A process as RAS names it; pid -1 and host "" when it did not say.
struct ProcessRef {
  std::string host;
  long long pid = -1;
  std::string gpus;  ///< its CUDA devices as RAS printed them ("2", "0,1 (NVML 4,5)")
  bool same(const ProcessRef& o) const { return host == o.host && pid == o.pid; }
};

/// One rank of one communicator.
struct RankRef {
  long long rank = -1;  ///< the rank in that communicator
  ProcessRef process;
};

/// Ranks that share one value: how far they got (operations launched) or their state.
struct ValueGroup {
  std::string value;           ///< "120", "0", or a state ("RUNNING", "ABORT", "NOCOMM")
  long long count = 0;         ///< how many ranks RAS says have it
  std::vector<RankRef> ranks;  ///< those it named (every one, from JSON)
};

/// Whether counts that differ moved between two samples (motion.h). NCCL bumps a rank's
/// count when its host launches the collective, and RAS reads the processes at different
/// moments, so on a busy job counts differ by a launch or two at any instant.
enum class Motion {
  unknown,  ///< one sample only (or the second could not tell)
  moved,    ///< every rank behind moved: operations in flight
  still,    ///< a rank behind did not move: it is where the job waits
};

/// A communicator whose ranks disagree: on an operation's count, or on their state.
struct Mismatch {
  std::string comm;          ///< its hash, 16 hex digits
  long long comm_size = -1;  ///< -1 when the text did not say
  std::string what;          ///< "AllReduce", ... ; "collective" (2.24, 2.25: one count); "status"
  std::vector<ValueGroup> groups;  ///< the most ranks first
  /// Counts only: what a second sample showed, the values of the groups behind whose ranks
  /// did not move, and the groups in the second sample (empty: the counts agreed there).
  Motion motion = Motion::unknown;
  std::vector<std::string> still;
  std::vector<ValueGroup> later;
  bool counts() const { return what != "status"; }
};

/// Ranks of a communicator that reported an NCCL error.
struct RankError {
  std::string comm;
  std::string phase;  ///< "initialization" or "asynchronous"
  std::string error;  ///< as RAS words it: "Remote process error"
  long long count = 0;
  std::vector<RankRef> ranks;
};

/// Ranks of a communicator that RAS got no data from (their processes did not answer).
struct MissingRanks {
  std::string comm;
  long long count = 0;
  std::vector<RankRef> ranks;
};

struct Report {
  std::string nccl_version;                         ///< "2.28.9"
  std::string format;                               ///< "text" or "json"
  long long nodes = -1, processes = -1, gpus = -1;  ///< the job summary; -1 not said
  long long communicators = -1;
  /// Processes RAS considers dead (unreachable over its network), and those that did not
  /// answer its collective in time; the counts are RAS's, the lists those it named.
  long long dead_count = 0, unresponsive_count = 0;
  std::vector<ProcessRef> dead, unresponsive;
  std::vector<MissingRanks> missing;
  std::vector<Mismatch> mismatches;
  std::vector<RankError> errors;
  /// Every process the report names (from JSON: every one RAS knows), for telling whose
  /// job it is.
  std::vector<ProcessRef> seen;
  long long timeouts = 0;  ///< RAS's own timeouts while it gathered: its view is partial
  double collection_s = -1;
  std::vector<std::string> notes;
  /// NCCL 2.26 to 2.28.9's text with a communicator missing ranks among two or more: the
  /// communicators after it were read from the wrong bytes (client_support.cc
  /// rasClientRunComms strides over rasCollCommsMissingRank; fixed in 2.29.2), so its
  /// per-communicator lines cannot be trusted. The job-wide lines (dead, unresponsive) can.
  bool rows_unreliable = false;
  /// Counts that differ are sampled twice (motion.h): 2 when a second sample was compared,
  /// the seconds between them, and why there was one only when counts differed.
  int samples = 1;
  double sample_gap_s = 0;
  std::string one_sample_why;

  /// Nothing is wrong in what RAS saw (which is not everything when timeouts > 0).
  bool clean() const {
    return dead_count == 0 && unresponsive_count == 0 && missing.empty() && mismatches.empty() &&
           errors.empty();
  }
};

/// A reply that is not what RAS prints; what() is one line.
class ParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The text report (NCCL 2.24 to 2.30). Unknown lines are skipped; a reply without RAS's
/// first line ("NCCL version ...") or its "Errors" section is a ParseError.
Report parse_text(std::string_view reply);

/// The JSON document (NCCL 2.28.7 and later), including 2.28's, which lacks a comma after
/// a missing rank's "nvml_dev". Nesting deeper than RAS's, or fields of the wrong type,
/// are a ParseError.
Report parse_json(std::string_view reply);

/// Every process `r` names, each once (its `seen`, and those of its findings).
std::vector<ProcessRef> named_processes(const Report& r);

/// Reports from several RAS sockets as one: processes by host and pid, mismatches and
/// errors by communicator and what, the fuller one kept; counts the largest seen.
Report merge(const std::vector<Report>& reports);

/// "0-2,5": runs of three or more as a range.
std::string rank_list(std::vector<long long> ranks);

}  // namespace gpudiag::ras
