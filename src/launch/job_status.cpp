#include "launch/job_status.h"

#include <algorithm>
#include <optional>

#include "util/error.h"

namespace gpudiag::launch {

namespace {

bool exited_with(const RankOutcome& r, int code) {
  return r.status && !r.status->signaled && r.status->value == code;
}

/// The shell status of the lowest-numbered rank that `counts`, if any.
template <typename Pred>
std::optional<int> lowest(const std::vector<RankOutcome>& ranks, Pred counts) {
  const RankOutcome* best = nullptr;
  for (const auto& r : ranks)
    if (counts(r) && (!best || r.rank < best->rank)) best = &r;
  if (!best) return std::nullopt;
  return best->status->shell_status();
}

}  // namespace

int job_exit_status(const std::vector<RankOutcome>& ranks, const JobStop& stop) {
  auto any_exited = [&](ExitCode code) {
    return std::any_of(ranks.begin(), ranks.end(), [&](const RankOutcome& r) {
      return exited_with(r, static_cast<int>(code));
    });
  };
  if (stop.interrupted_by) return 128 + stop.interrupted_by;
  for (auto code : {ExitCode::internal, ExitCode::usage})
    if (any_exited(code)) return static_cast<int>(code);
  if (auto s = lowest(ranks, [](const RankOutcome& r) {
        return r.status && r.status->signaled && !r.killed_by_launcher;
      }))
    return *s;
  // Under the launcher's own deadline, a rank it had stopped (or that ended
  // while it stopped the job) exits as the stop made it: an effect.
  auto effect = [&](const RankOutcome& r) { return stop.deadline && r.stopped_by_launcher; };
  if (std::any_of(ranks.begin(), ranks.end(), [&](const RankOutcome& r) {
        return !effect(r) && exited_with(r, static_cast<int>(ExitCode::broken));
      }))
    return static_cast<int>(ExitCode::broken);
  if (any_exited(ExitCode::timeout) || stop.deadline) return static_cast<int>(ExitCode::timeout);
  if (auto s = lowest(ranks, [&](const RankOutcome& r) {
        return !effect(r) && r.status && !r.status->signaled && r.status->value != 0;
      }))
    return *s;
  // Not reached by the launcher's own paths (it kills only after one of the
  // above applies), but a rank that did not end OK must never read as success.
  if (stop.gave_up || std::any_of(ranks.begin(), ranks.end(), [](const RankOutcome& r) {
        return !r.status || !r.status->ok();
      }))
    return static_cast<int>(ExitCode::broken);
  return 0;
}

}  // namespace gpudiag::launch
