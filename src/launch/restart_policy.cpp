// The restart policy (restart_policy.h): an attempt's exception, told by its
// rank, message and the user's innermost frame; the decision after each
// attempt, and the line that says a repeated error stops the restarts.
#include "launch/restart_policy.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "launch/root_cause.h"

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
    end.then = AfterAttempt::repeated_error;
    end.line = "the same error repeated in attempts " + std::to_string(last_attempt_) + " and " +
               std::to_string(attempt) + " (rank " + std::to_string(error->rank) + " raised " +
               error->message + " at " + error->place() +
               "): a workload error; not restarting (--restart-policy always would)";
  } else {
    end.then = AfterAttempt::restart;
  }
  last_ = std::move(error);
  last_attempt_ = attempt;
  return end;
}

}  // namespace gpudiag::launch
