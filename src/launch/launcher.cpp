// run_launch(): runs the job's attempts on this node (attempt.h runs one)
// and repeats them for --max-restarts while the job ends by a rank's failure
// or a hang and the restart policy (restart_policy.h) does not call it a
// repeated workload error or hang, with the remaining --timeout, saying so
// once per restart.
// A launcher the rounds left out (rounds.h) ends with the job. The private
// folder made for error files goes when the job ends well.
#include "launch/launcher.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "launch/attempt.h"
#include "launch/restart_policy.h"
#include "launch/rounds.h"

namespace gpudiag::launch {

namespace {

int run_attempts(const LaunchOptions& options, const Env& env,
                 const std::function<LaunchObserver&(int)>& observer_for) {
  const auto started = std::chrono::steady_clock::now();
  LogPlan logs{{}, &options, {}};
  RestartJudge judge(options.restart_policy, options.max_restarts);
  for (int restart = 0;; ++restart) {
    double timeout_s = options.timeout_s;
    if (timeout_s > 0) {
      timeout_s -=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (timeout_s <= 0.001) timeout_s = 0.001;
    }
    LaunchObserver& observer = observer_for(restart);
    Attempt attempt;
    try {
      attempt = run_attempt(options, env, observer, restart, timeout_s, logs);
    } catch (const JobEndedWithout& e) {  // left out, or late, until the job ended (rounds.h)
      launcher_say(e.what());
      return e.status();
    }
    AttemptEnd end =
        judge.decide(restart, attempt.status, attempt.restartable, std::move(attempt.error));
    end.node_fault = attempt.node_fault;
    if (!end.line.empty()) launcher_say(end.line);
    observer.on_attempt_end(end);
    if (end.then != AfterAttempt::restart) {
      // The private folder made for error files and the stack hook is kept
      // only when something failed (its error files are the evidence).
      // gpudiag's own ranks leave only their verdicts there, read already.
      const bool only_verdicts = !options.no_gpudiag && !options.python_entry;
      if ((attempt.status == 0 || only_verdicts) && !logs.error_made.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(std::filesystem::path(logs.error_made).parent_path(), ec);
      }
      return attempt.status;
    }
    launcher_say("restarting the whole local group (restart " + std::to_string(restart + 1) +
                 " of " + std::to_string(options.max_restarts) + ", --max-restarts) after " +
                 attempt.failure);
  }
}

}  // namespace

int run_launch(const LaunchOptions& options, const Env& env, LaunchObserver* observer) {
  LaunchObserver no_observer;
  LaunchObserver& watcher = observer ? *observer : no_observer;
  return run_attempts(options, env, [&](int) -> LaunchObserver& { return watcher; });
}

int run_launch(const LaunchOptions& options, const Env& env, const ObserverFactory& make_observer) {
  std::unique_ptr<LaunchObserver> current;
  return run_attempts(options, env, [&](int) -> LaunchObserver& {
    current.reset();  // the last attempt's store goes before the next one's starts
    current = make_observer();
    return *current;
  });
}

}  // namespace gpudiag::launch
