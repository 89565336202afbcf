// What NCCL's RAS says about the job `gpudiag launch` runs, for its hang report and after
// its first failure: the launcher asks its own node's RAS (the socket every NCCL 2.24+
// process of the node serves, at the ranks' NCCL_RAS_ADDR, default localhost:28028)
// `VERBOSE STATUS` on a thread of its own, while its loop goes on relaying and reaping,
// with a short deadline (a second sample when counts differ, nccl_ras/motion.h), and
// prints RAS's findings with its own ranks' names: a process
// RAS names by pid is the rank whose process it is, or whose descendant (a wrapper script
// that execs nothing). An answer whose processes are none of this node's ranks is
// another job's and is said to be so, not used. When nothing answers, one line says so:
// no finding is claimed about what was not seen. Each node's launcher asks its own node
// and prints on that node.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "nccl_ras/client.h"
#include "nccl_ras/endpoint.h"

namespace gpudiag::launch {

/// Whether and where to ask: from the ranks' environment and --nccl-ras-timeout.
struct RasPlan {
  double timeout_s = 0;  ///< 0: never ask
  /// When counts differ, a second sample this much later tells collectives in flight from a
  /// rank that stopped (nccl_ras/motion.h); both within the deadline, or one said to be one.
  double sample_gap_s = 2;
  ras::RasSettings settings;
};

/// A rank of this node, as the launcher knows it.
struct LocalRank {
  pid_t pid = 0;
  int rank = 0;
  int local_rank = 0;
};

/// The lines to print for an outcome: a header, then one indented line per finding (or
/// for nothing wrong, or for an answer that is another job's). `why` says when it was
/// asked ("--hang-timeout 5 s", "after rank 2 failed"). Exposed for tests.
std::vector<std::string> ras_note_lines(const ras::Outcome& outcome, const RasPlan& plan,
                                        const std::vector<LocalRank>& ranks,
                                        const std::string& host, const std::string& why);

/// The lines when the plan says not to ask (NCCL_RAS_ENABLE=0, a bad NCCL_RAS_ADDR);
/// empty when it says to ask, or when --nccl-ras-timeout is 0.
std::vector<std::string> ras_not_asked(const RasPlan& plan);

/// One question to RAS, asked at construction on a thread of its own.
class RasProbe {
 public:
  RasProbe(const RasPlan& plan, std::vector<LocalRank> ranks, std::string host, std::string why,
           double deadline_s);
  ~RasProbe();
  RasProbe(const RasProbe&) = delete;
  RasProbe& operator=(const RasProbe&) = delete;

  bool done() const;
  /// Waits for the answer (bounded by the deadline) and returns what to print.
  std::vector<std::string> lines();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace gpudiag::launch
