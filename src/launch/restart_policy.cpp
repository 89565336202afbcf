// The restart policy (restart_policy.h): an attempt's exception, told by its
// rank, message and the user's innermost frame; the decision after each
// attempt, and the line that says a repeated error stops the restarts; where
// a hung attempt stood (hang_point()), compared the same way.
#include "launch/restart_policy.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "launch/root_cause.h"
#include "launch/wait_frames.h"

namespace gpudiag::launch {

namespace {

/// `File "x.py", line 12, in f` into ("x.py", 12); false when it is not one.
bool restart_frame_place(const std::string& where, std::string& file, int& line) {
  static const std::string head = "File \"", mid = "\", line ";
  if (where.compare(0, head.size(), head) != 0) return false;
  const auto end = where.find(mid, head.size());
  if (end == std::string::npos || end == head.size()) return false;
  const char* digits = where.c_str() + end + mid.size();
  char* after = nullptr;
  const long n = std::strtol(digits, &after, 10);
  if (after == digits || n <= 0 || n > 100000000) return false;
  file = where.substr(head.size(), end - head.size());
  line = static_cast<int>(n);
  return true;
}

/// A stack's frame "path:42 in main" into ("path", 42); false when it is not one.
bool restart_stack_place(const std::string& frame, std::string& file, int& line) {
  for (auto colon = frame.find(':'); colon != std::string::npos;
       colon = frame.find(':', colon + 1)) {
    const auto in = frame.find(" in ", colon);
    if (colon == 0 || in == std::string::npos || in == colon + 1 || in - colon > 10) continue;
    const std::string digits = frame.substr(colon + 1, in - colon - 1);
    if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      continue;
    const long n = std::strtol(digits.c_str(), nullptr, 10);
    if (n <= 0 || n > 100000000) return false;
    file = frame.substr(0, colon);
    line = static_cast<int>(n);
    return true;
  }
  return false;
}

bool has_any(const std::string& text, std::initializer_list<std::string_view> words) {
  return std::any_of(words.begin(), words.end(),
                     [&](std::string_view w) { return text.find(w) != std::string::npos; });
}

}  // namespace

const char* restart_policy_name(RestartPolicy policy) {
  return policy == RestartPolicy::always ? "always" : "on-new-error";
}

const char* after_attempt_name(AfterAttempt after) {
  switch (after) {
    case AfterAttempt::done:
      return "done";
    case AfterAttempt::restart:
      return "restart";
    case AfterAttempt::repeated_error:
      return "repeated_error";
    case AfterAttempt::repeated_hang:
      return "repeated_hang";
    case AfterAttempt::out_of_restarts:
      return "out_of_restarts";
    case AfterAttempt::not_restartable:
      return "not_restartable";
  }
  return "done";
}

std::string AttemptError::place() const {
  const auto slash = file.rfind('/');
  return (slash == std::string::npos ? file : file.substr(slash + 1)) + ":" + std::to_string(line);
}

bool not_the_workloads(const std::string& message) {
  if (consequence_of_a_peer(message) || replica_divergence(message).diverged) return true;
  // A GPU or its driver that failed under the workload (CUDA's words).
  if (has_any(message, {"ECC error", "fallen off the bus", "GPU is lost", "busy or unavailable",
                        "no CUDA-capable device", "driver version is insufficient", "Xid"}))
    return true;
  // NCCL's errors of the system, the network or its own (not "invalid usage",
  // which is the workload's).
  if (message.find("NCCL") != std::string::npos &&
      has_any(message, {"system error", "internal error", "unhandled cuda error", "remote process",
                        "network error"}))
    return true;
  // A shared file system or the network under the job.
  return has_any(message, {"Stale file handle", "Input/output error", "Connection refused",
                           "No route to host", "Network is unreachable"});
}

std::optional<AttemptError> attempt_error(int rank, const std::optional<ExitStatus>& how,
                                          const std::optional<ChildError>& error) {
  if (rank < 0 || !how || how->signaled || how->ok() || !error) return std::nullopt;
  // The reader's own words for a file it could not read start with "(".
  if (error->message.empty() || error->message.front() == '(') return std::nullopt;
  if (not_the_workloads(error->message)) return std::nullopt;
  AttemptError out;
  out.rank = rank;
  out.message = error->message;
  if (!restart_frame_place(error->where, out.file, out.line)) return std::nullopt;
  return out;
}

std::optional<AttemptError> hang_point(const std::vector<RankStack>& stacks) {
  const auto waited = waited_for_ranks(stacks);
  if (waited.size() != 1) return std::nullopt;
  const auto it = std::find_if(stacks.begin(), stacks.end(),
                               [&](const RankStack& s) { return s.rank == waited.front(); });
  if (it == stacks.end() || it->source != "python" || it->waiting || it->frames.empty() ||
      library_frame(it->frames.front()))
    return std::nullopt;
  // Its own line, yet inside a native wait (a sync on its GPU, a store or a
  // work's wait): not its own code's hang.
  if (python_wait(it->frames).kind != WaitKind::none ||
      (!it->native.empty() && native_wait(it->native).kind != WaitKind::none))
    return std::nullopt;
  AttemptError out;
  out.rank = it->rank;
  out.local = it->local_rank;
  out.hang = true;
  if (!restart_stack_place(it->frames.front(), out.file, out.line)) return std::nullopt;
  return out;
}

AttemptEnd RestartJudge::decide(int attempt, int exit_status, bool restartable,
                                std::optional<AttemptError> error) {
  AttemptEnd end;
  end.attempt = attempt;
  end.exit_status = exit_status;
  end.error = error;
  end.policy = restart_policy_name(policy_);
  if (exit_status == 0)
    end.then = AfterAttempt::done;
  else if (!restartable)
    end.then = AfterAttempt::not_restartable;
  else if (attempt >= max_)
    end.then = AfterAttempt::out_of_restarts;
  else if (policy_ == RestartPolicy::on_new_error && error && last_ &&
           last_attempt_ == attempt - 1 && error->same_as(*last_)) {
    const std::string attempts =
        std::to_string(last_attempt_) + " and " + std::to_string(attempt) + " (rank " +
        std::to_string(error->rank);
    end.then = error->hang ? AfterAttempt::repeated_hang : AfterAttempt::repeated_error;
    end.line = error->hang ? "the job stopped at the same point in attempts " + attempts +
                                 " waited for by the others, in its own code at " +
                                 error->place() + "): a workload hang"
                           : "the same error repeated in attempts " + attempts + " raised " +
                                 error->message + " at " + error->place() + "): a workload error";
    end.line += "; not restarting (--restart-policy always would)";
  } else {
    end.then = AfterAttempt::restart;
  }
  last_ = std::move(error);
  last_attempt_ = attempt;
  return end;
}

}  // namespace gpudiag::launch
