// The cause among a node's failed ranks (root_cause.h): the first failure
// unless its exception is a peer's failure seen from here and another rank
// that failed on its own raised something else.
#include "launch/root_cause.h"

#include <algorithm>
#include <string_view>

#include "launch/error_file.h"

namespace gpudiag::launch {

bool consequence_of_a_peer(const std::string& message) {
  // Gloo's and the TCP store's words for a peer that went away, NCCL's for
  // a rank that exited, torch's for a communicator aborted after a failure
  // and for a collective that timed out waiting on someone.
  static constexpr std::string_view kWords[] = {
      "Connection closed by peer", "Connection reset by peer", "Broken pipe",
      "remote process exited",     "failed to recv, got 0 bytes", "communicator was aborted",
      "DistNetworkError",          "Timed out",                  "timed out",
      "Timeout",                   "collective operation timeout", "SignalException",
      "got signal: 15"};
  return std::any_of(std::begin(kWords), std::end(kWords), [&](std::string_view w) {
    return message.find(w) != std::string::npos;
  });
}

RootCause root_cause(int first, const std::vector<RankOutcome>& outcomes,
                     const std::string& error_dir) {
  RootCause out{first, {}};
  if (first < 0 || error_dir.empty()) return out;
  auto error_of = [&](int local) {
    return read_child_error(error_dir + "/" + std::to_string(local) + "/error.json");
  };
  const auto first_error = error_of(first);
  if (!first_error || !consequence_of_a_peer(first_error->message)) return out;
  std::optional<ChildError> best;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const auto& o = outcomes[i];
    const int local = static_cast<int>(i);
    // Ended on its own, not by the launcher's stop, and not with a verdict.
    if (local == first || !o.status || o.status->ok() || o.killed_by_launcher ||
        !o.verdict.empty())
      continue;
    auto e = error_of(local);
    if (!e || consequence_of_a_peer(e->message)) continue;
    if (!best || (e->timestamp > 0 && (best->timestamp == 0 || e->timestamp < best->timestamp))) {
      best = std::move(e);
      out.local = local;
    }
  }
  if (best) out.first_words = first_error->message;
  return out;
}

}  // namespace gpudiag::launch
