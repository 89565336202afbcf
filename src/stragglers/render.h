// What --stragglers says: the live lines (`straggler: rank R [host-local]
// arrives N ms late at X% of collectives in group G ...` when a rank is
// named, `... recovered ...` when it is not any more), the end summary
// (`stragglers: none (...)` or one line a spell; a spell seen in NCCL's
// kernel times says `late on its GPU`), the `stragglers` object of
// launch's --json document and the Prometheus textfile's samples.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/prometheus.h"
#include "stragglers/judge.h"

namespace gpudiag::stragglers {

/// "[host-local]" for a global rank ("" when not known).
using RankLabel = std::function<std::string(int rank)>;

/// What the launcher heard besides the judge's verdicts.
struct Heard {
  std::int64_t datagrams = 0;
  std::int64_t records = 0;
  std::int64_t invalid = 0;   ///< lines or datagrams refused
  std::int64_t dropped = 0;   ///< records the ranks could not send (their count)
  std::int64_t unshared = 0;  ///< several nodes: this node's records not shared (too many)
  std::int64_t missed = 0;    ///< several nodes: other nodes' batches gone before read
};

/// The host-side judge's summary with the kernel times' judge's (judge.h):
/// its collectives counted in `kernels`, its spells added where the host-side
/// judge has none for that rank and group.
JudgeSummary merged(const JudgeSummary& host, const JudgeSummary& kernels);

std::string event_line(const Event& event, int window, const RankLabel& label);
/// The end summary: its first line (`stragglers: ...`), then one line a spell.
std::vector<std::string> summary_lines(const JudgeSummary& s, const Heard& heard,
                                       const RankLabel& label);
nlohmann::json summary_json(const JudgeSummary& s, const Heard& heard, const RankLabel& label);
/// Its samples, labelled with `host`; spells over are 0 on gpudiag_straggler.
void add_samples(PromText& prom, const JudgeSummary& s, const std::string& host,
                 const RankLabel& label);

/// "the default group" for group 0, else "group of ranks 0-3,8".
std::string group_words(int group, const std::vector<int>& members);

}  // namespace gpudiag::stragglers
