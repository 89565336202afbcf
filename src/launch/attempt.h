// One attempt of gpudiag launch on this node, as launcher.cpp's loop runs it.
//
// run_attempt() resolves the job, lets the observer settle it (store,
// rendezvous), opens the rank log files, spawns the ranks and supervises them,
// then says what the attempt's failure came of (its root cause, the ranks'
// flight recorder) and whether this node was at fault (node_fault.h).
// LogPlan and the folder helpers (attempt_files.cpp) say where each attempt's
// files go: torchrun's layout under --log-dir, else a private folder for a
// torch program's error files.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "launch/job.h"
#include "launch/observer.h"
#include "launch/options.h"
#include "launch/output.h"
#include "launch/restart_policy.h"
#include "util/env.h"

namespace gpudiag::launch {

/// "gpudiag launch: MESSAGE" on stderr, in one write.
void launcher_say(const std::string& message);

/// Where each rank's stdout.log and stderr.log go (torchrun's layout):
/// DIR/<run id>_<launch id>/attempt_<k>/<local rank>/. Empty `base`: no files.
struct LogPlan {
  std::string base;
  const LaunchOptions* options = nullptr;
  std::string error_made;  ///< the private folder made for error files when base is empty

  /// Which of kStdOut/kStdErr of local rank `local` go to files.
  int to_files(int local) const;
  /// Which of them stay off the console (--redirects).
  int console_only_not(int local) const;
};

/// The log plan of the job whose first attempt resolved as `first`.
LogPlan plan_logs(const LaunchOptions& o, const JobInfo& first);

/// A rank log file `name` in `dir` (made if missing); throws UsageError.
std::shared_ptr<LogFile> open_log(const std::string& dir, const char* name);

/// A fresh folder of this user's, mode 0700: $TMPDIR/gpudiag-launch-XXXXXX
/// (/tmp when TMPDIR is unset or not an absolute path).
std::string private_folder();

/// Where a torch program's ranks dump their flight recorder (torch appends
/// the rank): a folder of the attempt's, made here.
std::string flight_recorder_prefix(const JobInfo& job);

/// A torch program's error files: DIR/<run id>_<launch id>/attempt_K/<local
/// rank>/error.json, under --log-dir's run folder, else a fresh private one
/// (made once, kept in `made`).
std::string error_root(const LogPlan& logs, const JobInfo& job, std::string& made);

/// How one attempt ended on this node.
struct Attempt {
  int status = 0;
  bool restartable = false;
  std::string failure;
  std::optional<AttemptError> error;  ///< the named cause's exception (restart_policy.h)
  std::string node_fault;             ///< why this node is at fault (node_fault.h), else ""
};

/// Runs attempt `restart` (0 first) with `timeout_s` left of --timeout;
/// `logs` is planned at the first attempt and kept for the later ones.
Attempt run_attempt(const LaunchOptions& options, const Env& env, LaunchObserver& watcher,
                    int restart, double timeout_s, LogPlan& logs);

}  // namespace gpudiag::launch
