// gpudiag launch's last line, how every rank ended (summary.h).
#include "launch/summary.h"

#include <algorithm>

#include "util/strings.h"

namespace gpudiag::launch {

std::string job_summary(const std::vector<RankOutcome>& outcomes, const std::string& note) {
  std::size_t ok = 0;
  std::string first;
  // Ranks that ended alike, in order of their lowest rank.
  struct Group {
    std::string what;
    bool stopped;
    std::vector<int> ranks;
  };
  std::vector<Group> groups;
  std::vector<int> verdict_ranks;
  std::string verdict;  // the first rank's (they agree: one judge decided)
  for (const auto& o : outcomes) {
    if (o.status && o.status->ok()) {
      ++ok;
    } else if (!o.verdict.empty()) {
      verdict_ranks.push_back(o.rank);
      if (verdict.empty()) verdict = o.verdict;
    } else if (o.first_failure && o.status) {
      first = "rank " + std::to_string(o.rank) + " " + o.status->describe() + " (first failure)";
    } else {
      auto what = o.status ? o.status->describe() : std::string("did not exit");
      // A rank the launcher had signalled but that died of another signal
      // (a crash, a kill from outside) was not stopped by the launcher.
      bool stopped = o.status && o.status->signaled ? o.killed_by_launcher : o.stopped_by_launcher;
      auto same = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
        return g.what == what && g.stopped == stopped;
      });
      if (same == groups.end())
        groups.push_back({what, stopped, {o.rank}});
      else
        same->ranks.push_back(o.rank);
    }
  }
  std::string line;
  if (!verdict_ranks.empty() && ok == 0 && verdict_ranks.size() == outcomes.size()) {
    line = std::to_string(outcomes.size()) + "/" + std::to_string(outcomes.size()) +
           " ranks finished; their verdict: " + verdict;
  } else {
    line = std::to_string(ok) + "/" + std::to_string(outcomes.size()) + " ranks OK";
    if (!verdict_ranks.empty())
      line += "; " + std::string(verdict_ranks.size() == 1 ? "rank " : "ranks ") +
              format_ranks(verdict_ranks) + " finished with a verdict: " + verdict;
  }
  if (!first.empty()) line += "; " + first;
  for (const auto& g : groups) {
    line += "; " + std::string(g.ranks.size() == 1 ? "rank " : "ranks ") + format_ranks(g.ranks) +
            " " + g.what;
    if (g.stopped) line += " (stopped by the launcher)";
  }
  if (!note.empty()) line += "; " + note;
  return line;
}

}  // namespace gpudiag::launch
